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
