#include "gpuscout/report/html_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "gpuscout/bench/gemm_shapes.hpp"
#include "gpuscout/report/svg_chart.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::report {
namespace {

using results::Metric;
using results::Outcome;
using results::Record;
using results::ResultSet;
using ojson = nlohmann::ordered_json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string esc(std::string_view text) {
  return html_escape(text);
}

template <typename... Args>
void appendf(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : key) {
    if (c == '/') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  return parts;
}

std::optional<double> number_param(const ojson& object, std::initializer_list<const char*> names) {
  if (!object.is_object()) return std::nullopt;
  for (const char* name : names) {
    auto it = object.find(name);
    if (it != object.end() && it->is_number()) return it->get<double>();
  }
  return std::nullopt;
}

std::optional<std::string> string_param(const ojson& object, std::initializer_list<const char*> names) {
  if (!object.is_object()) return std::nullopt;
  for (const char* name : names) {
    auto it = object.find(name);
    if (it != object.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

// Which inputs have records a section draws: only they become series, and run names prefix the series
// only when more than one does.
template <typename Pred>
std::vector<std::size_t> contributing(const std::vector<ReportInput>& inputs, Pred pred) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (std::any_of(inputs[i].result.records.begin(), inputs[i].result.records.end(), pred)) out.push_back(i);
  }
  return out;
}

const Metric* headline(const Record& r) {
  return r.metrics.empty() ? nullptr : &r.metrics.front();
}

bool passed(const Record& r) {
  return r.outcome == Outcome::passed;
}

// "h200-memory.json" from "bench/results/h200-memory.json".
std::string run_name(const std::string& origin) {
  const std::filesystem::path p(origin);
  std::string stem = p.stem().string();
  return stem.empty() ? origin : stem;
}

std::string format_number(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  return fmt::format("{:.{}f}", v, decimals);
}

std::string opt_text(const std::optional<double>& v, int decimals) {
  return v ? format_number(*v, decimals) : "";
}

// Display precision that keeps about four significant digits.
std::string format_metric(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::abs(v);
  const int decimals = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
  return format_number(v, decimals);
}

std::string format_bytes(double bytes) {
  return svg::format_tick(bytes, svg::TickFormat::bytes);
}

const specs::GpuSpec* spec_of(const ResultSet& result, const ReportOptions& options) {
  if (options.specs == nullptr) return nullptr;
  for (const auto& gpu : result.gpus) {
    if (!gpu.spec_name.empty()) {
      if (const auto* spec = options.specs->find(gpu.spec_name)) return spec;
    }
    if (const auto* spec = options.specs->find(gpu.name)) return spec;
  }
  return nullptr;
}

// A simple HTML table builder: every cell is escaped here.
struct HtmlTable {
  struct Col {
    std::string header;
    bool numeric = false;
  };
  std::vector<Col> cols;
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;  // (text, css class)
  std::string caption;

  void add_row(std::vector<std::string> cells, std::vector<std::string> classes = {}) {
    std::vector<std::pair<std::string, std::string>> row;
    for (std::size_t i = 0; i < cells.size(); ++i)
      row.emplace_back(std::move(cells[i]), i < classes.size() ? classes[i] : std::string());
    rows.push_back(std::move(row));
  }
  std::string render() const {
    std::string out = "<div class=\"scroll\"><table>\n";
    if (!caption.empty()) appendf(out, "<caption>{}</caption>\n", esc(caption));
    out += "<thead><tr>";
    for (const Col& c : cols)
      appendf(out, "<th scope=\"col\"{}>{}</th>", c.numeric ? " class=\"num\"" : "", esc(c.header));
    out += "</tr></thead>\n<tbody>\n";
    for (const auto& row : rows) {
      out += "<tr>";
      for (std::size_t i = 0; i < row.size(); ++i) {
        std::string cls = row[i].second;
        if (i < cols.size() && cols[i].numeric) cls = cls.empty() ? "num" : "num " + cls;
        if (cls.empty()) {
          appendf(out, "<td>{}</td>", esc(row[i].first));
        } else {
          appendf(out, "<td class=\"{}\">{}</td>", esc(cls), esc(row[i].first));
        }
      }
      out += "</tr>\n";
    }
    out += "</tbody></table></div>\n";
    return out;
  }
};

void figure(std::string& out, const std::string& svg, const std::string& caption) {
  out += "<figure>\n";
  out += svg;
  if (!caption.empty()) appendf(out, "<figcaption>{}</figcaption>\n", esc(caption));
  out += "</figure>\n";
}

struct Section {
  std::string id, title, body;
};

// ---------------------------------------------------------------------------------------- GEMM

std::optional<Section> gemm_section(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  struct Best {
    double tflops = kNaN, peak = kNaN;
    std::string key, unit;
    std::int64_t samples = 0;
  };
  // precision -> per input best
  std::vector<std::string> precisions;
  std::map<std::string, std::vector<Best>> best;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ResultSet& result = inputs[i].result;
    const specs::GpuSpec* spec = spec_of(result, options);
    for (const Record& r : result.records) {
      if (r.benchmark != "gemm" || !passed(r)) continue;
      const Metric* tp = r.find_metric("throughput");
      if (tp == nullptr || !std::isfinite(tp->value)) continue;
      const auto parts = split_key(r.key);
      std::string precision = string_param(r.params, {"precision"}).value_or(parts.size() > 1 ? parts[1] : "?");
      if (!best.count(precision)) {
        precisions.push_back(precision);
        best[precision].resize(inputs.size());
      }
      Best& b = best[precision][i];
      if (std::isfinite(b.tflops) && b.tflops >= tp->value) continue;
      b.tflops = tp->value;
      b.key = r.key;
      b.unit = tp->unit;
      b.samples = tp->samples;
      if (auto peak = number_param(r.extra, {"dense_peak_tflops"})) {
        b.peak = *peak;
      } else if (auto p = bench::gemm::parse_precision(precision)) {
        if (auto d = bench::gemm::dense_peak(spec, *p)) b.peak = *d;
      }
    }
  }
  if (precisions.empty()) return std::nullopt;
  // Order precisions as the benchmark lists them.
  auto rank = [](const std::string& p) {
    int i = 0;
    for (auto g : bench::gemm::kAllGemmPrecisions) {
      if (bench::gemm::to_string(g) == p) return i;
      ++i;
    }
    return i;
  };
  std::stable_sort(precisions.begin(), precisions.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });

  svg::BarChart chart;
  chart.id = "chart-gemm";
  chart.title = "GEMM throughput per precision (best shape) vs spec dense peak";
  chart.category_label = "Precision";
  chart.y.label = "Throughput";
  chart.y.unit = "TFLOP/s; INT8: TOP/s";
  chart.categories = precisions;
  svg::CategoryMarks marks{"spec dense peak", {}};
  std::vector<std::size_t> runs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& p : precisions) {
      if (std::isfinite(best[p][i].tflops)) {
        runs.push_back(i);
        break;
      }
    }
  }
  for (std::size_t i : runs) {
    svg::BarSeries s{runs.size() > 1 ? run_name(inputs[i].origin) : "measured (best shape)", {}};
    for (const auto& p : precisions) s.values.push_back(best[p][i].tflops);
    chart.series.push_back(std::move(s));
  }
  bool any_peak = false;
  for (const auto& p : precisions) {
    double peak = kNaN;
    for (const Best& b : best[p])
      if (std::isfinite(b.peak)) {
        peak = b.peak;
        break;
      }
    any_peak = any_peak || std::isfinite(peak);
    marks.values.push_back(peak);
  }
  if (any_peak) chart.marks = marks;
  chart.description = "Bar chart: the highest measured GEMM throughput of each precision";
  if (any_peak) chart.description += ", with a black mark at the spec sheet's dense peak of that precision";
  chart.description += ".";

  HtmlTable table;
  table.cols = {{"Run"},
                {"Precision"},
                {"Best case"},
                {"Throughput", true},
                {"Unit"},
                {"Spec dense peak", true},
                {"% of peak", true},
                {"Samples", true}};
  for (const auto& p : precisions) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Best& b = best[p][i];
      if (!std::isfinite(b.tflops)) continue;
      table.add_row({run_name(inputs[i].origin), p, b.key, format_metric(b.tflops), b.unit,
                     std::isfinite(b.peak) ? format_metric(b.peak) : "n/a",
                     std::isfinite(b.peak) && b.peak > 0 ? format_number(100 * b.tflops / b.peak, 1) : "n/a",
                     std::to_string(b.samples)});
    }
  }
  Section s{"gemm", "GEMM throughput per precision", ""};
  figure(s.body, svg::render(chart),
         "Median of timed samples for the fastest shape of each precision; peaks are dense (no 2:4 sparsity). "
         "Every shape is in the summary table.");
  s.body += table.render();
  return s;
}

