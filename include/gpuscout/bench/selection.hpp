#pragma once
// Pure helpers behind `gpuscout bench` (tested in CI without a GPU): which benchmarks and cases a
// --only list selects, list-valued sweep flags, tags and the default result file name.
#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpuscout::bench {

// "a, b,,c" -> {"a","b","c"}: split at commas, trim blanks, drop empty items.
std::vector<std::string> split_list(std::string_view text);

// "8MiB", "4GiB", "512M", "1G", "64KiB", "1048576" (bytes), "1.5GiB" -> bytes; binary multiples
// (K/M/G/T with or without "iB"/"B"). Throws UsageError naming `flag`.
std::uint64_t parse_bytes(std::string_view text, std::string_view flag = "size");
std::vector<std::uint64_t> parse_byte_list(const std::vector<std::string>& items, std::string_view flag);
// Shortest exact binary form: 4294967296 -> "4GiB", 8388608 -> "8MiB", 1000 -> "1000B".
std::string format_bytes(std::uint64_t bytes);

// "0,1,3" -> {0,1,3}; throws UsageError naming `flag` on anything but non-negative integers.
std::vector<int> parse_index_list(std::string_view text, std::string_view flag);

// "site:lab1,run:3" -> {site: lab1, run: 3}; throws UsageError on an item without ':' or an empty key.
std::map<std::string, std::string> parse_tags(std::string_view text);

// A selector names a benchmark by key ("memory"), by a prefix of its key ("mem"), or one of its
// cases by a case-key prefix ("gemm/bf16", "memory/copy").
bool selector_matches_benchmark(std::string_view selector, std::string_view benchmark_key);
// Whether a case key ("memory/copy/4GiB") runs under the selectors: yes when no selector reaches
// inside its benchmark (only whole-benchmark selectors, or none), else when a selector is a prefix
// of the case key.
bool case_selected(const std::vector<std::string>& selectors, std::string_view case_key);
// Indices into `benchmark_keys` of the selected benchmarks, in registry order; all when
// `selectors` is empty. Throws NotFoundError (usage) for a selector matching nothing.
std::vector<std::size_t> select_benchmarks(const std::vector<std::string>& benchmark_keys,
                                           const std::vector<std::string>& selectors);

// "gpuscout-<host>-<gpu>-<yyyymmdd-hhmmss>.json" (UTC), host and GPU names reduced to [a-z0-9-].
std::string default_output_name(std::string_view host, std::string_view gpu_name, std::time_t when);

// Bandwidth of one direction of a PCIe link in GB/s (1e9 B/s) after line encoding: gen5 x16 -> 63.0.
// 0 for an unknown generation.
double pcie_bandwidth_gbps(int generation, int lanes);

}  // namespace gpuscout::bench
