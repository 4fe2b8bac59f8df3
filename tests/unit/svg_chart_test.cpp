#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "gpuscout/report/svg_chart.hpp"

namespace gpuscout::report::svg {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string golden_path(const std::string& name) {
  return std::string(GPUSCOUT_GOLDEN_DIR) + "/" + name;
}

// Compares with tests/golden/NAME; GPUSCOUT_UPDATE_GOLDEN=1 rewrites the file instead.
void expect_golden(const std::string& name, const std::string& actual) {
  if (const char* update = std::getenv("GPUSCOUT_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    std::ofstream(golden_path(name), std::ios::binary) << actual;
    return;
  }
  std::ifstream in(golden_path(name), std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << name << " (GPUSCOUT_UPDATE_GOLDEN=1 writes it)";
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(actual, s.str()) << "SVG differs from " << name << " (GPUSCOUT_UPDATE_GOLDEN=1 rewrites it)";
}

TEST(SvgTicks, NiceNumbers) {
  EXPECT_DOUBLE_EQ(nice_number(0.7, true), 0.5);
  EXPECT_DOUBLE_EQ(nice_number(1.4, true), 1);
  EXPECT_DOUBLE_EQ(nice_number(2.9, true), 2);
  EXPECT_DOUBLE_EQ(nice_number(6.9, true), 5);
  EXPECT_DOUBLE_EQ(nice_number(7.1, true), 10);
  EXPECT_DOUBLE_EQ(nice_number(1.1, false), 2);
  EXPECT_DOUBLE_EQ(nice_number(4800, false), 5000);
  EXPECT_DOUBLE_EQ(nice_number(0, true), 1);
}

TEST(SvgTicks, LinearTicksCoverTheRangeAtANiceStep) {
  const Ticks t = linear_ticks(0, 4800);
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_DOUBLE_EQ(t.hi, 5000);
  ASSERT_EQ(t.values.size(), 6u);
  EXPECT_DOUBLE_EQ(t.values[1], 1000);

  const Ticks small = linear_ticks(0, 1.22);
  EXPECT_DOUBLE_EQ(small.hi, 1.5);
  EXPECT_EQ(small.values, (std::vector<double>{0, 0.5, 1, 1.5}));

  const Ticks negative = linear_ticks(-3, 7);
  EXPECT_DOUBLE_EQ(negative.lo, -4);
  EXPECT_DOUBLE_EQ(negative.hi, 8);
  EXPECT_EQ(negative.values[2], 0.0);  // exactly zero, not -8.9e-16
}

TEST(SvgTicks, DegenerateLinearRangesWiden) {
  const Ticks zero = linear_ticks(0, 0);
  EXPECT_LT(zero.lo, zero.hi);
  const Ticks one = linear_ticks(5, 5);
  EXPECT_LE(one.lo, 5);
  EXPECT_GT(one.hi, 5);
}

TEST(SvgTicks, Log2TicksThinToFitMessageSizeSweeps) {
  // 8 B .. 8 GiB: 31 powers of two, thinned to every 4th.
  const Ticks t = log_ticks(8, 8.0 * (1 << 30), 2);
  EXPECT_DOUBLE_EQ(t.lo, 8);
  EXPECT_DOUBLE_EQ(t.hi, 8.0 * (1 << 30));
  EXPECT_LE(t.values.size(), 9u);
  EXPECT_DOUBLE_EQ(t.values.front(), 16);
  EXPECT_DOUBLE_EQ(t.values[1], 256);
  for (double v : t.values) EXPECT_EQ(std::log2(v), std::round(std::log2(v)));

  // 8 MiB .. 4 GiB: every other power.
  const Ticks m = log_ticks(8 << 20, 4.0 * (1 << 30), 2);
  EXPECT_EQ(m.values.size(), 5u);
  EXPECT_DOUBLE_EQ(m.values.front(), 16 << 20);
}

TEST(SvgTicks, Log10TicksAddTwoAndFiveOnShortRanges) {
  const Ticks t = log_ticks(3, 60, 10);
  EXPECT_DOUBLE_EQ(t.lo, 1);
  EXPECT_DOUBLE_EQ(t.hi, 100);
  EXPECT_EQ(t.values, (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  // Ten decades: every other power of ten.
  const Ticks wide = log_ticks(0.001, 1e6, 10);
  EXPECT_DOUBLE_EQ(wide.lo, 0.001);
  EXPECT_EQ(wide.values.size(), 5u);
  EXPECT_DOUBLE_EQ(wide.values.front(), 0.01);
  EXPECT_DOUBLE_EQ(wide.values.back(), 1e6);
  const Ticks single = log_ticks(64, 64, 2);
  EXPECT_LT(single.lo, 64);
  EXPECT_GT(single.hi, 64);
}

TEST(SvgTicks, AxisTicksIncludeZeroAndHonourForcedRanges) {
  Axis axis;
  EXPECT_DOUBLE_EQ(axis_ticks(axis, 50, 60).lo, 0);
  axis.include_zero = false;
  EXPECT_GT(axis_ticks(axis, 50, 60).lo, 0);
  axis.min = 0;
  axis.max = 100;
  const Ticks forced = axis_ticks(axis, 50, 60);
  EXPECT_DOUBLE_EQ(forced.lo, 0);
  EXPECT_DOUBLE_EQ(forced.hi, 100);
}

TEST(SvgTicks, TickLabels) {
  EXPECT_EQ(format_tick(1000, TickFormat::number, 1000), "1000");
  EXPECT_EQ(format_tick(0.2, TickFormat::number, 0.2), "0.2");
  EXPECT_EQ(format_tick(0.25, TickFormat::number, 0.05), "0.25");
  EXPECT_EQ(format_tick(200000, TickFormat::number, 50000), "200k");
  EXPECT_EQ(format_tick(2e6, TickFormat::number, 0), "2M");
  EXPECT_EQ(format_tick(8, TickFormat::bytes), "8 B");
  EXPECT_EQ(format_tick(4096, TickFormat::bytes), "4 KiB");
  EXPECT_EQ(format_tick(1.5 * (1 << 20), TickFormat::bytes), "1.5 MiB");
  EXPECT_EQ(format_tick(8.0 * (1 << 30), TickFormat::bytes), "8 GiB");
  EXPECT_EQ(format_value(4606.8), "4607");
  EXPECT_EQ(format_value(54.83), "54.8");
  EXPECT_EQ(format_value(0.01234), "0.0123");
  EXPECT_EQ(format_value(5), "5");
  EXPECT_EQ(format_value(kNaN), "n/a");
}

TEST(SvgScale, LinearAndLogMapping) {
  const Scale lin(ScaleType::linear, 0, 100, 0, 200);
  EXPECT_DOUBLE_EQ(lin(50), 100);
  const Scale inv(ScaleType::linear, 0, 100, 300, 100);  // y grows downwards
  EXPECT_DOUBLE_EQ(inv(100), 100);
  const Scale log(ScaleType::log2, 1, 1024, 0, 100);
  EXPECT_NEAR(log(32), 50, 1e-9);
  EXPECT_TRUE(std::isnan(log(0)));
  EXPECT_TRUE(std::isnan(log(-1)));
}

TEST(SvgEscape, EscapesMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(escape(std::string("a\x01\tb", 4)), "a b");
  EXPECT_EQ(escape("µs ×"), "µs ×");
}

BarChart gemm_bars() {
  BarChart c;
  c.id = "gemm";
  c.title = "GEMM throughput per precision";
  c.description = "Bars: best measured throughput; marks: spec dense peak.";
  c.categories = {"fp64", "tf32", "bf16", "fp8"};
  c.category_label = "Precision";
  c.y = make_axis("Throughput", "TFLOP/s");
  c.series = {{"measured", {54.9, 346.3, 742.0, 1306.1}}};
  c.marks = CategoryMarks{"spec dense peak", {66.9, 494.7, 989.4, 1978.9}};
  return c;
}

TEST(SvgText, WidthsFollowTheFallbackFontsGlyphs) {
  // DejaVu Sans advances (hmtx, 2048 units per em): '0'..'9' 1303, 'i' 569, 'm' 1995, 'W' 2025.
  EXPECT_NEAR(text_width("0123456789"), 10 * 1303.0 / 2048 * 12, 0.1);
  EXPECT_NEAR(text_width("i", 10), 569.0 / 2048 * 10, 0.01);
  EXPECT_GT(text_width("mmmm"), 3 * text_width("iiii"));
  // The GEMM legend label that overlapped its neighbour in the example report: 196.4 px in DejaVu Sans
  // at 12 px (a flat 6.6 px per character gave 178.2).
  EXPECT_NEAR(text_width("gemm-h200-20261130-standard"), 196.4, 0.3);
  // Multi-byte characters count once: 'µ' as a wide Latin letter, a CJK ideograph as a full em.
  EXPECT_NEAR(text_width("\u00b5s"), 0.75 * 12 + 521.0 / 1000 * 12, 0.01);
  EXPECT_NEAR(text_width("\u6a21"), 12, 0.01);
}

struct LegendEntry {
  double x = 0;  // where the swatch starts
  double text_x = 0;
  double y = 0;
  std::string label;
};

// The items of the chart's <g class="legend">: swatch x, label x and y, label text (markup stripped).
std::vector<LegendEntry> legend_entries(const std::string& svg) {
  std::vector<LegendEntry> out;
  const auto begin = svg.find("<g class=\"legend\">");
  const auto end = svg.find("</g>", begin);
  if (begin == std::string::npos || end == std::string::npos) return out;
  std::istringstream lines(svg.substr(begin, end - begin));
  auto attr = [](const std::string& line, const std::string& name, std::size_t from) {
    const auto at = line.find(" " + name + "=\"", from);
    return at == std::string::npos ? kNaN : std::stod(line.substr(at + name.size() + 3));
  };
  for (std::string line; std::getline(lines, line);) {
    const auto text = line.find("<text ");
    if (text == std::string::npos) continue;
    LegendEntry e;
    e.x = line.rfind("<rect", 0) == 0 ? attr(line, "x", 0) : attr(line, "x1", 0);
    e.text_x = attr(line, "x", text);
    e.y = attr(line, "y", text);
    const auto close = line.rfind("</text>");
    const auto open = line.rfind('>', close);
    e.label = line.substr(open + 1, close - open - 1);
    out.push_back(e);
  }
  return out;
}

TEST(SvgLegend, ItemsLeaveRoomForTheirLabels) {
  BarChart c = gemm_bars();
  c.series = {{"gemm-h200-20261130-standard", {54.9, 346.3, 742.0, 1306.1}},
              {"h200-serve-llama-3.1-8b-20261130", {kNaN, kNaN, 702.7, kNaN}}};
  const std::vector<LegendEntry> items = legend_entries(render(c));
  ASSERT_EQ(items.size(), 3u);
  for (std::size_t i = 0; i + 1 < items.size(); ++i) {
    SCOPED_TRACE(items[i].label);
    EXPECT_EQ(items[i].y, items[i + 1].y);  // one row at this width
    EXPECT_GE(items[i + 1].x, items[i].text_x + text_width(items[i].label) + 8);
  }
  // In pixels of the DejaVu Sans rendering: the first label ends at 34 + 196.4.
  EXPECT_GE(items[1].x, 34 + 196.4 + 8);
  EXPECT_LE(items.back().text_x + text_width(items.back().label), kWidth - 16);
}

TEST(SvgLegend, WrapsAndCutsLabelsWiderThanTheChart) {
  LineChart c;
  c.id = "long";
  c.title = "Long names";
  c.x = make_axis("x", "");
  c.y = make_axis("y", "");
  const std::string long_name(300, 'w');
  c.series = {{"first series", {{1, 1}, {2, 2}}}, {long_name, {{1, 2}, {2, 3}}}, {"third", {{1, 3}, {2, 1}}}};
  const std::string svg = render(c);
  const std::vector<LegendEntry> items = legend_entries(svg);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_GT(items[1].y, items[0].y);  // the long one starts a new row
  EXPECT_GT(items[2].y, items[1].y);  // and the next item goes below it
  EXPECT_EQ(items[1].label.substr(items[1].label.size() - 3), "\u2026");
  EXPECT_LE(items[1].text_x + text_width(items[1].label), kWidth - 16);
  EXPECT_NE(svg.find("<title>" + long_name + "</title>"), std::string::npos);  // the full name as a tooltip
}

TEST(SvgGolden, Bar) {
  expect_golden("svg_bar.svg", render(gemm_bars()));
}

TEST(SvgGolden, GroupedBar) {
  BarChart c;
  c.id = "transfer";
  c.title = "Host transfer bandwidth";
  c.description = "Grouped bars per transfer size.";
  c.categories = {"h2d_ce_pinned", "d2h_ce_pinned", "bidir_ce_pinned", "h2d_ce_pageable"};
  c.category_label = "Transfer";
  c.y = make_axis("Bandwidth", "GB/s");
  c.series = {{"64MiB", {54.8, 55.2, 88.3, 6.0}}, {"512MiB", {53.6, 55.3, 82.6, kNaN}}};
  c.ref_lines = {{63.0, "link peak per direction 63 GB/s"}};
  expect_golden("svg_grouped_bar.svg", render(c));
}

TEST(SvgGolden, StackedBar) {
  BarChart c;
  c.id = "tco";
  c.title = "Five-year cost per GPU";
  c.description = "Stacked bars: purchase, power, hosting.";
  c.categories = {"A100", "H100", "H200"};
  c.category_label = "GPU";
  c.y = make_axis("Cost", "kUSD");
  c.stacked = true;
  c.series = {{"purchase", {20.9, 31.3, 39.1}}, {"power", {3.5, 6.1, 6.1}}, {"hosting", {5.0, 5.0, 5.0}}};
  expect_golden("svg_stacked_bar.svg", render(c));
}

TEST(SvgGolden, LineLog2Bytes) {
  LineChart c;
  c.id = "busbw";
  c.title = "all_reduce busbw vs message size";
  c.description = "Line chart, log2 x axis.";
  c.x = make_axis("Message size", "", ScaleType::log2, TickFormat::bytes);
  c.y = make_axis("busbw", "GB/s");
  LineSeries s{"all_reduce", {}};
  LineSeries g{"all_gather", {}, true};
  for (int e = 3; e <= 33; e += 2) {
    const double bytes = std::ldexp(1.0, e);
    s.points.emplace_back(bytes, 346.0 * bytes / (bytes + 2.0 * (1 << 20)));
    g.points.emplace_back(bytes, 360.0 * bytes / (bytes + 4.0 * (1 << 20)));
  }
  c.series = {s, g};
  c.ref_lines = {{450, "NVLink per direction 450 GB/s"}};
  expect_golden("svg_line_log2.svg", render(c));
}

// Serving latency vs throughput: linear axes, unsorted points whose hollow flags must follow them
// through the sort by x, and an SLO line.
TEST(SvgGolden, LineHollowMarkers) {
  LineChart c;
  c.id = "serve-ttft";
  c.title = "p99 TTFT vs output tokens/s";
  c.description = "Line chart with hollow INVALID points and an SLO line.";
  c.x = make_axis("Achieved output throughput", "tokens/s");
  c.y = make_axis("p99 TTFT", "ms");
  LineSeries s{"p99 TTFT", {{7000, 2354}, {2000, 65}, {6200, 610}, {6600, 1403}}};
  s.hollow = {true, false, false, true};
  s.hollow_label = "INVALID";
  c.series = {s};
  c.ref_lines = {{1000, "p99 TTFT bound 1000 ms"}};
  const std::string svg = render(c);
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto p = svg.find(needle); p != std::string::npos; p = svg.find(needle, p + 1)) ++n;
    return n;
  };
  // Two rings (the INVALID points), two dots, and the label only on the rings' tooltips.
  EXPECT_EQ(count("fill=\"#fff\" stroke="), 2u);
  EXPECT_EQ(count("r=\"3\""), 2u);
  EXPECT_EQ(count("(INVALID)"), 2u);
  EXPECT_NE(svg.find("2354 ms (INVALID)"), std::string::npos);
  EXPECT_EQ(svg.find("65 ms (INVALID)"), std::string::npos);
  expect_golden("svg_line_hollow.svg", svg);
}

TEST(SvgGolden, LineLog10) {
  LineChart c;
  c.id = "serving";
  c.title = "Latency vs throughput";
  c.description = "Line chart, log10 axes, with an SLO line.";
  c.x = make_axis("Throughput", "tokens/s", ScaleType::log10);
  c.y = make_axis("TPOT p99", "ms", ScaleType::log10);
  c.series = {{"H200", {{100, 8}, {1000, 11}, {5000, 19}, {20000, 55}}}};
  c.ref_lines = {{50, "SLO 50 ms"}, {10000, "target 10k tokens/s", true}};
  expect_golden("svg_line_log10.svg", render(c));
}

TEST(SvgGolden, HeatMap) {
  HeatMap h;
  h.id = "p2p";
  h.title = "Peer-to-peer copy bandwidth";
  h.description = "Heat map, source rows, destination columns.";
  h.row_label = "source GPU";
  h.column_label = "destination GPU";
  h.rows = h.columns = {"GPU 0", "GPU 1", "GPU 2"};
  h.values = {{kNaN, 394.1, 392.0}, {393.8, kNaN, 55.0}, {391.2, 54.7, kNaN}};
  h.unit = "GB/s";
  expect_golden("svg_heatmap.svg", render(h));
}

TEST(SvgChart, OutputIsDeterministicAndEscaped) {
  BarChart c = gemm_bars();
  c.title = "<script>alert(1)</script>";
  c.categories[0] = "a\"b&c</svg>";
  const std::string svg = render(c);
  EXPECT_EQ(svg, render(c));
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  std::size_t closes = 0;
  for (auto p = svg.find("</svg>"); p != std::string::npos; p = svg.find("</svg>", p + 1)) ++closes;
  EXPECT_EQ(closes, 1u);
  // Accessible: a title element referenced by aria-labelledby.
  EXPECT_NE(svg.find("aria-labelledby=\"gemm-title gemm-desc\""), std::string::npos);
  EXPECT_NE(svg.find("<title id=\"gemm-title\">"), std::string::npos);
}

TEST(SvgChart, IdsAreSanitised) {
  HeatMap h;
  h.id = "p2p \"x\" <y>";
  h.rows = h.columns = {"0"};
  h.values = {{1}};
  const std::string svg = render(h);
  EXPECT_NE(svg.find("id=\"p2p__x___y_-title\""), std::string::npos);
}

}  // namespace
}  // namespace gpuscout::report::svg
