#include "gpuscout/util/names.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>

namespace gpuscout {

std::string normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    const auto uc = static_cast<unsigned char>(c);
    if (std::isalnum(uc)) out.push_back(static_cast<char>(std::tolower(uc)));
  }
  // Drivers report "NVIDIA H200"; users type "h200". The vendor adds nothing to the match.
  for (std::string_view prefix : {"nvidia", "amd"}) {
    if (out.size() > prefix.size() && out.starts_with(prefix)) {
      out.erase(0, prefix.size());
      break;
    }
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> NameIndex::add(std::size_t id, const std::string& name,
                                          const std::vector<std::string>& aliases) {
  std::vector<std::string> keys{normalize_name(name)};
  for (const auto& alias : aliases) keys.push_back(normalize_name(alias));
  for (const auto& key : keys) {
    auto it = by_normalized_.find(key);
    if (it != by_normalized_.end() && it->second.id != id) return it->second.display;
  }
  for (const auto& key : keys) by_normalized_.emplace(key, Key{id, name});
  names_.push_back(name);
  return std::nullopt;
}

std::optional<std::size_t> NameIndex::find(std::string_view query) const {
  auto it = by_normalized_.find(normalize_name(query));
  if (it == by_normalized_.end()) return std::nullopt;
  return it->second.id;
}

std::vector<std::string> NameIndex::suggest(std::string_view query, std::size_t limit) const {
  const std::string q = normalize_name(query);
  std::vector<std::pair<std::size_t, std::string>> scored;  // (score, display)
  for (const auto& [key, entry] : by_normalized_) {
    std::size_t score = edit_distance(q, key);
    if (!q.empty() && (key.find(q) != std::string::npos || q.find(key) != std::string::npos)) score = 0;
    scored.emplace_back(score, entry.display);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::size_t max_distance = std::max<std::size_t>(3, q.size() / 2);
  for (const auto& [score, display] : scored) {
    if (out.size() >= limit || score > max_distance) break;
    if (seen.insert(display).second) out.push_back(display);
  }
  return out;
}

}  // namespace gpuscout