// -------------------------------------------------------------------------------------- memory

std::optional<Section> memory_section(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  svg::LineChart chart;
  chart.id = "chart-memory";
  chart.title = "Device memory bandwidth vs working-set size";
  chart.x = svg::make_axis("Array size", "", svg::ScaleType::log2, svg::TickFormat::bytes);
  chart.y = svg::make_axis("Bandwidth", "GB/s");
  HtmlTable table;
  table.cols = {{"Run"},     {"Operation"},          {"L2-resident plateau", true}, {"at size"}, {"HBM plateau", true},
                {"at size"}, {"% of spec HBM", true}};
  std::vector<std::string> ops;  // colour per operation, dash per run
  double hbm_peak = kNaN, l2_bytes = kNaN;
  std::string hbm_source;
  const auto runs = contributing(inputs, [](const Record& r) {
    return r.benchmark == "memory" && passed(r) && r.find_metric("bandwidth") != nullptr &&
           number_param(r.params, {"array_bytes", "bytes"});
  });
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const std::size_t i = runs[run];
    const ResultSet& result = inputs[i].result;
    std::map<std::string, std::vector<const Record*>> by_op;
    std::vector<std::string> op_order;
    for (const Record& r : result.records) {
      if (r.benchmark != "memory" || !passed(r)) continue;
      const Metric* bw = r.find_metric("bandwidth");
      const auto size = number_param(r.params, {"array_bytes", "bytes"});
      if (bw == nullptr || !size) continue;
      const auto parts = split_key(r.key);
      const std::string op = string_param(r.params, {"op"}).value_or(parts.size() > 1 ? parts[1] : "?");
      if (!by_op.count(op)) op_order.push_back(op);
      by_op[op].push_back(&r);
      if (!std::isfinite(hbm_peak) && r.extra.contains("peak")) {
        if (auto v = number_param(r.extra["peak"], {"value"})) {
          hbm_peak = *v;
          hbm_source = string_param(r.extra["peak"], {"source"}).value_or("");
        }
      }
    }
    const specs::GpuSpec* spec = spec_of(result, options);
    if (spec != nullptr) {
      if (!std::isfinite(hbm_peak)) {
        hbm_peak = spec->memory_bandwidth_gbs.value;
        hbm_source = "spec database " + spec->name;
      }
      if (!std::isfinite(l2_bytes) && spec->l2_mb) l2_bytes = spec->l2_mb->value * 1e6;
    }
    for (const std::string& op : op_order) {
      auto it = std::find(ops.begin(), ops.end(), op);
      const std::size_t color = static_cast<std::size_t>(it - ops.begin());
      if (it == ops.end()) ops.push_back(op);
      svg::LineSeries series;
      series.name = runs.size() > 1 ? fmt::format("{}: {}", run_name(inputs[i].origin), op) : op;
      series.color = color;
      series.dashed = run % 2 == 1;
      const Record* l2_best = nullptr;
      const Record* largest = nullptr;
      for (const Record* r : by_op[op]) {
        const double size = *number_param(r->params, {"array_bytes", "bytes"});
        const double bw = r->find_metric("bandwidth")->value;
        series.points.emplace_back(size, bw);
        const auto resident = r->params.find("l2_resident");
        const bool in_l2 = resident != r->params.end() && resident->is_boolean()
                               ? resident->get<bool>()
                               : (std::isfinite(l2_bytes) && size * 2 < l2_bytes);
        if (in_l2 && (l2_best == nullptr || bw > l2_best->find_metric("bandwidth")->value)) l2_best = r;
        if (largest == nullptr || size >= *number_param(largest->params, {"array_bytes", "bytes"})) largest = r;
      }
      chart.series.push_back(std::move(series));
      auto cell = [](const Record* r) {
        return r ? format_metric(r->find_metric("bandwidth")->value) : std::string("n/a");
      };
      auto size_cell = [](const Record* r) {
        return r ? format_bytes(*number_param(r->params, {"array_bytes", "bytes"})) : std::string();
      };
      std::string pct = "n/a";
      if (largest != nullptr && std::isfinite(hbm_peak) && hbm_peak > 0)
        pct = format_number(100 * largest->find_metric("bandwidth")->value / hbm_peak, 1);
      table.add_row(
          {run_name(inputs[i].origin), op, cell(l2_best), size_cell(l2_best), cell(largest), size_cell(largest), pct});
    }
  }
  if (chart.series.empty()) return std::nullopt;
  if (std::isfinite(hbm_peak))
    chart.ref_lines.push_back({hbm_peak, fmt::format("spec HBM {} GB/s", svg::format_value(hbm_peak))});
  if (std::isfinite(l2_bytes))
    chart.ref_lines.push_back({l2_bytes, fmt::format("L2 {} MB", svg::format_value(l2_bytes / 1e6)), true});
  chart.description =
      "Line chart, log2 x axis: measured bandwidth of each memory operation against its array size. Sizes that fit "
      "in L2 run above the HBM plateau; the dashed horizontal line is the spec HBM bandwidth, the vertical one the "
      "L2 size.";
  Section s{"memory", "Memory bandwidth vs size", ""};
  figure(s.body, svg::render(chart),
         "Bandwidth counts bytes read plus bytes written (BabelStream / nvbandwidth convention). L2-resident plateau: "
         "the best size that fits in L2; HBM plateau: the largest size." +
             (hbm_source.empty() ? std::string() : " Spec HBM bandwidth from " + hbm_source + "."));
  s.body += table.render();
  return s;
}

// ------------------------------------------------------------------------------ host transfers

std::optional<Section> transfer_section(const std::vector<ReportInput>& inputs) {
  std::vector<std::string> variants, sizes;
  std::map<std::pair<std::string, std::string>, double> values;  // (variant, series) -> GB/s
  double link_peak = kNaN;
  std::string link_source;
  HtmlTable latency;
  latency.cols = {{"Run"}, {"Key"}, {"Latency", true}, {"Unit"}, {"Note"}};
  const auto runs = contributing(inputs, [](const Record& r) {
    return r.benchmark == "transfer" && passed(r) && headline(r) != nullptr && headline(r)->unit == "GB/s";
  });
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const Record& r : inputs[i].result.records) {
      if (r.benchmark != "transfer" || !passed(r)) continue;
      const Metric* m = headline(r);
      if (m == nullptr) continue;
      const auto parts = split_key(r.key);
      if (m->unit != "GB/s") {
        latency.add_row({run_name(inputs[i].origin), r.key, format_metric(m->value), m->unit, m->note});
        continue;
      }
      const std::string variant = parts.size() > 1 ? parts[1] : r.key;
      std::string size = parts.size() > 2 ? parts[2] : "";
      if (runs.size() > 1) size = run_name(inputs[i].origin) + (size.empty() ? "" : ": " + size);
      if (std::find(variants.begin(), variants.end(), variant) == variants.end()) variants.push_back(variant);
      if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) sizes.push_back(size);
      values[{variant, size}] = m->value;
      if (!std::isfinite(link_peak) && r.extra.contains("peak")) {
        if (auto v = number_param(r.extra["peak"], {"value"})) {
          link_peak = *v;
          link_source = string_param(r.extra["peak"], {"source"}).value_or("");
        }
      }
    }
  }
  if (variants.empty() && latency.rows.empty()) return std::nullopt;
  Section s{"transfer", "Host transfer bandwidth", ""};
  if (!variants.empty()) {
    svg::BarChart chart;
    chart.id = "chart-transfer";
    chart.title = "Host <-> device transfer bandwidth";
    chart.categories = variants;
    chart.category_label = "Direction, engine (ce: copy engine, sm: kernel), host memory";
    chart.y = svg::make_axis("Bandwidth", "GB/s");
    for (const auto& size : sizes) {
      svg::BarSeries series{size.empty() ? "bandwidth" : size, {}};
      for (const auto& v : variants) {
        auto it = values.find({v, size});
        series.values.push_back(it == values.end() ? kNaN : it->second);
      }
      chart.series.push_back(std::move(series));
    }
    if (std::isfinite(link_peak))
      chart.ref_lines.push_back(
          {link_peak, fmt::format("link peak per direction {} GB/s", svg::format_value(link_peak))});
    chart.description =
        "Grouped bar chart: bandwidth of each host transfer kind, one bar per transfer size. Bidirectional records "
        "give the total of both directions.";
    figure(s.body, svg::render(chart),
           "h2d: host to device, d2h: device to host, bidir: both at once (total of the two directions). "
           "Pinned vs pageable host memory." +
               (link_source.empty() ? std::string() : " Link peak: " + link_source + "."));
  }
  if (!latency.rows.empty()) {
    s.body += "<h3>Host access latency</h3>\n";
    s.body += latency.render();
  }
  return s;
}

