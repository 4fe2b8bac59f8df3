#include "gpuscout/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>

namespace gpuscout::report::svg {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::string_view kTextColor = "#1f2937";
constexpr std::string_view kMutedColor = "#6b7280";
constexpr std::string_view kGridColor = "#e5e7eb";
constexpr std::string_view kRefColor = "#b91c1c";

// Okabe-Ito-like palette, readable by colour-blind people and in greyscale print order.
constexpr std::array<std::string_view, 8> kPalette = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                                      "#56b4e9", "#d55e00", "#7f7f7f", "#f0e442"};

// Advance widths of the printable ASCII glyphs (U+0020..U+007E) of DejaVu Sans, in thousandths of an
// em, rounded up (the font's hmtx table over its 2048 units per em). DejaVu Sans is what the
// font-family stack falls back to on Linux (Debian's chromium) and is wider than Segoe UI and Roboto,
// so text laid out with these widths does not run into its neighbour under any of them.
constexpr std::array<short, 95> kAsciiAdvance = {
    318,  401, 460, 838, 637, 951, 780, 275, 391, 391, 500, 838, 318, 361, 318, 337,  // space .. /
    637,  637, 637, 637, 637, 637, 637, 637, 637, 637, 337, 337, 838, 838, 838, 531,  // 0 .. ?
    1000, 685, 687, 699, 771, 632, 576, 775, 752, 295, 295, 656, 558, 863, 749, 788,  // @ .. O
    604,  788, 695, 635, 611, 732, 685, 989, 686, 611, 686, 391, 337, 391, 838, 500,  // P .. _
    500,  613, 635, 550, 635, 616, 353, 635, 634, 278, 278, 580, 278, 975, 634, 612,  // ` .. o
    635,  635, 412, 521, 393, 634, 592, 818, 592, 592, 525, 637, 337, 637, 838,       // p .. ~
};
// Outside ASCII: East Asian wide scripts (from U+2E80) take a full em; anything else is taken as a
// wide Latin letter.
constexpr int kWideAdvance = 1000;
constexpr int kOtherAdvance = 750;

// Calls `glyph(first_byte_index, byte_count, advance_in_thousandths_em)` per UTF-8 code point.
template <typename F>
void for_each_glyph(std::string_view text, F&& glyph) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t n = 1;
    if (lead >= 0xF0) {
      n = 4;
    } else if (lead >= 0xE0) {
      n = 3;
    } else if (lead >= 0xC0) {
      n = 2;
    }
    n = std::min(n, text.size() - i);
    std::uint32_t cp = n == 1 ? lead : lead & (0x7Fu >> n);
    for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3Fu);
    int advance = kOtherAdvance;
    if (cp >= 0x20 && cp <= 0x7E) {
      advance = kAsciiAdvance[cp - 0x20];
    } else if (cp >= 0x2E80) {
      advance = kWideAdvance;
    }
    glyph(i, n, advance);
    i += n;
  }
}

// Keeps `text` within `max_width` pixels, cutting at a code point and ending with an ellipsis.
std::string fit_text(std::string_view text, double max_width, double font_size = 12) {
  if (text_width(text, font_size) <= max_width) return std::string(text);
  const double budget = max_width - text_width("\u2026", font_size);
  double used = 0;
  std::size_t cut = 0;
  bool full = false;
  for_each_glyph(text, [&](std::size_t at, std::size_t bytes, int advance) {
    if (full) return;
    const double w = advance * font_size / 1000.0;
    if (used + w > budget) {
      full = true;
      return;
    }
    used += w;
    cut = at + bytes;
  });
  return std::string(text.substr(0, cut)) + "\u2026";
}

// Ids become attribute values and fragment names: letters, digits, '-' and '_' only.
std::string safe_id(std::string_view id) {
  std::string out;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    out += ok ? c : '_';
  }
  return out.empty() ? "chart" : out;
}

