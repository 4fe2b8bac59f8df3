#include "gpuscout/bench/selection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "gpuscout/util/error.hpp"
#include "gpuscout/util/names.hpp"

namespace gpuscout::bench {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string slug(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out.push_back(static_cast<char>(std::tolower(c)));
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string_view benchmark_of(std::string_view case_key) {
  return case_key.substr(0, case_key.find('/'));
}

}  // namespace

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    if (!item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

std::uint64_t parse_bytes(std::string_view text, std::string_view flag) {
  const std::string_view t = trim(text);
  auto bad = [&] {
    return UsageError(fmt::format("--{}: '{}' is not a size (examples: 8MiB, 4GiB, 512M, 1048576)", flag, text));
  };
  std::size_t digits = 0;
  while (digits < t.size() && (std::isdigit(static_cast<unsigned char>(t[digits])) || t[digits] == '.')) ++digits;
  if (digits == 0) throw bad();
  double number = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + digits, number);
  if (ec != std::errc() || ptr != t.data() + digits || number <= 0) throw bad();
  const std::string unit = lower(trim(t.substr(digits)));
  double scale = 0;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kb" || unit == "kib") {
    scale = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mib") {
    scale = 1024.0 * 1024.0;
  } else if (unit == "g" || unit == "gb" || unit == "gib") {
    scale = 1024.0 * 1024.0 * 1024.0;
  } else if (unit == "t" || unit == "tb" || unit == "tib") {
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else {
    throw bad();
  }
  const double bytes = number * scale;
  if (bytes < 1 || bytes > 1e18 || bytes != std::floor(bytes)) throw bad();
  return static_cast<std::uint64_t>(bytes);
}

std::vector<std::uint64_t> parse_byte_list(const std::vector<std::string>& items, std::string_view flag) {
  std::vector<std::uint64_t> out;
  for (const auto& item : items) out.push_back(parse_bytes(item, flag));
  return out;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", bytes, kUnits[unit]);
}

std::vector<int> parse_index_list(std::string_view text, std::string_view flag) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    int value = -1;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || value < 0) {
      throw UsageError(fmt::format("--{}: '{}' is not a GPU index (expected e.g. 0,1)", flag, item));
    }
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
  }
  if (out.empty()) throw UsageError(fmt::format("--{}: empty list", flag));
  return out;
}

std::map<std::string, std::string> parse_tags(std::string_view text) {
  std::map<std::string, std::string> tags;
  for (const std::string& item : split_list(text)) {
    const auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0) {
      throw UsageError(fmt::format("--tags: '{}' is not key:value", item));
    }
    tags[std::string(trim(std::string_view(item).substr(0, colon)))] =
        std::string(trim(std::string_view(item).substr(colon + 1)));
  }
  return tags;
}

bool selector_matches_benchmark(std::string_view selector, std::string_view benchmark_key) {
  if (selector.empty()) return false;
  if (benchmark_key.starts_with(selector)) return true;  // the key itself or a prefix of it
  return selector.size() > benchmark_key.size() && selector.starts_with(benchmark_key) &&
         selector[benchmark_key.size()] == '/';
}

bool case_selected(const std::vector<std::string>& selectors, std::string_view case_key) {
  const std::string_view bench = benchmark_of(case_key);
  bool reaches_inside = false;
  for (const std::string& s : selectors) {
    if (s.size() > bench.size() && s.starts_with(bench) && s[bench.size()] == '/') {
      reaches_inside = true;
      if (case_key.starts_with(s)) return true;
    }
  }
  return !reaches_inside;
}

std::vector<std::size_t> select_benchmarks(const std::vector<std::string>& benchmark_keys,
                                           const std::vector<std::string>& selectors) {
  std::vector<std::size_t> chosen;
  for (const std::string& s : selectors) {
    bool any = false;
    for (const std::string& key : benchmark_keys) any = any || selector_matches_benchmark(s, key);
    if (!any) {
      std::vector<std::string> suggestions;
      for (const std::string& key : benchmark_keys) {
        if (edit_distance(benchmark_of(s), key) <= 3) suggestions.push_back(key);
      }
      throw NotFoundError("benchmark", s, suggestions);
    }
  }
  for (std::size_t i = 0; i < benchmark_keys.size(); ++i) {
    bool take = selectors.empty();
    for (const std::string& s : selectors) take = take || selector_matches_benchmark(s, benchmark_keys[i]);
    if (take) chosen.push_back(i);
  }
  return chosen;
}

std::string default_output_name(std::string_view host, std::string_view gpu_name, std::time_t when) {
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &utc);
  std::string gpu = slug(gpu_name);
  if (gpu.starts_with("nvidia-")) gpu = gpu.substr(7);
  return fmt::format("gpuscout-{}-{}-{}.json", slug(host), gpu, stamp);
}

double pcie_bandwidth_gbps(int generation, int lanes) {
  // Transfer rate per lane (GT/s) and line-code efficiency by generation.
  double gts = 0, code = 0;
  switch (generation) {
    case 1:
      gts = 2.5, code = 8.0 / 10.0;
      break;
    case 2:
      gts = 5.0, code = 8.0 / 10.0;
      break;
    case 3:
      gts = 8.0, code = 128.0 / 130.0;
      break;
    case 4:
      gts = 16.0, code = 128.0 / 130.0;
      break;
    case 5:
      gts = 32.0, code = 128.0 / 130.0;
      break;
    case 6:
      gts = 64.0, code = 242.0 / 256.0;
      break;  // FLIT mode, FEC included
    default:
      return 0.0;
  }
  return gts * code * lanes / 8.0;
}

}  // namespace gpuscout::bench