// ------------------------------------------------------------------------------- peer to peer

bool is_p2p(const Record& r) {
  return r.benchmark == "p2p" || r.key.rfind("p2p/", 0) == 0;
}

// "ce_unidir" from "p2p/ce_unidir/gpu0_to_gpu1/256MiB" (or params.variant).
std::string variant_of(const Record& r) {
  const auto parts = split_key(r.key);
  return string_param(r.params, {"variant"}).value_or(parts.size() > 1 ? parts[1] : "p2p");
}

std::optional<Section> p2p_section(const std::vector<ReportInput>& inputs) {
  Section s{"p2p", "Peer-to-peer matrix", ""};
  int charts = 0;
  const auto runs = contributing(inputs, [](const Record& r) { return is_p2p(r) && passed(r) && headline(r); });
  for (std::size_t i : runs) {
    // variant -> (src, dst) -> (bytes, value, unit)
    struct Cell {
      double bytes = -1, value = kNaN;
    };
    std::vector<std::string> variants;
    std::map<std::string, std::map<std::pair<int, int>, Cell>> cells;
    std::map<std::string, std::string> units;
    std::set<int> devices;
    std::set<std::string> readers;  // variants measured as "row GPU reads column GPU's memory"
    for (const Record& r : inputs[i].result.records) {
      if (!is_p2p(r) || !passed(r)) continue;
      const Metric* m = headline(r);
      if (m == nullptr) continue;
      // Copies: source row, destination column. Latency: the reading GPU's row, the owner's column.
      auto src = number_param(r.params, {"source_gpu", "src", "src_gpu", "reader_gpu"});
      auto dst = number_param(r.params, {"destination_gpu", "dst", "dst_gpu", "owner_gpu"});
      if (r.params.contains("reader_gpu")) readers.insert(variant_of(r));
      if (!src && r.gpus.size() >= 2) src = r.gpus[0];
      if (!dst && r.gpus.size() >= 2) dst = r.gpus[1];
      if (!src || !dst) continue;
      const std::string variant = variant_of(r);
      if (!cells.count(variant)) variants.push_back(variant);
      const std::pair<int, int> pair{static_cast<int>(*src), static_cast<int>(*dst)};
      devices.insert(pair.first);
      devices.insert(pair.second);
      const double bytes = number_param(r.params, {"bytes", "size_bytes", "message_bytes"}).value_or(0);
      Cell& c = cells[variant][pair];
      if (bytes >= c.bytes) c = {bytes, m->value};  // the largest size stands for the pair
      units[variant] = m->unit;
    }
    for (const auto& variant : variants) {
      if (++charts > 8) break;
      svg::HeatMap map;
      map.id = fmt::format("chart-p2p-{}-{}", i, variant);
      map.title = runs.size() > 1 ? fmt::format("Peer to peer, {} ({})", variant, run_name(inputs[i].origin))
                                  : fmt::format("Peer to peer, {}", variant);
      const bool read = readers.count(variant) > 0;
      map.row_label = read ? "reading GPU" : "source GPU";
      map.column_label = read ? "GPU whose memory is read" : "destination GPU";
      map.unit = units[variant];
      for (int d : devices) {
        map.rows.push_back(fmt::format("GPU {}", d));
        map.columns.push_back(fmt::format("GPU {}", d));
      }
      for (int a : devices) {
        std::vector<double> row;
        for (int b : devices) {
          auto it = cells[variant].find({a, b});
          row.push_back(it == cells[variant].end() ? kNaN : it->second.value);
        }
        map.values.push_back(std::move(row));
      }
      map.description = fmt::format("Heat map: {} per GPU pair, {} in rows, {} in columns, in {}.", variant,
                                    map.row_label, map.column_label, map.unit);
      figure(s.body, svg::render(map), "Each cell is the largest size measured for that pair.");
    }
  }
  if (charts == 0) return std::nullopt;
  return s;
}

// -------------------------------------------------------------------------------- collectives

std::optional<Section> collective_section(const std::vector<ReportInput>& inputs) {
  svg::LineChart chart;
  chart.id = "chart-busbw";
  chart.title = "Collective bus bandwidth vs message size";
  chart.x = svg::make_axis("Message size", "", svg::ScaleType::log2, svg::TickFormat::bytes);
  chart.y = svg::make_axis("busbw", "GB/s");
  HtmlTable table;
  table.cols = {{"Run"}, {"Collective"}, {"Largest size"}, {"busbw", true}, {"algbw", true}, {"time", true}, {"Unit"}};
  std::vector<std::string> names;  // series names across runs, for colours
  const auto runs = contributing(inputs, [](const Record& r) {
    return passed(r) && r.find_metric("busbw") != nullptr &&
           number_param(r.params, {"bytes", "message_bytes", "size_bytes", "size"});
  });
  for (std::size_t run = 0; run < runs.size(); ++run) {
    const std::size_t i = runs[run];
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Record*>> series;
    for (const Record& r : inputs[i].result.records) {
      if (!passed(r) || r.find_metric("busbw") == nullptr) continue;
      if (!number_param(r.params, {"bytes", "message_bytes", "size_bytes", "size"})) continue;
      // Series: the key without the benchmark and the size (its last segment).
      auto parts = split_key(r.key);
      std::string name;
      for (std::size_t p = 1; p + 1 < parts.size(); ++p) name += (name.empty() ? "" : " ") + parts[p];
      if (name.empty()) name = string_param(r.params, {"collective", "op"}).value_or(r.benchmark);
      if (!series.count(name)) order.push_back(name);
      series[name].push_back(&r);
    }
    for (const auto& name : order) {
      svg::LineSeries line;
      line.name = runs.size() > 1 ? fmt::format("{}: {}", run_name(inputs[i].origin), name) : name;
      line.dashed = run % 2 == 1;  // colour per collective, dash per run
      auto known = std::find(names.begin(), names.end(), name);
      line.color = static_cast<std::size_t>(known - names.begin());
      if (known == names.end()) names.push_back(name);
      const Record* largest = nullptr;
      for (const Record* r : series[name]) {
        const double bytes = *number_param(r->params, {"bytes", "message_bytes", "size_bytes", "size"});
        line.points.emplace_back(bytes, r->find_metric("busbw")->value);
        if (largest == nullptr ||
            bytes >= *number_param(largest->params, {"bytes", "message_bytes", "size_bytes", "size"}))
          largest = r;
      }
      chart.series.push_back(std::move(line));
      const Metric* alg = largest->find_metric("algbw");
      const Metric* time = largest->find_metric("time");
      table.add_row({run_name(inputs[i].origin), name,
                     format_bytes(*number_param(largest->params, {"bytes", "message_bytes", "size_bytes", "size"})),
                     format_metric(largest->find_metric("busbw")->value), alg ? format_metric(alg->value) : "n/a",
                     time ? format_metric(time->value) + " " + time->unit : "n/a",
                     largest->find_metric("busbw")->unit});
    }
  }
  if (chart.series.empty()) return std::nullopt;
  chart.description =
      "Line chart, log2 x axis: bus bandwidth (nccl-tests definition) of each collective against the message size.";
  Section s{"collectives", "Collectives: busbw vs message size", ""};
  figure(s.body, svg::render(chart),
         "busbw = algbw x the nccl-tests factor (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and "
         "alltoall, 1 otherwise), comparable with the link bandwidth whatever the rank count.");
  s.body += table.render();
  return s;
}

// ----------------------------------------------------------------------------------- serving

// "serve/load/<model>/tp<N>/<scenario>/probe_<i>" and ".../peak": the model from params (the key holds a
// lower-cased slug), the TP degree and scenario likewise.
struct ServeGroup {
  std::size_t input = 0;
  std::string model, tp, scenario;
  std::vector<const Record*> probes;
  const Record* peak = nullptr;
};