std::string px(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string axis_title(const Axis& axis) {
  if (axis.unit.empty()) return axis.label;
  if (axis.label.empty()) return axis.unit;
  return fmt::format("{} ({})", axis.label, axis.unit);
}

std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

struct Frame {
  double left, top, right, bottom;  // plot area in pixels
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

// The opening of every chart: <svg>, accessible title and description, background, visible title.
void open_svg(std::string& out, const std::string& id, const std::string& title, const std::string& description,
              int height, int width = kWidth) {
  const std::string sid = safe_id(id);
  fmt::format_to(std::back_inserter(out),
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" "
                 "height=\"{h}\" role=\"img\" aria-labelledby=\"{id}-title {id}-desc\" "
                 "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\" font-size=\"12\">\n",
                 fmt::arg("w", width), fmt::arg("h", height), fmt::arg("id", sid));
  fmt::format_to(std::back_inserter(out), "<title id=\"{}-title\">{}</title>\n", sid, escape(title));
  fmt::format_to(std::back_inserter(out), "<desc id=\"{}-desc\">{}</desc>\n", sid, escape(description));
  fmt::format_to(std::back_inserter(out), "<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", width, height);
  fmt::format_to(std::back_inserter(out),
                 "<text x=\"16\" y=\"24\" font-size=\"15\" font-weight=\"600\" fill=\"{}\">{}</text>\n", kTextColor,
                 escape(title));
}

struct LegendItem {
  std::string label;
  std::string color;
  enum class Shape { box, line, dashed_line, mark } shape = Shape::box;
};

// Lays legend items left to right, wrapping; returns the height used.
double draw_legend(std::string& out, const std::vector<LegendItem>& items, double y) {
  if (items.empty()) return 0;
  double x = 16;
  double row = 0;
  out += "<g class=\"legend\">\n";
  for (const LegendItem& item : items) {
    // A label wider than the chart is cut with an ellipsis; the full text stays in a tooltip.
    const std::string label = fit_text(item.label, kWidth - 32.0 - 18);
    const double w = 18 + text_width(label) + 16;
    if (x + w > kWidth - 16 && x > 16) {
      x = 16;
      row += 18;
    }
    const double cy = y + row;
    switch (item.shape) {
      case LegendItem::Shape::box:
        fmt::format_to(std::back_inserter(out), "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
                       px(x), px(cy - 10), item.color);
        break;
      case LegendItem::Shape::line:
      case LegendItem::Shape::dashed_line:
        fmt::format_to(std::back_inserter(out),
                       "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"{}/>", px(x),
                       px(cy - 4), px(x + 14), px(cy - 4), item.color,
                       item.shape == LegendItem::Shape::dashed_line ? " stroke-dasharray=\"4 3\"" : "");
        break;
      case LegendItem::Shape::mark:
        fmt::format_to(std::back_inserter(out),
                       "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/>", px(x),
                       px(cy - 4), px(x + 14), px(cy - 4), item.color);
        break;
    }
    if (label == item.label) {
      fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", px(x + 18), px(cy),
                     kTextColor, escape(label));
    } else {
      fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" fill=\"{}\"><title>{}</title>{}</text>\n",
                     px(x + 18), px(cy), kTextColor, escape(item.label), escape(label));
    }
    x += w;
  }
  out += "</g>\n";
  return row + 18;
}

void draw_y_axis(std::string& out, const Frame& f, const Axis& axis, const Ticks& ticks, const Scale& y) {
  const double step = ticks.values.size() > 1 ? ticks.values[1] - ticks.values[0] : 0;
  out += "<g class=\"y-axis\">\n";
  for (double v : ticks.values) {
    const double py = y(v);
    fmt::format_to(std::back_inserter(out),
                   "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>"
                   "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{}\">{}</text>\n",
                   px(f.left), px(py), px(f.right), px(py), kGridColor, px(f.left - 6), px(py + 4), kMutedColor,
                   escape(format_tick(v, axis.format, axis.scale == ScaleType::linear ? step : 0)));
  }
  fmt::format_to(std::back_inserter(out), "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", px(f.left),
                 px(f.top), px(f.left), px(f.bottom), kMutedColor);
  const double cy = (f.top + f.bottom) / 2;
  fmt::format_to(
      std::back_inserter(out),
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n", px(cy),
      px(cy), kTextColor, escape(axis_title(axis)));
  out += "</g>\n";
}

