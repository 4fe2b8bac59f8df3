#pragma once
// Case- and punctuation-insensitive name lookup through aliases, shared by the GPU spec database,
// the model catalog and the benchmark registry.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuscout {

// "NVIDIA H100-SXM5 80GB" -> "h100sxm580gb": lower case, letters and digits only, vendor prefix dropped.
std::string normalize_name(std::string_view name);

// Levenshtein distance, used to suggest the closest names for a typo.
std::size_t edit_distance(std::string_view a, std::string_view b);

class NameIndex {
 public:
  // Registers `name` and its aliases for entry `id`. Returns the name that already claims one of
  // them (normalized forms collide), or nullopt when all were free.
  std::optional<std::string> add(std::size_t id, const std::string& name, const std::vector<std::string>& aliases);

  std::optional<std::size_t> find(std::string_view query) const;

  // Up to `limit` display names closest to the query (substring matches first, then edit distance).
  std::vector<std::string> suggest(std::string_view query, std::size_t limit = 3) const;

 private:
  struct Key {
    std::size_t id;
    std::string display;
  };
  std::unordered_map<std::string, Key> by_normalized_;
  std::vector<std::string> names_;  // canonical display names, for suggestions
};

}  // namespace gpuscout
