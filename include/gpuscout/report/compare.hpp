#pragma once
// gpuscout compare: the same records matched by key across result files, the headline metric of
// each run side by side, the ratio and percent change against the first run (the baseline), and a
// verdict that says faster or slower only when the difference exceeds the measured spread.
//
// Significance rule (docs/report.md): each value stands for its [p10, p90] range when the metric
// has a spread, or for the single value when it has none. Two runs differ when those ranges do not
// overlap. When neither side has a spread there is nothing to judge the difference by, and the
// verdict is `unknown`. "Faster" means better: higher for rates, lower for times and latencies.
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/report/table.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::report {

struct CompareInput {
  std::string label;   // "A", "B", ... in headers
  std::string origin;  // the file it came from
  results::ResultSet result;
};

enum class Verdict {
  baseline,        // the first run itself
  faster,          // better beyond the spread
  slower,          // worse beyond the spread
  same,            // within the spread
  unknown,         // no spread on either side to judge by
  not_comparable,  // missing here, not passed, or the metric/unit differs
};
std::string to_string(Verdict verdict);

// True for metrics where a smaller value is better: times and latencies (by name or by a time unit).
bool lower_is_better(const results::Metric& metric);
// The rule above, for `other` against `base` (same metric and unit assumed).
Verdict significance(const results::Metric& base, const results::Metric& other);

struct RunValue {
  bool present = false;  // the key exists in this run
  results::Outcome outcome = results::Outcome::passed;
  std::optional<results::Metric> metric;  // the baseline's headline metric, by name, when present and passed
  std::optional<double> ratio;            // value / baseline value
  std::optional<double> change_pct;       // (value - baseline) / baseline * 100
  Verdict verdict = Verdict::not_comparable;
  std::string why;  // for not_comparable: "missing", the outcome ("failed"), "no <metric> metric", "unit differs"
};

struct CompareRow {
  std::string key;
  std::string metric;  // the headline metric's name (the baseline's, else the first run's that has the key)
  std::string unit;
  std::string statistic;
  std::vector<RunValue> runs;  // one per input, in input order
};

struct Comparison {
  std::vector<std::string> labels, origins;
  std::vector<CompareRow> rows;      // keys present in two or more runs, in first-seen order
  std::vector<CompareRow> only_one;  // keys present in exactly one run
  std::vector<std::string> notes;    // duplicate keys and the like
};

// The baseline is the first input: ratios, changes and verdicts are against it (a key the first run
// lacks gets values but no verdicts). Needs at least two inputs (throws UsageError otherwise).
Comparison compare_runs(const std::vector<CompareInput>& inputs);

// Tables for the renderers: "runs" (label, file, host, GPUs), "comparison" and "only_in_one_run".
std::vector<Table> comparison_tables(const Comparison& comparison, const std::vector<CompareInput>& inputs);

}  // namespace gpuscout::report