void draw_x_title(std::string& out, const Frame& f, const std::string& text, int height) {
  if (text.empty()) return;
  fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                 px((f.left + f.right) / 2), height - 10, kTextColor, escape(text));
}

void draw_ref_line(std::string& out, const Frame& f, const RefLine& ref, const Scale& scale) {
  const double p = scale(ref.value);
  if (!std::isfinite(p)) return;
  if (ref.vertical) {
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"ref\"><line x1=\"{x}\" y1=\"{t}\" x2=\"{x}\" y2=\"{b}\" stroke=\"{c}\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/><text x=\"{lx}\" y=\"{ly}\" fill=\"{c}\" "
                   "font-size=\"11\">{label}</text></g>\n",
                   fmt::arg("x", px(p)), fmt::arg("t", px(f.top)), fmt::arg("b", px(f.bottom)),
                   fmt::arg("c", kRefColor), fmt::arg("lx", px(p + 4)), fmt::arg("ly", px(f.top + 12)),
                   fmt::arg("label", escape(ref.label)));
  } else {
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"ref\"><line x1=\"{l}\" y1=\"{y}\" x2=\"{r}\" y2=\"{y}\" stroke=\"{c}\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/><text x=\"{lx}\" y=\"{ly}\" text-anchor=\"end\" "
                   "fill=\"{c}\" font-size=\"11\">{label}</text></g>\n",
                   fmt::arg("l", px(f.left)), fmt::arg("r", px(f.right)), fmt::arg("y", px(p)),
                   fmt::arg("c", kRefColor), fmt::arg("lx", px(f.right - 4)), fmt::arg("ly", px(p - 4)),
                   fmt::arg("label", escape(ref.label)));
  }
}

void close_svg(std::string& out) {
  out += "</svg>\n";
}

// Data range of finite values (positive only when `positive`); nullopt when there are none.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v, bool positive) {
    if (!std::isfinite(v) || (positive && v <= 0)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

}  // namespace

double text_width(std::string_view text, double font_size) {
  double thousandths = 0;
  for_each_glyph(text, [&](std::size_t, std::size_t, int advance) { thousandths += advance; });
  return thousandths * font_size / 1000.0;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML; tabs and newlines become spaces.
        if (u < 0x20 || u == 0x7f) {
          if (c == '\t' || c == '\n' || c == '\r') out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

double nice_number(double x, bool round) {
  if (!(x > 0) || !std::isfinite(x)) return 1;
  const double exponent = std::floor(std::log10(x));
  const double magnitude = std::pow(10.0, exponent);
  const double fraction = x / magnitude;
  double nice;
  if (round) {
    nice = fraction < 1.5 ? 1 : fraction < 3 ? 2 : fraction < 7 ? 5 : 10;
  } else {
    nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  }
  return nice * magnitude;
}

Ticks linear_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.5;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  target = std::max(target, 2);
  const double range = nice_number(hi - lo, false);
  const double step = nice_number(range / (target - 1), true);
  Ticks t;
  // Snap to whole steps; a tiny tolerance keeps 4.0000001 from adding a step.
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  const int n = static_cast<int>(std::llround((t.hi - t.lo) / step));
  for (int i = 0; i <= n; ++i) {
    double v = t.lo + i * step;
    if (std::abs(v) < step * 1e-9) v = 0;
    t.values.push_back(v);
  }
  return t;
}

Ticks log_ticks(double lo, double hi, double base, int max_ticks) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1;
  if (!(hi > 0) || !std::isfinite(hi)) hi = lo;
  if (lo > hi) std::swap(lo, hi);
  const double lb = std::log(base);
  // Round to whole exponents, with a tolerance so an exact power stays itself.
  int e_lo = static_cast<int>(std::floor(std::log(lo) / lb + 1e-9));
  int e_hi = static_cast<int>(std::ceil(std::log(hi) / lb - 1e-9));
  if (e_lo == e_hi) {
    --e_lo;
    ++e_hi;
  }
  Ticks t;
  t.lo = std::pow(base, e_lo);
  t.hi = std::pow(base, e_hi);
  const int count = e_hi - e_lo + 1;
  const int k = std::max(1, (count + std::max(max_ticks, 1) - 1) / std::max(max_ticks, 1));
  for (int e = e_lo; e <= e_hi; ++e) {
    if (((e % k) + k) % k != 0) continue;
    t.values.push_back(std::pow(base, e));
    if (base == 10 && e_hi - e_lo <= 2 && e < e_hi) {
      t.values.push_back(2 * std::pow(base, e));
      t.values.push_back(5 * std::pow(base, e));
    }
  }
  return t;
}

