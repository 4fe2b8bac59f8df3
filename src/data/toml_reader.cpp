#include "gpuscout/data/toml_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuscout/util/error.hpp"

namespace gpuscout::data {

toml::table parse_toml(const DataFile& file) {
  try {
    return toml::parse(file.content, file.origin);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw DataError(
        file.origin, "", "",
        fmt::format("TOML syntax error at line {}, column {}: {}", begin.line, begin.column, e.description()));
  }
}

TomlEntry::TomlEntry(const toml::table& table, std::string file, std::string entry, std::string path)
    : table_(&table), file_(std::move(file)), entry_(std::move(entry)), path_(std::move(path)) {}

std::string TomlEntry::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void TomlEntry::fail(std::string_view key, const std::string& problem) const {
  throw DataError(file_, entry_, field(key), problem);
}

std::optional<std::string> TomlEntry::optional_string(std::string_view key) const {
  const toml::node* n = node(key);
  if (n == nullptr) return std::nullopt;
  if (!n->is_string()) fail(key, "expected a string");
  std::string value = **n->as_string();
  if (value.empty()) fail(key, "expected a non-empty string");
  return value;
}

std::string TomlEntry::required_string(std::string_view key) const {
  auto value = optional_string(key);
  if (!value) fail(key, "missing; expected a string");
  return *value;
}

std::optional<double> TomlEntry::optional_number(std::string_view key, double min, double max) const {
  const toml::node* n = node(key);
  if (n == nullptr) return std::nullopt;
  double value = 0;
  if (n->is_integer()) {
    value = static_cast<double>(**n->as_integer());
  } else if (n->is_floating_point()) {
    value = **n->as_floating_point();
  } else {
    fail(key, "expected a number");
  }
  if (!std::isfinite(value) || value < min || value > max) {
    fail(key, fmt::format("{} is out of range; expected a number in [{}, {}]", value, min, max));
  }
  return value;
}

double TomlEntry::required_number(std::string_view key, double min, double max) const {
  auto value = optional_number(key, min, max);
  if (!value) fail(key, "missing; expected a number");
  return *value;
}

std::optional<std::int64_t> TomlEntry::optional_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  const toml::node* n = node(key);
  if (n == nullptr) return std::nullopt;
  if (!n->is_integer()) fail(key, "expected an integer");
  const std::int64_t value = **n->as_integer();
  if (value < min || value > max) {
    fail(key, fmt::format("{} is out of range; expected an integer in [{}, {}]", value, min, max));
  }
  return value;
}

std::int64_t TomlEntry::required_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  auto value = optional_int(key, min, max);
  if (!value) fail(key, "missing; expected an integer");
  return *value;
}

std::optional<bool> TomlEntry::optional_bool(std::string_view key) const {
  const toml::node* n = node(key);
  if (n == nullptr) return std::nullopt;
  if (!n->is_boolean()) fail(key, "expected true or false");
  return **n->as_boolean();
}

bool TomlEntry::required_bool(std::string_view key) const {
  auto value = optional_bool(key);
  if (!value) fail(key, "missing; expected true or false");
  return *value;
}

std::vector<std::string> TomlEntry::string_list(std::string_view key) const {
  std::vector<std::string> out;
  const toml::node* n = node(key);
  if (n == nullptr) return out;
  const toml::array* array = n->as_array();
  if (array == nullptr) fail(key, "expected an array of strings");
  for (const auto& item : *array) {
    if (!item.is_string() || item.as_string()->get().empty()) fail(key, "expected an array of non-empty strings");
    out.push_back(**item.as_string());
  }
  return out;
}

std::string TomlEntry::required_choice(std::string_view key, std::initializer_list<std::string_view> allowed) const {
  std::string value = required_string(key);
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    fail(key, fmt::format("'{}' is not allowed; expected one of: {}", value, fmt::join(allowed, ", ")));
  }
  return value;
}

std::optional<TomlEntry> TomlEntry::optional_table(std::string_view key) const {
  const toml::node* n = node(key);
  if (n == nullptr) return std::nullopt;
  if (!n->is_table()) fail(key, "expected a table");
  return TomlEntry(*n->as_table(), file_, entry_, field(key));
}

TomlEntry TomlEntry::required_table(std::string_view key) const {
  auto table = optional_table(key);
  if (!table) fail(key, "missing; expected a table");
  return *table;
}

std::vector<TomlEntry> TomlEntry::array_of_tables(std::string_view key) const {
  std::vector<TomlEntry> out;
  const toml::node* n = node(key);
  if (n == nullptr) return out;
  const toml::array* array = n->as_array();
  if (array == nullptr) fail(key, "expected an array of tables ([[...]])");
  std::size_t index = 0;
  for (const auto& item : *array) {
    if (!item.is_table()) fail(key, "expected an array of tables ([[...]])");
    out.emplace_back(*item.as_table(), file_, entry_, fmt::format("{}[{}]", field(key), index++));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> TomlEntry::string_map() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : *table_) {
    if (!value.is_string()) fail(key.str(), "expected a string");
    out.emplace_back(std::string(key.str()), **value.as_string());
  }
  return out;
}

void TomlEntry::reject_unknown_keys(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : *table_) {
    if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
      fail(key.str(), fmt::format("unknown field; expected one of: {}", fmt::join(known, ", ")));
    }
  }
}

}  // namespace gpuscout::data