std::string serve_model(const Record& r, const std::vector<std::string>& parts) {
  return string_param(r.params, {"model"}).value_or(parts.size() > 2 ? parts[2] : "?");
}

std::string serve_tp(const Record& r, const std::vector<std::string>& parts) {
  if (auto tp = number_param(r.params, {"tp"})) return fmt::format("TP{}", *tp);
  return parts.size() > 3 ? parts[3] : "?";
}

double metric_value(const Record& r, const char* name) {
  const Metric* m = r.find_metric(name);
  return m != nullptr ? m->value : kNaN;
}

// A load point's offered load: its Poisson rate (Server) or its requests in flight (Concurrency).
double offered_load(const Record& r) {
  if (auto rate = number_param(r.params, {"target_rate"})) return *rate;
  return number_param(r.params, {"concurrency"}).value_or(0);
}

std::string offered_load_text(const Record& r) {
  if (auto rate = number_param(r.params, {"target_rate"})) return format_metric(*rate) + " requests/s";
  if (auto clients = number_param(r.params, {"concurrency"})) return fmt::format("{:g} in flight", *clients);
  return "n/a";
}

bool probe_valid(const Record& r) {
  auto it = r.extra.find("valid");
  return passed(r) && (it == r.extra.end() || !it->is_boolean() || it->get<bool>());
}

// What a GPU-hour of the run's GPU type costs, owned (the TCO model's defaults) and rented on demand, to
// price a load point's output tokens; either may be absent (no spec, no purchase or cloud price).
struct ServeCostBasis {
  std::optional<tco::WayToPay> own, rent;
  std::string note;
};

ServeCostBasis serve_cost_basis(const ResultSet& result, const ReportOptions& options) {
  ServeCostBasis basis;
  const specs::GpuSpec* spec = spec_of(result, options);
  if (spec == nullptr || options.tco == nullptr) return basis;
  try {
    const tco::TcoInputs inputs = tco::TcoInputs::resolve(*options.tco, *spec);
    const tco::TcoResult r = tco::compute_tco(inputs, 1);
    const std::vector<tco::WayToPay> ways = tco::ways_to_pay(r);  // owning first, then the rent options
    try {
      inputs.require_purchase_price();
      basis.own = ways.front();
    } catch (const gpuscout::Error&) {  // no purchase price: owning cannot be priced
    }
    const auto on_demand = std::find_if(ways.begin() + 1, ways.end(), [](const auto& w) { return !w.contract; });
    if (on_demand != ways.end()) basis.rent = *on_demand;
    if (basis.own || basis.rent) {
      std::vector<std::string> prices;
      if (basis.own) {
        prices.push_back(fmt::format("owned, {} USD per useful hour (TCO defaults: {} years, {}% utilization)",
                                     format_number(basis.own->usd_per_useful_gpu_hr, 3), format_number(r.years, 0),
                                     format_number(inputs.get("utilization") * 100, 0)));
      }
      if (basis.rent) {
        prices.push_back(fmt::format("{}, {} USD ({})", basis.rent->way,
                                     format_number(basis.rent->usd_per_useful_gpu_hr, 3), basis.rent->source));
      }
      basis.note = fmt::format(
          "USD per million output tokens = the price of a GPU-hour x the run's GPUs / the output tokens of that "
          "hour (all GPU time is charged to output tokens). A {} GPU-hour: {}. Every TCO input: gpuscout tco "
          "--gpu '{}'.",
          spec->name, fmt::join(prices, "; "), spec->name);
    }
  } catch (const gpuscout::Error&) {  // incomplete cost data for this GPU: the columns say n/a
  }
  return basis;
}

std::string usd_per_mtok_text(const std::optional<tco::WayToPay>& way, double gpus, double output_tokens_per_s) {
  if (!way || !(gpus > 0) || !(output_tokens_per_s > 0)) return "n/a";
  return format_number(tco::usd_per_mtok(way->usd_per_useful_gpu_hr, gpus, output_tokens_per_s), 3);
}

std::optional<Section> serve_section(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  std::vector<ServeGroup> groups;
  HtmlTable steps;
  steps.cols = {
      {"Run"},           {"Case"}, {"Model"}, {"TP"}, {"tokens/s", true}, {"ms/step", true}, {"% of roofline", true},
      {"TFLOP/s", true}, {"Note"}};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const Record& r : inputs[i].result.records) {
      if (r.benchmark != "serve") continue;
      const auto parts = split_key(r.key);
      if (parts.size() < 2) continue;
      const std::string& kind = parts[1];
      if (kind == "load" && parts.size() >= 6) {
        const std::string model = serve_model(r, parts), tp = serve_tp(r, parts);
        const std::string scenario = string_param(r.params, {"scenario"}).value_or(parts[4]);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const ServeGroup& g) {
          return g.input == i && g.model == model && g.tp == tp && g.scenario == scenario;
        });
        if (it == groups.end()) it = groups.insert(groups.end(), ServeGroup{i, model, tp, scenario, {}, nullptr});
        if (parts.back() == "peak") {
          it->peak = &r;
        } else if (std::isfinite(metric_value(r, "output_tokens_per_s"))) {
          it->probes.push_back(&r);
        }
      } else if (passed(r) && (kind == "decode" || kind == "prefill" || kind == "static")) {
        // One row per step measurement. Decode: per-step time against the HBM roofline of the bytes a step
        // reads. Prefill: one prompt's time, its TFLOP/s against the dense peak. Static: a whole batch end
        // to end, TPOT as the per-step time.
        const bool decode = kind == "decode", prefill = kind == "prefill";
        const double tokens = decode    ? metric_value(r, "throughput")
                              : prefill ? metric_value(r, "prefill_throughput")
                                        : metric_value(r, "output_tokens_per_s");
        const double ms = decode    ? metric_value(r, "step_time")
                          : prefill ? metric_value(r, "time")
                                    : metric_value(r, "tpot");
        const double pct = decode    ? metric_value(r, "hbm_roofline_pct")
                           : prefill ? metric_value(r, "throughput_pct_of_peak")
                                     : kNaN;
        const double tflops = prefill ? metric_value(r, "throughput") : kNaN;
        std::string note = decode    ? "ms per decode step; % of the HBM roofline (weights + KV bytes / copy bandwidth)"
                           : prefill ? "ms for the whole prompt (one step); % of the dense BF16 peak"
                                     : "output tokens/s of the batch end to end; median TPOT as ms/step";
        // A static batch run several times (bench --static-repeats): its median run, and the range.
        const Metric* rate = kind == "static" ? r.find_metric("output_tokens_per_s") : nullptr;
        if (rate != nullptr && rate->samples > 1 && rate->spread) {
          note = fmt::format(
              "output tokens/s of the batch end to end, the median of {} runs ({}-{}); median TPOT as "
              "ms/step",
              rate->samples, format_metric(rate->spread->min), format_metric(rate->spread->max));
        }
        steps.add_row({run_name(inputs[i].origin), parts.size() > 4 ? parts[1] + "/" + parts[4] : kind,
                       serve_model(r, parts), serve_tp(r, parts), format_metric(tokens), format_metric(ms),
                       std::isfinite(pct) ? format_number(pct, 1) : "n/a", format_metric(tflops), note});
      }
    }
  }
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const ServeGroup& g) { return g.probes.empty(); }),
               groups.end());
  if (groups.empty() && steps.rows.empty()) return std::nullopt;

  Section s{"serve", "Serving: latency vs throughput", ""};
  const bool many_runs = contributing(inputs, [](const Record& r) { return r.benchmark == "serve"; }).size() > 1;
  std::size_t chart_index = 0;
  for (ServeGroup& g : groups) {
    // Probes sorted by the offered load (a rate, or requests in flight), so the table reads as the load rising.
    std::stable_sort(g.probes.begin(), g.probes.end(),
                     [](const Record* a, const Record* b) { return offered_load(*a) < offered_load(*b); });
    const std::string heading = fmt::format(
        "{}{} {}, {} scenario", many_runs ? run_name(inputs[g.input].origin) + ": " : "", g.model, g.tp, g.scenario);
    appendf(s.body, "<h3>{}</h3>\n", esc(heading));
    const Record& first = *g.probes.front();
    for (const auto& [metric, bound, label] :
         {std::tuple{"ttft_p99", "ttft_bound_ms", "p99 TTFT"}, std::tuple{"tpot_p99", "tpot_bound_ms", "p99 TPOT"}}) {
      svg::LineChart chart;
      chart.id = fmt::format("chart-serve-{}-{}", chart_index, metric);
      // The heading above names the run; the title stays short enough to fit the chart's width.
      chart.title = fmt::format("{} {}: {} vs output tokens/s", g.model, g.tp, label);
      chart.x = svg::make_axis("Achieved output throughput", "tokens/s");
      chart.y = svg::make_axis(label, "ms");
      svg::LineSeries series{label, {}, false, std::nullopt, {}, "INVALID"};
      for (const Record* p : g.probes) {
        series.points.emplace_back(metric_value(*p, "output_tokens_per_s"), metric_value(*p, metric));
        series.hollow.push_back(!probe_valid(*p));
      }
      chart.series.push_back(std::move(series));
      // A bound of 0 means none was set (offline runs).
      const auto b = number_param(first.params, {bound});
      if (b && *b > 0) chart.ref_lines.push_back({*b, fmt::format("{} bound {} ms", label, svg::format_value(*b))});
      chart.description = fmt::format(
          "Line chart: {} of each load probe against the output tokens/s it achieved; filled dots are VALID probes, "
          "hollow rings INVALID ones{}.",
          label, chart.ref_lines.empty() ? "" : "; the dashed horizontal line is the latency bound");
      figure(s.body, svg::render(chart), "");
    }
    ++chart_index;

    HtmlTable probes;
    probes.cols = {{"Probe"},
                   {"Offered load", true},
                   {"requests/s", true},
                   {"output tokens/s", true},
                   {"p99 TTFT ms", true},
                   {"p99 TPOT ms", true},
                   {"Result"},
                   {"Why invalid"},
                   {"Own USD/Mtok out", true},
                   {"On-demand USD/Mtok out", true}};
    const ServeCostBasis cost = serve_cost_basis(inputs[g.input].result, options);
    for (const Record* p : g.probes) {
      std::string why;
      if (p->extra.contains("invalid_reasons")) {
        for (const auto& reason : p->extra["invalid_reasons"])
          why += (why.empty() ? "" : "; ") + (reason.is_string() ? reason.get<std::string>() : reason.dump());
      }
      const bool valid = probe_valid(*p);
      const double output = metric_value(*p, "output_tokens_per_s");
      const double gpus =
          !p->gpus.empty() ? static_cast<double>(p->gpus.size()) : number_param(p->params, {"tp"}).value_or(kNaN);
      probes.add_row(
          {split_key(p->key).back(), offered_load_text(*p), format_metric(metric_value(*p, "requests_per_s")),
           format_metric(output), format_metric(metric_value(*p, "ttft_p99")),
           format_metric(metric_value(*p, "tpot_p99")), valid ? "VALID" : "INVALID", why,
           usd_per_mtok_text(cost.own, gpus, output), usd_per_mtok_text(cost.rent, gpus, output)},
          {"", "", "", "", "", "", valid ? "outcome outcome-passed" : "outcome outcome-failed"});
    }
    s.body += probes.render();
    if (!cost.note.empty()) appendf(s.body, "<p class=\"lede\">{}</p>\n", esc(cost.note));
    if (g.peak != nullptr) {
      const double peak = metric_value(*g.peak, "peak_rate");
      if (std::isfinite(peak))
        appendf(s.body, "<p>Peak rate that stayed VALID: <strong>{}</strong> requests/s.</p>\n",
                esc(format_metric(peak)));
    }
  }
  if (!steps.rows.empty()) {
    s.body += "<h3>Decode, prefill and static batch</h3>\n";
    s.body += steps.render();
  }
  return s;
}