Ticks axis_ticks(const Axis& axis, double lo, double hi) {
  if (axis.min) lo = *axis.min;
  if (axis.max) hi = *axis.max;
  if (axis.scale == ScaleType::linear) {
    if (axis.include_zero) {
      lo = std::min(lo, 0.0);
      hi = std::max(hi, 0.0);
    }
    Ticks t = linear_ticks(lo, hi);
    if (axis.min) t.lo = *axis.min;
    if (axis.max) t.hi = *axis.max;
    std::erase_if(t.values, [&](double v) { return v < t.lo - 1e-9 * std::abs(t.lo) || v > t.hi * (1 + 1e-9); });
    return t;
  }
  return log_ticks(lo, hi, axis.scale == ScaleType::log2 ? 2.0 : 10.0);
}

std::string format_value(double value) {
  if (!std::isfinite(value)) return "n/a";
  if (value == 0) return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(value))));
  const int decimals = std::max(0, 2 - magnitude);
  return trim_zeros(fmt::format("{:.{}f}", value, decimals));
}

std::string format_tick(double value, TickFormat format, double step) {
  if (!std::isfinite(value)) return "";
  if (format == TickFormat::bytes) {
    static constexpr std::array<std::string_view, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    std::size_t unit = 0;
    double v = value;
    while (std::abs(v) >= 1024 && unit + 1 < kUnits.size()) {
      v /= 1024;
      ++unit;
    }
    return fmt::format("{} {}", trim_zeros(fmt::format("{:.1f}", v)), kUnits[unit]);
  }
  const double a = std::abs(value);
  if (a >= 1e6 && (step == 0 || step >= 1e5)) return trim_zeros(fmt::format("{:.2f}", value / 1e6)) + "M";
  if (a >= 1e5 && (step == 0 || step >= 1e4)) return trim_zeros(fmt::format("{:.1f}", value / 1e3)) + "k";
  if (step > 0) {
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    std::string s = fmt::format("{:.{}f}", value, decimals);
    return s == "-0" ? "0" : s;
  }
  return format_value(value);
}

Scale::Scale(ScaleType type, double lo, double hi, double pixel_lo, double pixel_hi)
    : type_(type), lo_(lo), hi_(hi), pixel_lo_(pixel_lo), pixel_hi_(pixel_hi) {
  if (type_ != ScaleType::linear) {
    lo_ = std::log(lo_ > 0 ? lo_ : 1);
    hi_ = std::log(hi_ > 0 ? hi_ : 1);
  }
  if (hi_ == lo_) hi_ = lo_ + 1;
}

double Scale::operator()(double value) const {
  if (type_ != ScaleType::linear) {
    if (!(value > 0)) return kNaN;
    value = std::log(value);
  }
  return pixel_lo_ + (value - lo_) / (hi_ - lo_) * (pixel_hi_ - pixel_lo_);
}

std::string_view series_color(std::size_t index) {
  return kPalette[index % kPalette.size()];
}

