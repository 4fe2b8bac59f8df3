#pragma once
// Small, tested SVG charts for the HTML report: bar, grouped bar, stacked bar, line (linear, log2
// or log10 axes) and heat-map matrix. Charts are plain data; render() turns one into a standalone
// <svg> element. Output is deterministic (fixed number formatting, no clocks, no random ids) and
// every piece of text is XML-escaped, so user-controlled names cannot break out of the markup.
// Charts carry no script and fetch nothing.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuscout::report::svg {

// Escapes & < > " ' for text and attribute values (XML and HTML alike).
std::string escape(std::string_view text);

// Estimated width in pixels of `text` set at `font_size` px: per-glyph advances of DejaVu Sans (the
// Linux fallback of the charts' font stack, wider than Segoe UI and Roboto) for ASCII; a full em for
// East Asian wide scripts; 0.75 em for anything else. Used to lay out legends and labels.
double text_width(std::string_view text, double font_size = 12);

enum class ScaleType { linear, log2, log10 };
enum class TickFormat { number, bytes };  // bytes: powers of two as "8 B", "64 KiB", "1 GiB"

struct Axis {
  std::string label;  // "Message size"
  std::string unit;   // "GB/s"; shown as "label (unit)"
  ScaleType scale = ScaleType::linear;
  TickFormat format = TickFormat::number;
  std::optional<double> min, max;  // forced range; otherwise from the data (linear ranges include 0)
  bool include_zero = true;        // linear axes only
};
inline Axis make_axis(std::string label, std::string unit, ScaleType scale = ScaleType::linear,
                      TickFormat format = TickFormat::number) {
  Axis axis;
  axis.label = std::move(label);
  axis.unit = std::move(unit);
  axis.scale = scale;
  axis.format = format;
  return axis;
}

// Tick positions and the range they cover.
struct Ticks {
  double lo = 0, hi = 1;
  std::vector<double> values;
};

// "Nice" number (1, 2, 5 x 10^k) near x: rounded when `round`, else the smallest nice number >= x.
double nice_number(double x, bool round);
// About `target` ticks at a nice step covering [lo, hi] (the range is widened to whole steps).
Ticks linear_ticks(double lo, double hi, int target = 5);
// Powers of `base` (2 or 10) covering [lo, hi] (lo > 0). When there are more than `max_ticks`
// powers, every k-th power is kept, k the smallest that fits. A log10 range shorter than two decades
// also gets 2x and 5x ticks.
Ticks log_ticks(double lo, double hi, double base, int max_ticks = 9);
// Ticks of an axis for data in [lo, hi], honouring its scale and forced range.
Ticks axis_ticks(const Axis& axis, double lo, double hi);

// Tick label. Numbers: the fewest decimals `step` needs (step 0: up to 3 significant decimals),
// thousands as "10k", "1M". Bytes: "512 B", "4 KiB", "1.5 MiB", "8 GiB".
std::string format_tick(double value, TickFormat format, double step = 0);
// Compact value for labels: 3 significant digits, no exponent ("0.0123", "12.3", "1234").
std::string format_value(double value);

// Maps data values to pixels along one axis.
class Scale {
 public:
  Scale(ScaleType type, double lo, double hi, double pixel_lo, double pixel_hi);
  double operator()(double value) const;

 private:
  ScaleType type_;
  double lo_, hi_, pixel_lo_, pixel_hi_;
};

// A horizontal (value on the y axis) or vertical (value on the x axis) reference line, dashed,
// labelled: a spec peak, an SLO bound, a cache size.
struct RefLine {
  double value = 0;
  std::string label;
  bool vertical = false;
};

// Bar charts: one bar per category and series. One series: plain bars; several: grouped bars, or
// stacked with `stacked`. A NaN value leaves a gap ("not measured").
struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category
};
// A short mark across each category's group, e.g. the spec peak of that precision.
struct CategoryMarks {
  std::string name;            // legend text, "spec dense peak"
  std::vector<double> values;  // one per category, NaN for none
};
struct BarChart {
  std::string id;  // unique in the page; used for the <title>/<desc> ids
  std::string title;
  std::string description;  // <desc>: what the chart shows, for screen readers
  std::vector<std::string> categories;
  std::string category_label;  // x axis label
  std::vector<BarSeries> series;
  Axis y;
  bool stacked = false;
  bool value_labels = true;  // print each bar's value above it (not for stacked bars)
  std::optional<CategoryMarks> marks;
  std::vector<RefLine> ref_lines;  // horizontal only
};

// Line chart: x/y points per series, drawn as a polyline with a marker on each point.
struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // sorted by x when drawn; non-positive x/y skipped on log axes
  bool dashed = false;
  std::optional<std::size_t> color;  // palette index; the series' position when absent
  // Per point, in `points` order: true draws a hollow ring instead of a dot, so a point that failed a check
  // (an INVALID load probe) stays on the curve yet reads differently; `hollow_label` ends its tooltip.
  std::vector<bool> hollow;
  std::string hollow_label;
};
struct LineChart {
  std::string id;
  std::string title;
  std::string description;
  Axis x, y;
  std::vector<LineSeries> series;
  std::vector<RefLine> ref_lines;
};

// Heat-map matrix: rows x columns of values, colour by value (from 0 to the largest), the value printed
// in each cell. The <svg> is as wide as the matrix needs, up to kWidth.
struct HeatMap {
  std::string id;
  std::string title;
  std::string description;
  std::string row_label, column_label;  // "source GPU", "destination GPU"
  std::vector<std::string> rows, columns;
  std::vector<std::vector<double>> values;  // [row][column], NaN = not measured (shown as "–")
  std::string unit;                         // shown in the colour legend
};

// Fixed canvas; the <svg> scales to its container through viewBox.
inline constexpr int kWidth = 760;
inline constexpr int kHeight = 420;

// Colour of series `index` (a colour-blind-safe palette, repeating after 8).
std::string_view series_color(std::size_t index);

std::string render(const BarChart& chart);
std::string render(const LineChart& chart);
std::string render(const HeatMap& chart);

}  // namespace gpuscout::report::svg