// ------------------------------------------------------------------------------ summary table

std::string spread_text(const Metric& m) {
  if (!m.spread || m.samples <= 1) return "";
  return fmt::format("{} .. {}", format_metric(m.spread->p10), format_metric(m.spread->p90));
}

Section summary_section(const std::vector<ReportInput>& inputs) {
  HtmlTable table;
  const bool many = inputs.size() > 1;
  if (many) table.cols.push_back({"Run"});
  for (auto c : std::vector<HtmlTable::Col>{{"Key"},
                                            {"Outcome"},
                                            {"Metric"},
                                            {"Value", true},
                                            {"Unit"},
                                            {"Statistic"},
                                            {"p10 .. p90", true},
                                            {"Samples", true},
                                            {"Reason / warnings"}})
    table.cols.push_back(c);
  std::map<std::string, int> counts;
  for (const auto& in : inputs) {
    for (const Record& r : in.result.records) {
      ++counts[results::to_string(r.outcome)];
      std::vector<std::string> cells, classes;
      if (many) {
        cells.push_back(run_name(in.origin));
        classes.emplace_back("run");
      }
      const Metric* m = headline(r);
      std::string reason = r.reason;
      if (r.telemetry && !r.telemetry->throttle_reasons.empty()) {
        std::string t = "throttled:";
        for (const auto& why : r.telemetry->throttle_reasons) t += " " + why;
        reason += reason.empty() ? t : "; " + t;
      }
      const std::string outcome = results::to_string(r.outcome);
      for (auto&& [text, cls] :
           std::vector<std::pair<std::string, std::string>>{{r.key, "key"},
                                                            {outcome, "outcome outcome-" + outcome},
                                                            {m ? m->name : "", ""},
                                                            {m ? format_metric(m->value) : "", ""},
                                                            {m ? m->unit : "", ""},
                                                            {m ? m->statistic : "", ""},
                                                            {m ? spread_text(*m) : "", ""},
                                                            {m && m->samples > 0 ? std::to_string(m->samples) : "", ""},
                                                            {reason, ""}}) {
        cells.push_back(text);
        classes.push_back(cls);
      }
      table.add_row(std::move(cells), std::move(classes));
    }
  }
  Section s{"summary", "All records", ""};
  std::string counts_text;
  for (const auto& [outcome, n] : counts)
    counts_text += (counts_text.empty() ? "" : ", ") + fmt::format("{} {}", n, outcome);
  appendf(s.body, "<p>{} records: {}. The value is the first (headline) metric of each record.</p>\n",
          table.rows.size(), esc(counts_text.empty() ? "none" : counts_text));
  s.body += table.render();
  return s;
}

// ---------------------------------------------------------------------------------- telemetry

// What NVML saw while each record was measured: clocks, power, temperature, device memory, the
// energy efficiency derived from them and any clock limit. Omitted when no record has samples.
std::optional<Section> telemetry_section(const std::vector<ReportInput>& inputs) {
  HtmlTable table;
  const bool many = inputs.size() > 1;
  if (many) table.cols.push_back({"Run"});
  for (auto c : std::vector<HtmlTable::Col>{{"Key"},
                                            {"SM clock mean (min), MHz", true},
                                            {"Power mean (max), W", true},
                                            {"Temperature max, °C", true},
                                            {"GPU memory used max, GiB", true},
                                            {"Per watt", true},
                                            {"Samples", true},
                                            {"Limits reported"}})
    table.cols.push_back(c);
  auto pair_text = [](const std::optional<double>& mean, const std::optional<double>& low_or_high) {
    if (!mean) return std::string();
    return low_or_high ? fmt::format("{:.0f} ({:.0f})", *mean, *low_or_high) : fmt::format("{:.0f}", *mean);
  };
  for (const auto& in : inputs) {
    for (const Record& r : in.result.records) {
      if (!r.telemetry || r.telemetry->samples <= 0) continue;
      const results::Telemetry& t = *r.telemetry;
      std::string per_watt;
      for (const Metric& m : r.metrics) {
        if (std::string_view(m.name).ends_with("_per_watt")) {
          per_watt = format_metric(m.value) + " " + m.unit;
          break;
        }
      }
      std::string limits;
      for (const auto& why : t.throttle_reasons) limits += (limits.empty() ? "" : ", ") + why;
      std::vector<std::string> cells;
      if (many) cells.push_back(run_name(in.origin));
      for (auto& text : std::vector<std::string>{r.key, pair_text(t.sm_clock_mean_mhz, t.sm_clock_min_mhz),
                                                 pair_text(t.power_mean_w, t.power_max_w),
                                                 opt_text(t.temperature_max_c, 0), opt_text(t.memory_used_max_gib, 1),
                                                 per_watt, std::to_string(t.samples), limits.empty() ? "none" : limits})
        cells.push_back(std::move(text));
      table.add_row(std::move(cells));
    }
  }
  if (table.rows.empty()) return std::nullopt;
  Section s{"telemetry", "Power, clocks and memory while measuring", ""};
  appendf(s.body,
          "<p>NVML samples taken while each record was measured ({} records). GPU memory counts every process on "
          "the device. Per watt: the record's first rate divided by the mean power. A limit named here means the "
          "clocks were held down while measuring.</p>\n",
          table.rows.size());
  s.body += table.render();
  return s;
}