std::string render(const BarChart& chart) {
  std::string out;
  const int height = kHeight;
  open_svg(out, chart.id, chart.title, chart.description, height);

  std::vector<LegendItem> legend;
  if (chart.series.size() > 1 || (chart.marks && !chart.series.empty())) {
    for (std::size_t s = 0; s < chart.series.size(); ++s)
      legend.push_back({chart.series[s].name, std::string(series_color(s))});
  }
  if (chart.marks) legend.push_back({chart.marks->name, std::string(kTextColor), LegendItem::Shape::mark});
  const double legend_height = draw_legend(out, legend, 46);

  // Value range: bars (or stacks), marks and reference lines.
  const std::size_t n = chart.categories.size();
  Range range;
  range.add(0, false);
  for (std::size_t c = 0; c < n; ++c) {
    double stack = 0;
    for (const BarSeries& s : chart.series) {
      const double v = c < s.values.size() ? s.values[c] : kNaN;
      if (chart.stacked) {
        if (std::isfinite(v)) stack += v;
      } else {
        range.add(v, false);
      }
    }
    if (chart.stacked) range.add(stack, false);
    if (chart.marks && c < chart.marks->values.size()) range.add(chart.marks->values[c], false);
  }
  for (const RefLine& r : chart.ref_lines) range.add(r.value, false);
  // Headroom for the value labels above the tallest bar.
  const Ticks ticks = axis_ticks(chart.y, range.lo, range.hi * (chart.value_labels ? 1.08 : 1.0));

  // Category labels rotate when they do not fit their band.
  double longest = 0;
  for (const auto& c : chart.categories) longest = std::max(longest, text_width(c, 11));
  Frame f{72, 46 + legend_height + 8, kWidth - 20.0, 0};
  const double band = n > 0 ? (f.right - f.left) / static_cast<double>(n) : f.right - f.left;
  const bool rotate = longest > band - 6;
  const double label_space = rotate ? std::min(130.0, 16 + longest * 0.6) : 22;
  f.bottom = height - 26 - label_space;

  const Scale y(chart.y.scale, ticks.lo, ticks.hi, f.bottom, f.top);
  draw_y_axis(out, f, chart.y, ticks, y);

  const double group = band * 0.72;
  const std::size_t per_group = chart.stacked ? 1 : std::max<std::size_t>(chart.series.size(), 1);
  const double bar_width = group / static_cast<double>(per_group);
  const bool labels = chart.value_labels && !chart.stacked && bar_width >= 16;
  const std::string unit = chart.y.unit.empty() ? "" : " " + chart.y.unit;
  const double base = chart.y.scale == ScaleType::linear ? y(std::max(ticks.lo, 0.0)) : f.bottom;

  out += "<g class=\"bars\">\n";
  for (std::size_t c = 0; c < n; ++c) {
    const double gx = f.left + band * static_cast<double>(c) + (band - group) / 2;
    double stack = 0;
    for (std::size_t s = 0; s < chart.series.size(); ++s) {
      const BarSeries& series = chart.series[s];
      const double v = c < series.values.size() ? series.values[c] : kNaN;
      if (!std::isfinite(v)) continue;
      double top, bottom, x;
      if (chart.stacked) {
        bottom = y(stack);
        stack += v;
        top = y(stack);
        x = gx;
      } else {
        bottom = base;
        top = y(v);
        x = gx + bar_width * static_cast<double>(s);
      }
      if (!std::isfinite(top)) continue;
      if (!std::isfinite(bottom)) bottom = f.bottom;
      const std::string tip = chart.series.size() > 1
                                  ? fmt::format("{}, {}: {}{}", chart.categories[c], series.name, format_value(v), unit)
                                  : fmt::format("{}: {}{}", chart.categories[c], format_value(v), unit);
      fmt::format_to(std::back_inserter(out),
                     "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n", px(x),
                     px(std::min(top, bottom)), px(std::max(bar_width - 2, 1.0)), px(std::abs(bottom - top)),
                     series_color(s), escape(tip));
      if (labels) {
        fmt::format_to(std::back_inserter(out),
                       "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{}</text>\n",
                       px(x + (bar_width - 2) / 2), px(std::min(top, bottom) - 3), kTextColor, escape(format_value(v)));
      }
    }
    if (chart.stacked && stack > 0 && chart.value_labels) {
      fmt::format_to(std::back_inserter(out),
                     "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{}</text>\n",
                     px(gx + group / 2), px(y(stack) - 3), kTextColor, escape(format_value(stack)));
    }
    if (chart.marks && c < chart.marks->values.size() && std::isfinite(chart.marks->values[c])) {
      const double my = y(chart.marks->values[c]);
      if (std::isfinite(my)) {
        fmt::format_to(std::back_inserter(out),
                       "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"><title>{}: {}: "
                       "{}{}</title></line>\n",
                       px(gx - 4), px(my), px(gx + group + 2), px(my), kTextColor, escape(chart.categories[c]),
                       escape(chart.marks->name), escape(format_value(chart.marks->values[c])), escape(unit));
      }
    }
    // Category label under the group.
    const double cx = f.left + band * (static_cast<double>(c) + 0.5);
    if (rotate) {
      fmt::format_to(std::back_inserter(out),
                     "<text x=\"{x}\" y=\"{y}\" transform=\"rotate(-35 {x} {y})\" text-anchor=\"end\" "
                     "font-size=\"11\" fill=\"{c}\">{t}</text>\n",
                     fmt::arg("x", px(cx)), fmt::arg("y", px(f.bottom + 14)), fmt::arg("c", kTextColor),
                     fmt::arg("t", escape(chart.categories[c])));
    } else {
      fmt::format_to(std::back_inserter(out),
                     "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{}\">{}</text>\n", px(cx),
                     px(f.bottom + 16), kTextColor, escape(chart.categories[c]));
    }
  }
  out += "</g>\n";
  fmt::format_to(std::back_inserter(out), "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n", px(f.left),
                 px(f.bottom), px(f.right), px(f.bottom), kMutedColor);
  for (const RefLine& r : chart.ref_lines) draw_ref_line(out, f, r, y);
  draw_x_title(out, f, chart.category_label, height);
  close_svg(out);
  return out;
}

