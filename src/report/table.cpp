#include "gpuscout/report/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "gpuscout/util/error.hpp"

namespace gpuscout::report {
namespace {

std::string human_header(const Column& column) {
  return column.unit.empty() ? column.header : fmt::format("{} ({})", column.header, column.unit);
}

// Display width in terminal columns: count UTF-8 lead bytes, not bytes ("µs", "×").
std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& text, std::size_t width, Align align) {
  const std::size_t w = display_width(text);
  if (w >= width) return text;
  const std::string fill(width - w, ' ');
  return align == Align::left ? text + fill : fill + text;
}

std::string csv_escape(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string md_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

nlohmann::ordered_json cell_json(const Cell& cell) {
  return std::visit(
      [](const auto& value) -> nlohmann::ordered_json {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, double>) {
          if (!std::isfinite(value)) return nullptr;
          return value;
        } else {
          return value;
        }
      },
      cell);
}

nlohmann::ordered_json table_json(const Table& table) {
  auto rows = nlohmann::ordered_json::array();
  for (const auto& row : table.rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < table.columns.size(); ++i) object[table.columns[i].key] = cell_json(row[i]);
    rows.push_back(std::move(object));
  }
  return rows;
}

std::string render_text(const Table& table) {
  std::vector<std::size_t> widths;
  for (const auto& column : table.columns) widths.push_back(display_width(human_header(column)));
  std::vector<std::vector<std::string>> texts;
  for (const auto& row : table.rows) {
    auto& line = texts.emplace_back();
    for (std::size_t i = 0; i < row.size(); ++i) {
      line.push_back(cell_text(row[i], table.columns[i], Format::table));
      widths[i] = std::max(widths[i], display_width(line.back()));
    }
  }
  std::string out;
  if (!table.title.empty()) out += table.title + "\n";
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) line += "  ";
      line += pad(cells[i], widths[i], table.columns[i].align);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  std::vector<std::string> headers;
  for (const auto& column : table.columns) headers.push_back(human_header(column));
  emit(headers);
  std::vector<std::string> rules;
  for (std::size_t w : widths) rules.emplace_back(w, '-');
  emit(rules);
  for (const auto& line : texts) emit(line);
  for (const auto& note : table.notes) out += "  " + note + "\n";
  return out;
}

std::string render_csv(const Table& table) {
  std::string out;
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_escape(table.columns[i].key);
  }
  out += '\n';
  for (const auto& row : table.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_escape(cell_text(row[i], table.columns[i], Format::csv));
    }
    out += '\n';
  }
  return out;
}

std::string render_md(const Table& table) {
  std::string out;
  if (!table.title.empty()) out += "### " + md_escape(table.title) + "\n\n";
  std::string header = "|", rule = "|";
  for (const auto& column : table.columns) {
    header += " " + md_escape(human_header(column)) + " |";
    rule += column.align == Align::right ? " ---: |" : " --- |";
  }
  out += header + "\n" + rule + "\n";
  for (const auto& row : table.rows) {
    std::string line = "|";
    for (std::size_t i = 0; i < row.size(); ++i)
      line += " " + md_escape(cell_text(row[i], table.columns[i], Format::md)) + " |";
    out += line + "\n";
  }
  if (!table.notes.empty()) {
    out += "\n";
    for (const auto& note : table.notes) out += "- " + md_escape(note) + "\n";
  }
  return out;
}

}  // namespace

Format parse_format(std::string_view text) {
  if (text == "table") return Format::table;
  if (text == "json") return Format::json;
  if (text == "csv") return Format::csv;
  if (text == "md" || text == "markdown") return Format::md;
  throw UsageError(fmt::format("--format: '{}' is not a format; expected table, json, csv or md", text));
}

Column& Table::add_column(std::string key, std::string header, std::string unit, int precision, Align align) {
  return columns.emplace_back(Column{std::move(key), std::move(header), std::move(unit), precision, align});
}

void Table::add_row(std::vector<Cell> cells) {
  if (cells.size() != columns.size()) {
    throw std::logic_error(
        fmt::format("table '{}': row has {} cells for {} columns", key, cells.size(), columns.size()));
  }
  rows.push_back(std::move(cells));
}

std::string cell_text(const Cell& cell, const Column& column, Format format) {
  return std::visit(
      [&](const auto& value) -> std::string {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return format == Format::csv ? "" : "n/a";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return value;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (format == Format::csv) return value ? "true" : "false";
          return value ? "yes" : "no";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return fmt::format("{}", value);
        } else {
          if (!std::isfinite(value)) return format == Format::csv ? "" : "n/a";
          // CSV keeps full precision for machines; people get the column's rounding.
          if (column.precision < 0 || format == Format::csv) return fmt::format("{}", value);
          return fmt::format("{:.{}f}", value, column.precision);
        }
      },
      cell);
}

std::string render(const Table& table, Format format) {
  switch (format) {
    case Format::table:
      return render_text(table);
    case Format::json:
      return table_json(table).dump(2) + "\n";
    case Format::csv:
      return render_csv(table);
    case Format::md:
      return render_md(table);
  }
  return {};
}

std::string render(const std::vector<Table>& tables, Format format) {
  if (format == Format::json) {
    nlohmann::ordered_json document = nlohmann::ordered_json::object();
    for (const auto& table : tables) {
      if (table.notes.empty()) {
        document[table.key] = table_json(table);
      } else {
        document[table.key] = {{"rows", table_json(table)}, {"notes", table.notes}};
      }
    }
    return document.dump(2) + "\n";
  }
  std::string out;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    if (i > 0) out += "\n";
    out += render(tables[i], format);
  }
  return out;
}

}  // namespace gpuscout::report
