#include "gpuscout/bench/serve_options.hpp"

#include <algorithm>
#include <cctype>

namespace gpuscout::bench {

int ServeOptions::max_sequence_tokens() const {
  int longest = isl + osl;
  for (int t : prefill_tokens) longest = std::max(longest, t + 1);  // the prefill samples one token
  if (load) {
    const serve::LengthSpec& l = load->lengths;
    if (l.kind == serve::LengthSpec::Kind::from_file) {
      for (const auto& [in, out] : l.pairs) longest = std::max(longest, in + out);
    } else {
      longest = std::max(longest, std::max(l.input_min, l.input_max) + std::max(l.output_min, l.output_max));
    }
  }
  return longest;
}

int step_token_budget(const ServeOptions& options, serve::Scenario scenario, std::uint64_t device_memory_bytes,
                      std::string_view device_name) {
  if (options.max_step_tokens > 0) return options.max_step_tokens;
  std::string name;
  for (unsigned char c : device_name) name.push_back(static_cast<char>(std::tolower(c)));
  constexpr std::uint64_t kLargeGpuBytes = 70ULL << 30;
  const bool large = device_memory_bytes >= kLargeGpuBytes && name.find("a100") == std::string::npos;
  const bool offline = scenario == serve::Scenario::offline;
  if (large) return offline ? 16384 : 8192;
  return offline ? 8192 : 2048;
}

bool names_benchmark(const std::vector<std::string>& selectors, std::string_view key) {
  return std::any_of(selectors.begin(), selectors.end(), [key](const std::string& s) {
    return s == key || (s.size() > key.size() && s.compare(0, key.size(), key) == 0 && s[key.size()] == '/');
  });
}

std::string model_slug(std::string_view catalog_name) {
  std::string out;
  for (unsigned char c : catalog_name) out.push_back(std::isspace(c) ? '-' : static_cast<char>(std::tolower(c)));
  return out;
}

}  // namespace gpuscout::bench