std::string render(const LineChart& chart) {
  std::string out;
  const int height = kHeight;
  open_svg(out, chart.id, chart.title, chart.description, height);

  std::vector<LegendItem> legend;
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    legend.push_back({chart.series[s].name, std::string(series_color(chart.series[s].color.value_or(s))),
                      chart.series[s].dashed ? LegendItem::Shape::dashed_line : LegendItem::Shape::line});
  }
  const double legend_height = draw_legend(out, legend, 46);

  const bool x_log = chart.x.scale != ScaleType::linear;
  const bool y_log = chart.y.scale != ScaleType::linear;
  Range xr, yr;
  for (const LineSeries& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (x_log && x <= 0) || (y_log && y <= 0)) continue;
      xr.add(x, x_log);
      yr.add(y, y_log);
    }
  }
  for (const RefLine& r : chart.ref_lines) (r.vertical ? xr : yr).add(r.value, r.vertical ? x_log : y_log);
  if (xr.empty()) xr.lo = xr.hi = x_log ? 1 : 0;
  if (yr.empty()) yr.lo = yr.hi = y_log ? 1 : 0;
  Axis x_axis = chart.x;
  if (!x_log && !x_axis.min && !x_axis.max) x_axis.include_zero = chart.x.include_zero;
  const Ticks xt = axis_ticks(x_axis, xr.lo, xr.hi);
  const Ticks yt = axis_ticks(chart.y, yr.lo, y_log ? yr.hi : yr.hi * 1.04);

  Frame f{72, 46 + legend_height + 8, kWidth - 24.0, height - 52.0};
  const Scale xs(chart.x.scale, xt.lo, xt.hi, f.left, f.right);
  const Scale ys(chart.y.scale, yt.lo, yt.hi, f.bottom, f.top);
  draw_y_axis(out, f, chart.y, yt, ys);

  // X axis: vertical grid lines and tick labels.
  const double xstep = xt.values.size() > 1 ? xt.values[1] - xt.values[0] : 0;
  out += "<g class=\"x-axis\">\n";
  for (double v : xt.values) {
    const double p = xs(v);
    fmt::format_to(std::back_inserter(out),
                   "<line x1=\"{x}\" y1=\"{t}\" x2=\"{x}\" y2=\"{b}\" stroke=\"{g}\"/>"
                   "<text x=\"{x}\" y=\"{ly}\" text-anchor=\"middle\" fill=\"{c}\">{label}</text>\n",
                   fmt::arg("x", px(p)), fmt::arg("t", px(f.top)), fmt::arg("b", px(f.bottom)),
                   fmt::arg("g", kGridColor), fmt::arg("ly", px(f.bottom + 16)), fmt::arg("c", kMutedColor),
                   fmt::arg("label", escape(format_tick(v, chart.x.format, x_log ? 0 : xstep))));
  }
  fmt::format_to(std::back_inserter(out), "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>\n</g>\n",
                 px(f.left), px(f.bottom), px(f.right), px(f.bottom), kMutedColor);

  for (const RefLine& r : chart.ref_lines) draw_ref_line(out, f, r, r.vertical ? xs : ys);

  out += "<g class=\"series\">\n";
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const LineSeries& series = chart.series[s];
    const std::string_view color = series_color(series.color.value_or(s));
    // Sort indices, not points, so that each point keeps its hollow flag.
    std::vector<std::size_t> order(series.points.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return series.points[a].first < series.points[b].first; });
    std::string path;
    std::string markers;
    for (std::size_t i : order) {
      const auto [x, y] = series.points[i];
      const bool hollow = i < series.hollow.size() && series.hollow[i];
      const double px_ = xs(x), py_ = ys(y);
      if (!std::isfinite(px_) || !std::isfinite(py_) || !std::isfinite(x) || !std::isfinite(y)) continue;
      if (!path.empty()) path += ' ';
      path += px(px_) + "," + px(py_);
      std::string tip = fmt::format("{}: {} {}: {}{}", series.name, format_tick(x, chart.x.format), chart.x.unit,
                                    format_value(y), chart.y.unit.empty() ? "" : " " + chart.y.unit);
      if (hollow && !series.hollow_label.empty()) tip += " (" + series.hollow_label + ")";
      if (hollow) {
        fmt::format_to(std::back_inserter(markers),
                       "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"#fff\" stroke=\"{}\" "
                       "stroke-width=\"2\"><title>{}</title></circle>",
                       px(px_), px(py_), color, escape(tip));
      } else {
        fmt::format_to(std::back_inserter(markers),
                       "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>", px(px_), px(py_),
                       color, escape(tip));
      }
    }
    if (path.empty()) continue;
    fmt::format_to(std::back_inserter(out),
                   "<g><polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>{}</g>\n", path, color,
                   series.dashed ? " stroke-dasharray=\"6 4\"" : "", markers);
  }
  out += "</g>\n";
  draw_x_title(out, f, axis_title(chart.x), height);
  close_svg(out);
  return out;
}