// --------------------------------------------------------------------------------- provenance

std::string map_text(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k + ": " + v;
  return out.empty() ? "none" : out;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`;&|<>*?()[]{}") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

Section provenance_section(const std::vector<ReportInput>& inputs) {
  Section s{"provenance", "Provenance", ""};
  for (const auto& in : inputs) {
    const ResultSet& r = in.result;
    const auto& p = r.provenance;
    appendf(s.body, "<h3>{}</h3>\n<dl class=\"kv\">\n", esc(in.origin));
    auto item = [&](std::string_view term, const std::string& value, bool code = false) {
      appendf(s.body, "<dt>{}</dt><dd>{}{}{}</dd>\n", esc(term), code ? "<code>" : "",
              esc(value.empty() ? "n/a" : value), code ? "</code>" : "");
    };
    item("Kind", r.kind);
    item("Schema", r.schema_version);
    item("Complete", r.complete ? "yes" : "no: the run was interrupted or cut short");
    item("Created (UTC)", p.created_utc);
    item("gpuscout", p.tool_version + (p.git_commit.empty() ? "" : " (commit " + p.git_commit + ")"));
    item("Command line", command_text(p.command_line), true);
    item("Host", p.hostname);
    item("OS", p.os);
    item("CPU", p.cpu);
    item("CPUs allowed", p.cpus);
    for (const char* k : {"driver", "cuda_driver", "cuda_runtime", "cublas", "nccl"}) {
      auto it = p.software.find(k);
      item(fmt::format("software: {}", k), it == p.software.end() ? "" : it->second);
    }
    static const std::set<std::string> kListed = {"driver", "cuda_driver", "cuda_runtime", "cublas", "nccl"};
    std::map<std::string, std::string> other;
    for (const auto& [k, v] : p.software)
      if (kListed.count(k) == 0) other[k] = v;
    if (!other.empty()) item("software: other", map_text(other));
    item("Environment", map_text(p.environment));
    item("Tags", map_text(p.tags));
    item("Spec data", p.data_source);
    // Schema 1.2+: what gpuscout doctor found wrong when the run started; older files cannot say.
    std::string checks;
    for (const auto& c : p.checks)
      checks += fmt::format("{}{} {}: {}", checks.empty() ? "" : "; ", c.status, c.key, c.message);
    if (!checks.empty()) item("Checks at start", checks);
    s.body += "</dl>\n";
    if (!r.gpus.empty()) {
      HtmlTable gpus;
      gpus.cols = {{"#", true},
                   {"Name"},
                   {"Spec entry"},
                   {"UUID"},
                   {"PCI bus id"},
                   {"CC"},
                   {"SMs", true},
                   {"Memory (GiB)", true},
                   {"Max SM clock (MHz)", true},
                   {"Power limit (W)", true},
                   {"ECC"},
                   {"MIG"},
                   {"NUMA", true}};
      auto flag = [](const std::optional<bool>& b) { return b ? (*b ? "on" : "off") : ""; };
      for (const auto& g : r.gpus) {
        gpus.add_row(
            {std::to_string(g.index), g.name, g.spec_name, g.uuid, g.pci_bus_id, g.compute_capability.value_or(""),
             g.sm_count ? std::to_string(*g.sm_count) : "",
             g.memory_bytes ? format_number(static_cast<double>(*g.memory_bytes) / (1024.0 * 1024 * 1024), 1) : "",
             opt_text(g.max_sm_clock_mhz, 0), opt_text(g.power_limit_w, 0), flag(g.ecc_enabled), flag(g.mig_enabled),
             g.numa_node ? std::to_string(*g.numa_node) : ""});
      }
      s.body += gpus.render();
    }
  }
  return s;
}

// -------------------------------------------------------------------------------- definitions

// ------------------------------------------------------------------------------------- advice

// Option label for tables and chart categories: "4x H200-SXM-141GB fp8".
std::string option_label(const Record& r) {
  const std::string mig = string_param(r.params, {"mig"}).value_or("");
  return fmt::format("{}x {}{} {}", number_param(r.params, {"gpus"}).value_or(0),
                     string_param(r.params, {"gpu"}).value_or("?"), mig.empty() ? "" : " MIG " + mig,
                     string_param(r.params, {"precision"}).value_or(""));
}

std::string layout_label(const Record& r) {
  const std::string mig = string_param(r.params, {"mig"}).value_or("");
  std::string out = mig.empty() ? fmt::format("TP{}", number_param(r.params, {"tp"}).value_or(1)) : "MIG " + mig;
  for (auto [key, name] : {std::pair{"pp", "PP"}, std::pair{"dp", "DP"}}) {
    const double v = number_param(r.params, {key}).value_or(1);
    if (v > 1) out += fmt::format(" {}{}", name, v);
  }
  const double replicas = number_param(r.params, {"replicas"}).value_or(1);
  if (replicas > 1) out += fmt::format(" x{} replicas", replicas);
  return out;
}

std::string metric_text(const Record& r, const char* name) {
  const Metric* m = r.find_metric(name);
  return m ? format_metric(m->value) : "";
}

std::string json_text(const ojson& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// Cost per unit of work of the owner's option split by TCO term, and the rent prices, for the
// stacked bar chart: term share of the owner's hourly cost x the owner's cost per unit.
struct CostSplit {
  std::vector<double> own;  // capital, energy, colocation, maintenance + staff
  double on_demand = kNaN, reserved = kNaN;
};

std::optional<CostSplit> cost_split(const Record& r) {
  const ojson& pricing = r.extra.contains("pricing") ? r.extra["pricing"] : ojson::array();
  const ojson& terms = r.extra.contains("own_usd_per_gpu_hr") ? r.extra["own_usd_per_gpu_hr"] : ojson::object();
  CostSplit split{std::vector<double>(4, kNaN)};
  bool any = false;
  for (const auto& p : pricing) {
    const std::string way = p.value("way", "");
    const double unit = p.value("usd_per_unit", 0.0);
    if (way == "own") {
      const double c = terms.value("capital", 0.0), e = terms.value("energy", 0.0), l = terms.value("colocation", 0.0),
                   o = terms.value("opex", 0.0);
      const double sum = c + e + l + o;
      if (sum > 0) {
        split.own = {c / sum * unit, e / sum * unit, l / sum * unit, o / sum * unit};
        any = true;
      }
    } else if (way == "rent on-demand") {
      split.on_demand = unit;
      any = true;
    } else if (way == "rent reserved") {
      split.reserved = unit;
      any = true;
    }
  }
  if (!any) return std::nullopt;
  return split;
}

std::optional<Section> advice_section(const ReportInput& in) {
  const ResultSet& set = in.result;
  const Record* head = nullptr;
  std::vector<const Record*> options, rejected;
  for (const Record& r : set.records) {
    if (r.benchmark == "advise-workload") head = &r;
    if (r.benchmark != "advise") continue;
    (r.outcome == Outcome::passed ? options : rejected).push_back(&r);
  }
  if (!head && options.empty() && rejected.empty()) return std::nullopt;
  Section s{"advice", "Advice: which GPUs, how many, at what cost", ""};
  if (head) {
    const std::string desc = head->extra.value("description", "");
    appendf(s.body, "<p>Workload <strong>{}</strong> ({}, model {}){}{}.</p>\n",
            esc(string_param(head->params, {"workload"}).value_or("?")),
            esc(string_param(head->params, {"task"}).value_or("?")),
            esc(string_param(head->params, {"model"}).value_or("?")), desc.empty() ? "" : ": ", esc(desc));
  }
  appendf(s.body, "<p>From <code>{}</code>, written {} by {}.</p>\n", esc(in.origin), esc(set.provenance.created_utc),
          esc(command_text(set.provenance.command_line)));
  // Ranked options, per tier.
  std::vector<std::string> tiers;
  for (const Record* r : options) {
    const std::string t = string_param(r->params, {"tier"}).value_or("");
    if (std::find(tiers.begin(), tiers.end(), t) == tiers.end()) tiers.push_back(t);
  }
  for (const auto& tier : tiers) {
    HtmlTable table;
    table.caption = tiers.size() > 1 ? "Tier " + tier : "Ranked options";
    // Serving options carry latencies, training options their time to train.
    const bool train = tier == "train";
    for (auto c : std::vector<HtmlTable::Col>{{"#", true},
                                              {"Option"},
                                              {"Layout"},
                                              {"Cost", true},
                                              {"Unit"},
                                              {"Pay"},
                                              {"USD/GPU-hr", true},
                                              {train ? "Run USD" : "Total USD", true}})
      table.cols.push_back(c);
    if (train) {
      table.cols.push_back({"Days", true});
      table.cols.push_back({"MFU %", true});
    } else {
      table.cols.push_back({"TTFT ms", true});
      table.cols.push_back({"TPOT ms", true});
    }
    table.cols.push_back({"Calibration"});
    std::vector<const Record*> in_tier;
    for (const Record* r : options) {
      if (string_param(r->params, {"tier"}).value_or("") == tier) in_tier.push_back(r);
    }
    for (const Record* r : in_tier) {
      const Metric* cost = r->find_metric("cost");
      const ojson& cal = r->extra.contains("calibration") ? r->extra["calibration"] : ojson::object();
      table.add_row(
          {format_number(number_param(r->params, {"rank"}).value_or(0), 0), option_label(*r), layout_label(*r),
           cost ? format_metric(cost->value) : "", cost ? cost->unit : "", r->extra.value("best_pricing", ""),
           metric_text(*r, "usd_per_gpu_hr"), metric_text(*r, "total_usd"),
           metric_text(*r, train ? "time_to_train" : "ttft"), metric_text(*r, train ? "mfu" : "tpot"),
           fmt::format("{} ±{}%", cal.value("tier", "?"), format_number(cal.value("error_band_pct", 0.0), 0))});
    }
    s.body += table.render();
    // Cost per unit of work by TCO term (own) beside the on-demand price, top options.
    svg::BarChart chart;
    chart.id = "advice-cost-" + std::to_string(&tier - tiers.data());
    chart.title = tiers.size() > 1 ? "Cost per unit of work by term, tier " + tier : "Cost per unit of work by term";
    chart.description =
        "Owner cost split into capital, energy, colocation and maintenance plus staff, and the "
        "on-demand rent, per unit of work, for the top-ranked options.";
    chart.stacked = true;
    chart.value_labels = false;
    chart.category_label = "option rank and way of paying";
    std::string unit;
    std::vector<std::vector<double>> series(6);
    for (std::size_t i = 0; i < in_tier.size() && i < 4; ++i) {
      const auto split = cost_split(*in_tier[i]);
      if (!split) continue;
      if (const Metric* m = in_tier[i]->find_metric("cost")) unit = m->unit;
      const std::string rank = format_number(number_param(in_tier[i]->params, {"rank"}).value_or(0), 0);
      // One bar per way of paying: own (stacked by term), rent on-demand, rent reserved.
      auto bar = [&](const std::string& label, std::vector<double> values) {
        chart.categories.push_back(fmt::format("#{} {}", rank, label));
        for (std::size_t k = 0; k < series.size(); ++k) series[k].push_back(values[k]);
      };
      const auto& own = split->own;
      if (std::isfinite(own[0])) bar("own", {own[0], own[1], own[2], own[3], kNaN, kNaN});
      if (std::isfinite(split->on_demand)) bar("rent", {kNaN, kNaN, kNaN, kNaN, split->on_demand, kNaN});
      if (std::isfinite(split->reserved)) bar("reserved", {kNaN, kNaN, kNaN, kNaN, kNaN, split->reserved});
    }
    const char* names[] = {"capital", "energy", "colocation", "maintenance + staff", "rent on-demand", "rent reserved"};
    for (std::size_t k = 0; k < series.size(); ++k) chart.series.push_back({names[k], series[k]});
    chart.y = svg::make_axis("Cost", unit);
    if (!chart.categories.empty()) {
      figure(s.body, svg::render(chart),
             "Owner terms from the TCO model (data/tco.toml, every input and source in `gpuscout tco`); rent from "
             "the spec DB's reference on-demand price and data/tco.toml's reserved price. Categories: rank and way of "
             "paying.");
    }
    // Reasons of the top options, in numbers.
    s.body += "<ol class=\"reasons\">\n";
    for (std::size_t i = 0; i < in_tier.size() && i < 5; ++i) {
      appendf(s.body, "<li><strong>{}</strong> {}<ul>\n", esc(option_label(*in_tier[i])),
              esc(layout_label(*in_tier[i])));
      if (in_tier[i]->extra.contains("reasons")) {
        for (const auto& why : in_tier[i]->extra["reasons"]) appendf(s.body, "<li>{}</li>\n", esc(json_text(why)));
      }
      s.body += "</ul></li>\n";
    }
    s.body += "</ol>\n";
  }
  if (options.empty()) s.body += "<p class=\"banner\">No option meets every bound and constraint.</p>\n";
  if (!rejected.empty()) {
    HtmlTable table;
    table.caption = "Rejected, with the numbers that rejected them";
    for (auto c : std::vector<HtmlTable::Col>{{"Rejected by"}, {"Tier"}, {"GPU"}, {"Precision"}, {"Reason"}})
      table.cols.push_back(c);
    for (const Record* r : rejected) {
      std::string reason;
      if (r->extra.contains("reasons")) {
        for (const auto& why : r->extra["reasons"]) reason += (reason.empty() ? "" : "; ") + json_text(why);
      }
      const std::string mig = string_param(r->params, {"mig"}).value_or("");
      table.add_row({r->extra.value("rejected_by", ""), string_param(r->params, {"tier"}).value_or(""),
                     string_param(r->params, {"gpu"}).value_or("") + (mig.empty() ? "" : " MIG " + mig),
                     string_param(r->params, {"precision"}).value_or(""), reason.empty() ? r->reason : reason});
    }
    s.body += table.render();
  }
  // Which figures are measured and which come from the spec sheet.
  std::map<std::string, std::string> tiers_by_gpu;
  for (const Record& r : set.records) {
    if (r.benchmark != "advise" || !r.extra.contains("calibration")) continue;
    const auto& cal = r.extra["calibration"];
    tiers_by_gpu.emplace(string_param(r.params, {"gpu"}).value_or("?"),
                         fmt::format("{} ({})", cal.value("tier", "?"), cal.value("source", "")));
  }
  s.body +=
      "<p>Measured or from the spec sheet: peaks, memory, bandwidth and prices come from the spec DB; the "
      "efficiencies applied to them are <em>measured</em> (result files of that GPU type), "
      "<em>transferred</em> (measured on the same architecture) or <em>public</em> (documented figures).</p>\n<ul>\n";
  for (const auto& [gpu, text] : tiers_by_gpu) appendf(s.body, "<li>{}: {}</li>\n", esc(gpu), esc(text));
  s.body += "</ul>\n";
  if (head && head->extra.contains("assumptions")) {
    s.body += "<p>Assumptions:</p>\n<ul>\n";
    for (const auto& a : head->extra["assumptions"]) appendf(s.body, "<li>{}</li>\n", esc(json_text(a)));
    s.body += "</ul>\n";
  }
  return s;
}

Section definitions_section() {
  static const std::vector<std::pair<std::string, std::string>> kTerms = {
      {"TFLOP/s", "1e12 floating-point operations per second (TOP/s for INT8). GEMM throughput = 2·M·N·K / time."},
      {"dense peak, % of peak",
       "The vendor's peak for dense matrices, as the spec database stores it (2:4-sparse datasheet figures are "
       "halved); % of peak = measured / dense peak of the same precision."},
      {"bandwidth (memory kernels)",
       "(bytes read + bytes written) / time, in GB/s = 1e9 B/s: the BabelStream and nvbandwidth convention, so a copy "
       "of N bytes counts 2N."},
      {"bandwidth (host and peer copies)",
       "Bytes moved / time, per direction; for both directions at once the record gives the total, labelled."},
      {"latency", "One-way time of a dependent access or message (the record's note says how it was measured)."},
      {"algbw", "S / time, S the message size as nccl-tests defines it for each collective."},
      {"busbw",
       "algbw × the nccl-tests factor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather, reduce_scatter and alltoall; "
       "1 for broadcast, reduce and sendrecv. Comparable with the link bandwidth whatever the rank count."},
      {"median, p10, p90, samples",
       "Each case repeats until (p90 − p10) / median falls under a bound or a time cap is reached; the value shown "
       "is the median of the timed samples, p10 and p90 give their spread."},
      {"TTFT", "Time to first token: from a request's arrival to its first output token."},
      {"TPOT",
       "Time per output token: (end-to-end latency − TTFT) / (output tokens − 1), the time per token after the "
       "first."},
      {"ITL", "Inter-token latency: time between consecutive output tokens of one request."},
      {"goodput", "Requests (or tokens) per second that met all latency bounds."},
      {"MFU",
       "Model FLOPs utilisation: model FLOPs per second achieved / the dense peak of the precision used (the peak "
       "is always named)."},
      {"throttled", "The case saw a throttle reason other than idle (power cap, thermal, ...)."},
  };
  Section s{"definitions", "Definitions", "<dl class=\"defs\">\n"};
  for (const auto& [term, text] : kTerms) appendf(s.body, "<dt>{}</dt><dd>{}</dd>\n", esc(term), esc(text));
  s.body += "</dl>\n";
  return s;
}

constexpr std::string_view kCss = R"css(
:root{color-scheme:light;--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--head:#f3f4f6}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0 auto;max-width:1100px;padding:24px 20px 48px;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
h1{font-size:1.75rem;margin:.2em 0 .3em}
h2{font-size:1.3rem;margin:2em 0 .6em;padding-bottom:.2em;border-bottom:2px solid var(--line)}
h3{font-size:1.05rem;margin:1.4em 0 .4em;overflow-wrap:anywhere}
p{margin:.5em 0}
.lede{color:var(--muted)}
.banner{background:#fff7ed;border:1px solid #fdba74;border-radius:6px;padding:8px 12px;margin:12px 0}
nav ul{display:flex;flex-wrap:wrap;gap:4px 18px;list-style:none;margin:8px 0;padding:0}
nav a{color:#0b5394}
figure{margin:16px 0}
svg.chart{display:block;max-width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
figcaption{color:var(--muted);font-size:.88rem;margin-top:4px;max-width:760px}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch}
table{border-collapse:collapse;font-size:.85rem;width:100%;margin:8px 0}
caption{text-align:left;color:var(--muted)}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--head);font-weight:600;white-space:nowrap}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.key{white-space:nowrap;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem}
td.run{white-space:nowrap}
.outcome{font-weight:600;white-space:nowrap}
.outcome-passed{color:#047857}
.outcome-failed,.outcome-incorrect,.outcome-timeout{color:#b91c1c}
.outcome-skipped,.outcome-not_supported{color:#92400e}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.kv dt{font-weight:600}
dl.kv dd{margin:0;overflow-wrap:anywhere}
dl.defs dt{font-weight:600;margin-top:.6em}
dl.defs dd{margin:0 0 0 1.2em}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em}
footer{margin-top:3em;color:var(--muted);font-size:.85rem;border-top:1px solid var(--line);padding-top:8px}
@media (max-width:640px){
body{padding:12px 10px 32px;font-size:14px}
h1{font-size:1.4rem}
dl.kv{grid-template-columns:1fr}
td.key,td.run{white-space:normal;overflow-wrap:anywhere}
dl.kv dd{margin-bottom:6px}
th,td{padding:3px 5px}
}
@media print{
body{max-width:none;padding:0;font-size:10pt}
nav{display:none}
a{color:inherit;text-decoration:none}
figure,tr,dl.kv{break-inside:avoid}
h2,h3{break-after:avoid}
thead{display:table-header-group}
.scroll{overflow:visible}
svg.chart{max-width:17cm;border:none}
@page{margin:14mm}
}
)css";

}  // namespace

std::string html_escape(std::string_view text) {
  return svg::escape(text);
}

std::string render_html_report(const std::vector<ReportInput>& inputs, const ReportOptions& options) {
  std::vector<Section> sections;
  if (options.advice) {
    if (auto s = advice_section(*options.advice)) sections.push_back(std::move(*s));
  }
  if (auto s = gemm_section(inputs, options)) sections.push_back(std::move(*s));
  if (auto s = memory_section(inputs, options)) sections.push_back(std::move(*s));
  if (auto s = transfer_section(inputs)) sections.push_back(std::move(*s));
  if (auto s = p2p_section(inputs)) sections.push_back(std::move(*s));
  if (auto s = collective_section(inputs)) sections.push_back(std::move(*s));
  if (auto s = serve_section(inputs, options)) sections.push_back(std::move(*s));
  sections.push_back(summary_section(inputs));
  if (auto s = telemetry_section(inputs)) sections.push_back(std::move(*s));
  sections.push_back(provenance_section(inputs));
  sections.push_back(definitions_section());

  // What the report covers: GPUs, hosts, record counts.
  std::set<std::string> gpu_names, hosts;
  std::size_t records = 0, failures = 0;
  bool incomplete = false;
  for (const auto& in : inputs) {
    for (const auto& g : in.result.gpus) gpu_names.insert(g.spec_name.empty() ? g.name : g.spec_name);
    if (!in.result.provenance.hostname.empty()) hosts.insert(in.result.provenance.hostname);
    records += in.result.records.size();
    for (const auto& r : in.result.records) failures += results::is_failure(r.outcome) ? 1 : 0;
    incomplete = incomplete || !in.result.complete;
  }
  auto join = [](const std::set<std::string>& items) {
    std::string out;
    for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
    return out.empty() ? std::string("unknown") : out;
  };

  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be fetched: no scripts, no remote styles, fonts or images.
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
      "img-src data:\">\n";
  if (!options.generator.empty()) appendf(out, "<meta name=\"generator\" content=\"{}\">\n", esc(options.generator));
  appendf(out, "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<header>\n", esc(options.title), kCss);
  appendf(out, "<h1>{}</h1>\n", esc(options.title));
  if (inputs.empty() && options.advice) {
    // An advice-only report (no GPU measured here): say so rather than "0 records".
    appendf(out, "<p class=\"lede\">Advice from <code>{}</code>; no measured result files in this report</p>\n",
            esc(options.advice->origin));
  } else {
    appendf(out, "<p class=\"lede\">{} records from {} result file{} &middot; GPUs: {} &middot; hosts: {}</p>\n",
            records, inputs.size(), inputs.size() == 1 ? "" : "s", esc(join(gpu_names)), esc(join(hosts)));
  }
  for (const auto& note : options.banner_notes) appendf(out, "<p class=\"banner\">{}</p>\n", esc(note));
  if (failures > 0 || incomplete) {
    appendf(out, "<p class=\"banner\">{}{}</p>\n",
            failures > 0
                ? esc(fmt::format("{} record(s) failed, were incorrect or timed out; see All records. ", failures))
                : "",
            incomplete ? "At least one run is incomplete (interrupted or cut short)." : "");
  }
  // Runs measured under conditions `gpuscout doctor` warned about (schema 1.2+): named up front.
  std::size_t checked = 0, with_findings = 0;
  for (const auto& in : inputs) {
    if (in.result.provenance.checks.empty()) continue;
    ++with_findings;
    checked += in.result.provenance.checks.size();
  }
  if (with_findings > 0) {
    appendf(
        out, "<p class=\"banner\">{}</p>\n",
        esc(fmt::format("{} run(s) were measured with {} doctor finding(s) at start (a lowered power limit, another "
                        "process, a non-default switch ...); see Provenance.",
                        with_findings, checked)));
  }
  out += "<nav aria-label=\"Sections\"><ul>\n";
  for (const auto& s : sections) appendf(out, "<li><a href=\"#{}\">{}</a></li>\n", s.id, esc(s.title));
  out += "</ul></nav>\n</header>\n<main>\n";
  for (const auto& s : sections) {
    appendf(out, "<section id=\"{}\">\n<h2>{}</h2>\n", s.id, esc(s.title));
    out += s.body;
    out += "</section>\n";
  }
  out += "</main>\n<footer>\n";
  appendf(out, "<p>Generated by {} from: ", esc(options.generator.empty() ? "gpuscout" : options.generator));
  for (std::size_t i = 0; i < inputs.size(); ++i)
    appendf(out, "{}<code>{}</code>", i == 0 ? "" : ", ", esc(inputs[i].origin));
  out += ". Self-contained: no scripts, nothing fetched.</p>\n</footer>\n</body>\n</html>\n";
  return out;
}

}  // namespace gpuscout::report
