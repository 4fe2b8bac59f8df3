#pragma once
// Typed, validating access to one TOML table of a data file. Every failure throws DataError naming
// the file, the entry, the field (dotted path) and what was expected, so a bad data file is fixed
// from the message alone.
#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/data/data_source.hpp"

namespace gpuscout::data {

// Parses a data file; a syntax error becomes DataError with line and column.
toml::table parse_toml(const DataFile& file);

class TomlEntry {
 public:
  TomlEntry(const toml::table& table, std::string file, std::string entry, std::string path = "");

  const std::string& file() const { return file_; }
  const std::string& entry() const { return entry_; }
  // Renames the entry once its name is known (errors before that name the file only).
  void set_entry(std::string entry) { entry_ = std::move(entry); }
  bool has(std::string_view key) const { return table_->contains(key); }

  std::string required_string(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  // Integers and floats are both accepted as numbers.
  double required_number(std::string_view key, double min = std::numeric_limits<double>::lowest(),
                         double max = std::numeric_limits<double>::max()) const;
  std::optional<double> optional_number(std::string_view key, double min = std::numeric_limits<double>::lowest(),
                                        double max = std::numeric_limits<double>::max()) const;
  std::int64_t required_int(std::string_view key, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                            std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::optional<std::int64_t> optional_int(std::string_view key,
                                           std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                           std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  bool required_bool(std::string_view key) const;
  std::optional<bool> optional_bool(std::string_view key) const;
  // A missing key is an empty list; anything but an array of strings is an error.
  std::vector<std::string> string_list(std::string_view key) const;
  // A string that must be one of `allowed`.
  std::string required_choice(std::string_view key, std::initializer_list<std::string_view> allowed) const;

  std::optional<TomlEntry> optional_table(std::string_view key) const;
  TomlEntry required_table(std::string_view key) const;
  std::vector<TomlEntry> array_of_tables(std::string_view key) const;
  // Every (key, value) of this table, for free-form maps such as per-field sources.
  std::vector<std::pair<std::string, std::string>> string_map() const;

  // Rejects keys not in `known` (catches typos such as "bf16_tflop").
  void reject_unknown_keys(std::initializer_list<std::string_view> known) const;

  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;

 private:
  std::string field(std::string_view key) const;
  const toml::node* node(std::string_view key) const { return table_->get(key); }

  const toml::table* table_;
  std::string file_, entry_, path_;
};

}  // namespace gpuscout::data
