// Length files for the load generator: CSV with a header naming input_tokens and output_tokens
// (other columns are ignored), or JSON Lines with those keys. Blank lines and lines starting with
// '#' are skipped in both.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuscout/serve/loadgen.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/file.hpp"

namespace gpuscout::serve {
namespace {

constexpr const char* kInput = "input_tokens";
constexpr const char* kOutput = "output_tokens";

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string out(s.substr(b, e - b));
  if (out.size() >= 2 && out.front() == '"' && out.back() == '"') out = out.substr(1, out.size() - 2);
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

std::string line_entry(std::size_t line) {
  return fmt::format("line {}", line);
}

int parse_count(const std::string& file, std::size_t line, const char* field, const std::string& text) {
  if (text.empty()) throw DataError(file, line_entry(line), field, "is empty; expected a whole number >= 1");
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    throw DataError(file, line_entry(line), field, fmt::format("'{}' is not a whole number", text));
  }
  if (value < 1 || value > std::numeric_limits<int>::max()) {
    throw DataError(file, line_entry(line), field, fmt::format("{} tokens is out of range (expected >= 1)", value));
  }
  return static_cast<int>(value);
}

int json_count(const std::string& file, std::size_t line, const char* field, const nlohmann::json& row) {
  auto it = row.find(field);
  if (it == row.end()) throw DataError(file, line_entry(line), field, "is missing");
  if (it->is_number_integer() || it->is_number_unsigned()) {
    const auto value = it->get<long long>();
    if (value < 1 || value > std::numeric_limits<int>::max()) {
      throw DataError(file, line_entry(line), field, fmt::format("{} tokens is out of range (expected >= 1)", value));
    }
    return static_cast<int>(value);
  }
  if (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()) {  // 512.0
    const double value = it->get<double>();
    if (value < 1 || value > std::numeric_limits<int>::max()) {
      throw DataError(file, line_entry(line), field, fmt::format("{} tokens is out of range (expected >= 1)", value));
    }
    return static_cast<int>(value);
  }
  throw DataError(file, line_entry(line), field, fmt::format("{} is not a whole number", it->dump()));
}

bool skip(const std::string& line) {
  return line.empty() || line.front() == '#';
}

}  // namespace

LengthSpec read_length_file(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(line);
    }
  }
  // JSONL by extension, or by a first non-blank line that opens an object.
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  bool jsonl = ext == ".jsonl" || ext == ".ndjson";
  if (ext != ".csv" && !jsonl) {
    for (const std::string& line : lines) {
      const std::string t = trim(line);
      if (skip(t)) continue;
      jsonl = t.front() == '{';
      break;
    }
  }

  LengthSpec spec;
  spec.kind = LengthSpec::Kind::from_file;
  spec.source = path;
  if (jsonl) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string t = trim(lines[i]);
      if (skip(t)) continue;
      nlohmann::json row;
      try {
        row = nlohmann::json::parse(t);
      } catch (const nlohmann::json::parse_error& e) {
        throw DataError(path, line_entry(i + 1), "", fmt::format("not valid JSON ({})", e.what()));
      }
      if (!row.is_object()) throw DataError(path, line_entry(i + 1), "", "expected a JSON object");
      const int in = json_count(path, i + 1, kInput, row);
      const int out = json_count(path, i + 1, kOutput, row);
      spec.pairs.emplace_back(in, out);
    }
  } else {
    std::size_t header_line = 0;
    int input_col = -1, output_col = -1;
    std::size_t columns = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string t = trim(lines[i]);
      if (skip(t)) continue;
      const std::vector<std::string> cells = split_csv(t);
      if (header_line == 0) {
        header_line = i + 1;
        columns = cells.size();
        for (std::size_t c = 0; c < cells.size(); ++c) {
          if (cells[c] == kInput) input_col = static_cast<int>(c);
          if (cells[c] == kOutput) output_col = static_cast<int>(c);
        }
        if (input_col < 0 || output_col < 0) {
          throw DataError(path, line_entry(i + 1), "header",
                          fmt::format("expected columns {},{} (got '{}')", kInput, kOutput, t));
        }
        continue;
      }
      if (cells.size() != columns) {
        const char* field = static_cast<int>(cells.size()) <= std::max(input_col, output_col)
                                ? (static_cast<int>(cells.size()) <= input_col ? kInput : kOutput)
                                : "";
        throw DataError(path, line_entry(i + 1), field,
                        fmt::format("the row has {} columns, the header {}", cells.size(), columns));
      }
      const int in = parse_count(path, i + 1, kInput, cells[static_cast<std::size_t>(input_col)]);
      const int out = parse_count(path, i + 1, kOutput, cells[static_cast<std::size_t>(output_col)]);
      spec.pairs.emplace_back(in, out);
    }
    if (header_line == 0) throw DataError(path, "", "", fmt::format("empty; expected a header {},{}", kInput, kOutput));
  }
  if (spec.pairs.empty()) throw DataError(path, "", "", "has no rows of lengths");
  spec.input_min = spec.output_min = std::numeric_limits<int>::max();
  spec.input_max = spec.output_max = 0;
  for (const auto& [in, out] : spec.pairs) {
    spec.input_min = std::min(spec.input_min, in);
    spec.input_max = std::max(spec.input_max, in);
    spec.output_min = std::min(spec.output_min, out);
    spec.output_max = std::max(spec.output_max, out);
  }
  return spec;
}

}  // namespace gpuscout::serve
