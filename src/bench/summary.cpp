#include "gpuscout/bench/summary.hpp"

#include <fmt/format.h>

#include <cmath>

namespace gpuscout::bench {
namespace {

constexpr const char* kPctSuffix = "_pct_of_peak";
constexpr const char* kPerWattSuffix = "_per_watt";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Metrics that fill columns of another metric's row rather than rows of their own. A benchmark may
// also report one record-wide "percent_of_peak" (of its first metric).
bool is_derived(const std::string& name) {
  return ends_with(name, kPctSuffix) || ends_with(name, kPerWattSuffix) || name == "percent_of_peak";
}

}  // namespace

double round_significant(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double magnitude = std::floor(std::log10(std::fabs(x))) + 1;
  const double scale = std::pow(10.0, digits - magnitude);
  return std::round(x * scale) / scale;
}

results::Metric rate_metric(std::string name, std::string unit, double work, const SampleSummary& times,
                            std::string note) {
  results::Metric m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.statistic = "median";
  m.samples = static_cast<std::int64_t>(times.count);
  m.value = times.median > 0 ? work / times.median : 0.0;
  if (times.count > 1) m.spread = rate_spread(times, work);
  m.note = std::move(note);
  return m;
}

results::Metric time_metric(std::string name, std::string unit, double scale, const SampleSummary& times,
                            std::string note) {
  results::Metric m;
  m.name = std::move(name);
  m.unit = std::move(unit);
  m.statistic = "median";
  m.samples = static_cast<std::int64_t>(times.count);
  m.value = times.median * scale;
  if (times.count > 1) {
    m.spread = results::Spread{times.min * scale, times.max * scale,  times.p10 * scale,
                               times.p90 * scale, times.mean * scale, times.stddev * scale};
  }
  m.note = std::move(note);
  return m;
}

void set_peak_reference(results::Record& record, const std::string& metric, const std::string& figure) {
  record.extra["peak"] = {{"metric", metric}, {"figure", figure}};
}

bool annotate_percent_of_peak(results::Record& record, const PeakFigures& peaks) {
  if (!record.extra.contains("peak") || !record.extra["peak"].is_object()) return false;
  auto& ref = record.extra["peak"];
  const std::string metric_name = ref.value("metric", "");
  const std::string figure_name = ref.value("figure", "");
  const auto it = peaks.find(figure_name);
  const results::Metric* metric = record.find_metric(metric_name);
  if (it == peaks.end() || metric == nullptr || it->second.value <= 0) return false;
  if (it->second.unit != metric->unit || record.find_metric(metric_name + kPctSuffix) != nullptr) return false;
  ref["value"] = it->second.value;
  ref["unit"] = it->second.unit;
  ref["source"] = it->second.source;
  results::Metric pct;
  pct.name = metric_name + kPctSuffix;
  pct.unit = "%";
  pct.statistic = metric->statistic;
  pct.samples = metric->samples;
  pct.value = 100.0 * metric->value / it->second.value;
  pct.note = fmt::format("of {} {} ({}: {})", it->second.value, it->second.unit, figure_name, it->second.source);
  record.metrics.push_back(std::move(pct));
  return true;
}

bool is_throttled(const results::Telemetry& telemetry) {
  for (const std::string& r : telemetry.throttle_reasons) {
    if (r == "sw_power_cap" || r == "hw_slowdown" || r == "sw_thermal_slowdown" || r == "hw_thermal_slowdown" ||
        r == "hw_power_brake_slowdown") {
      return true;
    }
  }
  return false;
}

int annotate_efficiency(results::Record& record) {
  if (!record.telemetry) return 0;
  record.extra["throttled"] = is_throttled(*record.telemetry);
  const auto& power = record.telemetry->power_mean_w;
  if (!power || *power <= 0) return 0;
  std::vector<results::Metric> added;
  for (const results::Metric& m : record.metrics) {
    if (m.unit != "GB/s" && m.unit != "TFLOP/s") continue;
    if (is_derived(m.name)) continue;
    if (record.find_metric(m.name + kPerWattSuffix) != nullptr) continue;
    results::Metric e;
    e.name = m.name + kPerWattSuffix;
    e.unit = m.unit + "/W";
    e.statistic = m.statistic;
    e.samples = m.samples;
    e.value = m.value / *power;
    e.note = fmt::format("{} over mean board power {:.0f} W while measuring", m.name, *power);
    added.push_back(std::move(e));
  }
  for (auto& e : added) record.metrics.push_back(std::move(e));
  return static_cast<int>(added.size());
}

report::Table summary_table(const std::vector<results::Record>& records) {
  using report::Align;
  report::Table t;
  t.key = "bench";
  t.title = "";
  t.add_column("key", "Key");
  t.add_column("metric", "Metric");
  t.add_column("value", "Value", "", -1, Align::right);
  t.add_column("unit", "Unit");
  t.add_column("statistic", "Statistic");
  t.add_column("samples", "Samples", "", -1, Align::right);
  t.add_column("spread_pct", "Spread", "%", 1, Align::right);
  t.add_column("pct_of_peak", "Of peak", "%", 1, Align::right);
  t.add_column("outcome", "Outcome");
  t.add_column("reason", "Reason");
  bool any_throttled = false;
  for (const results::Record& r : records) {
    const std::string outcome = results::to_string(r.outcome);
    std::string reason = r.reason;
    if (r.extra.contains("throttled") && r.extra["throttled"].is_boolean() && r.extra["throttled"].get<bool>()) {
      reason = reason.empty() ? "throttled" : reason + "; throttled";
      any_throttled = true;
    }
    bool any_row = false;
    for (const results::Metric& m : r.metrics) {
      if (is_derived(m.name)) continue;
      report::Cell spread;
      if (m.spread && m.value != 0) spread = round_significant(100.0 * (m.spread->p90 - m.spread->p10) / m.value, 2);
      report::Cell pct;
      if (const results::Metric* p = r.find_metric(m.name + kPctSuffix)) {
        pct = p->value;
      } else if (const results::Metric* q = r.find_metric("percent_of_peak"); q != nullptr && !any_row) {
        pct = q->value;
      }
      t.add_row({r.key, m.name, round_significant(m.value, 4), m.unit, m.statistic,
                 static_cast<std::int64_t>(m.samples), spread, pct, outcome, reason});
      any_row = true;
    }
    if (!any_row) {
      t.add_row({r.key, std::monostate{}, std::monostate{}, std::monostate{}, std::monostate{}, std::monostate{},
                 std::monostate{}, std::monostate{}, outcome, reason});
    }
  }
  t.notes.push_back("Spread: p10-p90 of the samples as % of the value. GB/s = 1e9 B/s.");
  if (any_throttled) t.notes.push_back("throttled: NVML reported a power or thermal clock limit while measuring.");
  return t;
}

}  // namespace gpuscout::bench
