#include "gpuscout/bench/world.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace gpuscout::bench {

void SingleProcessWorld::abort(int exit_code, const std::string& message) {
  fmt::print(stderr, "gpuscout: fatal: {}\n", message);
  std::_Exit(exit_code);
}

}  // namespace gpuscout::bench