std::string render(const HeatMap& chart) {
  const std::size_t rows = chart.rows.size(), cols = chart.columns.size();
  double row_label_width = 0;
  for (const auto& r : chart.rows) row_label_width = std::max(row_label_width, text_width(r));
  const double left = 40 + std::min(160.0, row_label_width + 8);
  const double top = 84;
  const double cell_w = cols > 0 ? std::min(96.0, (kWidth - left - 20) / static_cast<double>(cols)) : 96;
  const double cell_h = std::min(44.0, std::max(22.0, cell_w * 0.5));
  const int height = static_cast<int>(top + cell_h * static_cast<double>(rows) + 72);
  // As wide as the matrix, its legend and its title need; never wider than the other charts.
  const double content = std::max({left + cell_w * static_cast<double>(cols) + 24,
                                   left + 44.0 * 5 + 24 + text_width(chart.unit), 32 + text_width(chart.title, 15)});
  const int width = static_cast<int>(std::min<double>(kWidth, std::ceil(content)));

  std::string out;
  open_svg(out, chart.id, chart.title, chart.description, height, width);

  // Colour from zero (or the smallest negative value) to the largest value, so that close values look
  // close: 392 and 394 GB/s are both dark.
  Range range;
  for (const auto& row : chart.values)
    for (double v : row) range.add(v, false);
  const double lo = range.empty() ? 0 : std::min(range.lo, 0.0), hi = range.empty() ? 1 : range.hi;
  // Light to dark blue; colour intensity follows the value.
  auto color = [&](double v, double* t_out) {
    const double t = hi > lo ? (v - lo) / (hi - lo) : 1.0;
    *t_out = t;
    const std::array<double, 3> a = {239, 246, 255}, b = {30, 64, 175};
    auto mix = [&](int i) { return static_cast<int>(std::lround(a[i] + (b[i] - a[i]) * (0.15 + 0.85 * t))); };
    return fmt::format("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2));
  };

  // Column header and axis names.
  fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"46\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                 px(left + cell_w * static_cast<double>(cols) / 2), kTextColor, escape(chart.column_label));
  for (std::size_t c = 0; c < cols; ++c) {
    fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                   px(left + cell_w * (static_cast<double>(c) + 0.5)), px(top - 8), kMutedColor,
                   escape(chart.columns[c]));
  }
  const double cy = top + cell_h * static_cast<double>(rows) / 2;
  fmt::format_to(
      std::back_inserter(out),
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n", px(cy),
      px(cy), kTextColor, escape(chart.row_label));
  out += "<g class=\"cells\">\n";
  for (std::size_t r = 0; r < rows; ++r) {
    const double y = top + cell_h * static_cast<double>(r);
    fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{}\">{}</text>\n",
                   px(left - 8), px(y + cell_h / 2 + 4), kMutedColor, escape(chart.rows[r]));
    for (std::size_t c = 0; c < cols; ++c) {
      const double x = left + cell_w * static_cast<double>(c);
      const double v = r < chart.values.size() && c < chart.values[r].size() ? chart.values[r][c] : kNaN;
      const std::string unit = chart.unit.empty() ? "" : " " + chart.unit;
      if (!std::isfinite(v)) {
        fmt::format_to(
            std::back_inserter(out),
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f9fafb\" stroke=\"#ffffff\"><title>{} "
            "to {}: not measured</title></rect><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
            "fill=\"{}\">\u2013</text>\n",
            px(x), px(y), px(cell_w), px(cell_h), escape(chart.rows[r]), escape(chart.columns[c]), px(x + cell_w / 2),
            px(y + cell_h / 2 + 4), kMutedColor);
        continue;
      }
      double t = 0;
      const std::string fill = color(v, &t);
      fmt::format_to(std::back_inserter(out),
                     "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\"><title>{} to "
                     "{}: {}{}</title></rect><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                     px(x), px(y), px(cell_w), px(cell_h), fill, escape(chart.rows[r]), escape(chart.columns[c]),
                     escape(format_value(v)), escape(unit), px(x + cell_w / 2), px(y + cell_h / 2 + 4),
                     t > 0.5 ? "#ffffff" : kTextColor, escape(format_value(v)));
    }
  }
  out += "</g>\n";

  // Colour legend: five steps from the smallest to the largest value.
  const double ly = top + cell_h * static_cast<double>(rows) + 24;
  out += "<g class=\"legend\">\n";
  for (int i = 0; i < 5; ++i) {
    const double v = lo + (hi - lo) * i / 4.0;
    double t = 0;
    fmt::format_to(std::back_inserter(out),
                   "<rect x=\"{}\" y=\"{}\" width=\"40\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" "
                   "text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{}</text>\n",
                   px(left + 44.0 * i), px(ly), color(v, &t), px(left + 44.0 * i + 20), px(ly + 26), kMutedColor,
                   escape(format_value(v)));
  }
  fmt::format_to(std::back_inserter(out), "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n</g>\n",
                 px(left + 44.0 * 5 + 6), px(ly + 10), kTextColor, escape(chart.unit));
  close_svg(out);
  return out;
}

}  // namespace gpuscout::report::svg
