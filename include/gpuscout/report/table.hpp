#pragma once
// The one tabular shape every listing is rendered from. Commands build Tables from records; the
// renderers below turn them into text. Renderers never compute: numbers arrive ready, with a unit
// and a display precision per column.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuscout::report {

enum class Format { table, json, csv, md };

// Parses "table", "json", "csv", "md" (or "markdown"); throws UsageError naming --format.
Format parse_format(std::string_view text);

enum class Align { left, right };

struct Column {
  std::string key;     // machine name, used by json/csv ("bf16_tflops")
  std::string header;  // human name, used by table/md ("BF16")
  std::string unit;    // shown in human headers ("TFLOP/s"); empty when unitless
  int precision = -1;  // digits after the point for floats; -1 = shortest exact form
  Align align = Align::left;
};

using Cell = std::variant<std::monostate, std::string, std::int64_t, double, bool>;

struct Table {
  std::string key;    // identifies the table in a multi-table JSON document
  std::string title;  // shown above the table in table/md output; may be empty
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> notes;  // footnotes (table/md), "notes" array (json); not in csv

  Column& add_column(std::string key, std::string header, std::string unit = "", int precision = -1,
                     Align align = Align::left);
  // Appends a row; throws std::logic_error when its width differs from the column count.
  void add_row(std::vector<Cell> cells);
};

// One table: an aligned text table, a JSON array of objects, CSV with a header row, or a Markdown table.
std::string render(const Table& table, Format format);
// Several tables: text formats print them one after another; JSON gives an object keyed by table key;
// CSV gives each table's block separated by a blank line.
std::string render(const std::vector<Table>& tables, Format format);

// The text a cell shows in table/md/csv output ("n/a" for an empty cell in table and md, "" in csv).
std::string cell_text(const Cell& cell, const Column& column, Format format);

}  // namespace gpuscout::report
