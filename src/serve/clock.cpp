#include <chrono>
#include <thread>

#include "gpuscout/serve/system_under_test.hpp"

namespace gpuscout::serve {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

SteadyClock::SteadyClock() : origin_s_(steady_seconds()) {}

double SteadyClock::now_s() const {
  return steady_seconds() - origin_s_;
}

void SteadyClock::wait_until(double t_s) {
  // sleep_for may wake early (or be cut short by a signal): loop until the time has come.
  for (double left = t_s - now_s(); left > 0; left = t_s - now_s()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(left));
  }
}

}  // namespace gpuscout::serve
