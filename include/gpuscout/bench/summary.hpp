#pragma once
// From Records to what `bench` shows: headline metrics built from timed samples, % of a peak
// figure, efficiency per watt, throttle flags and the summary table. Pure C++, tested in CI.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/bench/stats.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::bench {

// A rate metric from per-operation times: value = work / median time, spread from the times.
// `work` already scaled to the unit (e.g. bytes / 1e9 for GB/s).
results::Metric rate_metric(std::string name, std::string unit, double work, const SampleSummary& times,
                            std::string note);
// A time metric (value = median time x scale, e.g. 1e6 for us).
results::Metric time_metric(std::string name, std::string unit, double scale, const SampleSummary& times,
                            std::string note);

// Peak figures a record can be compared with, by name: "hbm_bandwidth_gbps", "host_link_gbps",
// "dense_tflops/bf16" ... with the unit they are in and where the number comes from.
struct PeakFigure {
  double value = 0;
  std::string unit;
  std::string source;
};
using PeakFigures = std::map<std::string, PeakFigure>;

// Declares that `metric` of the record is compared with the peak figure `figure` (stored in
// record.extra["peak"]).
void set_peak_reference(results::Record& record, const std::string& metric, const std::string& figure);
// Adds "<metric>_pct_of_peak" (unit %) when the record declares a reference and the figure is known
// and in the same unit; records the figure in extra["peak"]. Returns whether it added one.
bool annotate_percent_of_peak(results::Record& record, const PeakFigures& peaks);

// True when the telemetry saw a reason that lowers clocks under load (power/thermal caps, slowdowns).
bool is_throttled(const results::Telemetry& telemetry);
// With telemetry: adds "<metric>_per_watt" for every GB/s and TFLOP/s metric (mean power over the
// case) and sets extra["throttled"]. Returns the number of metrics added.
int annotate_efficiency(results::Record& record);

// One row per headline metric (derived *_pct_of_peak / *_per_watt metrics fill columns instead);
// records without metrics get one row with their outcome and reason.
// Columns: key, metric, value, unit, statistic, samples, spread (p10-p90 as % of value), % of peak,
// outcome, reason.
report::Table summary_table(const std::vector<results::Record>& records);

// x rounded to `digits` significant digits (for display).
double round_significant(double x, int digits);

}  // namespace gpuscout::bench
