#pragma once
// Small helpers shared by the benchmarks in this backend (no CUDA headers).
#include <cstdint>
#include <string>
#include <vector>

#include "gpuscout/bench/selection.hpp"
#include "gpuscout/cuda/benchmark.hpp"

namespace gpuscout::cuda {

// The items of a list-valued flag (empty when not given).
inline const std::vector<std::string>& option_list(const BenchOptions& options, const std::string& name) {
  static const std::vector<std::string> kEmpty;
  const auto it = options.lists.find(name);
  return it == options.lists.end() ? kEmpty : it->second;
}

// Sizes from a --<flag> list, else the defaults for the run mode.
inline std::vector<std::uint64_t> sizes_for(const BenchOptions& options, const std::string& flag,
                                            const std::vector<std::uint64_t>& quick,
                                            const std::vector<std::uint64_t>& standard,
                                            const std::vector<std::uint64_t>& full) {
  const auto& given = option_list(options, flag);
  if (!given.empty()) return bench::parse_byte_list(given, flag);
  switch (options.mode) {
    case BenchMode::quick:
      return quick;
    case BenchMode::full:
      return full;
    default:
      return standard;
  }
}

// Whether the case key runs under --only (see bench::case_selected).
inline bool wanted(const BenchOptions& options, const std::string& case_key) {
  return bench::case_selected(option_list(options, "only"), case_key);
}

}  // namespace gpuscout::cuda
