#include "gpuscout/report/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gpuscout/util/error.hpp"

namespace gpuscout::report {
namespace {

using results::Metric;
using results::Outcome;
using results::Record;

struct Interval {
  double lo, hi;
};

Interval interval_of(const Metric& m) {
  if (m.spread && m.samples > 1) {
    return {std::min({m.spread->p10, m.spread->p90, m.value}), std::max({m.spread->p10, m.spread->p90, m.value})};
  }
  return {m.value, m.value};
}

bool has_spread(const Metric& m) {
  return m.spread.has_value() && m.samples > 1;
}

std::string gpu_names(const results::ResultSet& r) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const auto& g : r.gpus) {
    const std::string name = g.spec_name.empty() ? g.name : g.spec_name;
    if (counts[name]++ == 0) order.push_back(name);
  }
  std::string out;
  for (const auto& name : order) {
    if (!out.empty()) out += ", ";
    out += counts[name] > 1 ? fmt::format("{} x {}", counts[name], name) : name;
  }
  return out;
}

// Four significant digits: 0.003, 1.22, 740.5, 4607 (the result files keep full precision).
double round_significant(double v, int digits = 4) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

std::string range_text(const RunValue& v) {
  if (!v.metric || !has_spread(*v.metric)) return "";
  const auto& s = *v.metric->spread;
  return fmt::format("{}..{}", round_significant(s.p10), round_significant(s.p90));
}

std::string verdict_text(const RunValue& v) {
  if (v.verdict == Verdict::not_comparable) return v.why.empty() ? "n/a" : v.why;
  return to_string(v.verdict);
}

Cell optional_cell(const std::optional<double>& value) {
  Cell cell;
  if (value) cell.emplace<double>(round_significant(*value));
  return cell;
}

}  // namespace

std::string to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::baseline:
      return "baseline";
    case Verdict::faster:
      return "faster";
    case Verdict::slower:
      return "slower";
    case Verdict::same:
      return "same";
    case Verdict::unknown:
      return "unknown";
    case Verdict::not_comparable:
      return "n/a";
  }
  return "n/a";
}

bool lower_is_better(const Metric& metric) {
  static const std::set<std::string> kLowerNames = {"time", "latency", "ttft", "tpot", "itl", "e2e_latency"};
  static const std::set<std::string> kTimeUnits = {"s", "ms", "us", "µs", "ns"};
  if (kLowerNames.count(metric.name) > 0) return true;
  if (metric.name.find("latency") != std::string::npos || metric.name.find("time") != std::string::npos) return true;
  return kTimeUnits.count(metric.unit) > 0;
}

Verdict significance(const Metric& base, const Metric& other) {
  if (!has_spread(base) && !has_spread(other)) return Verdict::unknown;
  const Interval a = interval_of(base), b = interval_of(other);
  if (a.hi >= b.lo && b.hi >= a.lo) return Verdict::same;  // the ranges overlap
  const bool higher = other.value > base.value;
  return higher != lower_is_better(base) ? Verdict::faster : Verdict::slower;
}

Comparison compare_runs(const std::vector<CompareInput>& inputs) {
  if (inputs.size() < 2) throw UsageError("compare needs at least two result files");
  Comparison out;
  for (const auto& in : inputs) {
    out.labels.push_back(in.label);
    out.origins.push_back(in.origin);
  }
  // A run measured under conditions doctor warned about (a lowered power limit, another process on
  // the GPU, a non-default engine switch) is not like for like with the others: say so.
  for (const auto& in : inputs) {
    const auto& checks = in.result.provenance.checks;
    if (checks.empty()) continue;
    std::string listed;
    for (const auto& c : checks) listed += fmt::format("{}{} ({})", listed.empty() ? "" : ", ", c.key, c.status);
    out.notes.push_back(
        fmt::format("{}: measured with {} doctor finding(s) at start: {}", in.label, checks.size(), listed));
  }
  // On one host, runs allowed on different CPUs (taskset, numactl) are not like for like for what the
  // host side drives: transfers to and from the GPU, launch-bound timings.
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const auto& base = inputs[0].result.provenance;
    const auto& other = inputs[i].result.provenance;
    if (base.hostname != other.hostname || base.cpus.empty() || other.cpus.empty() || base.cpus == other.cpus) {
      continue;
    }
    out.notes.push_back(
        fmt::format("{} ran on CPUs {}, {} on {} of the same host: host transfers and launch-bound "
                    "timings depend on the socket a run used",
                    inputs[0].label, base.cpus, inputs[i].label, other.cpus));
  }
  // Index each run by key (first occurrence wins; duplicates are noted).
  std::vector<std::map<std::string, const Record*>> index(inputs.size());
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const Record& r : inputs[i].result.records) {
      if (!index[i].emplace(r.key, &r).second) {
        out.notes.push_back(
            fmt::format("{}: key '{}' appears more than once; the first is compared", inputs[i].label, r.key));
        continue;
      }
      if (seen.insert(r.key).second) order.push_back(r.key);
    }
  }

  for (const std::string& key : order) {
    CompareRow row;
    row.key = key;
    // The headline metric: the baseline's when it has the key, else the first run's that does.
    const Record* reference = nullptr;
    for (std::size_t i = 0; i < inputs.size() && reference == nullptr; ++i) {
      auto it = index[i].find(key);
      if (it != index[i].end() && !it->second->metrics.empty()) reference = it->second;
    }
    const Metric* headline = reference != nullptr ? &reference->metrics.front() : nullptr;
    if (headline != nullptr) {
      row.metric = headline->name;
      row.unit = headline->unit;
      row.statistic = headline->statistic;
    }
    std::size_t present = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      RunValue v;
      auto it = index[i].find(key);
      if (it == index[i].end()) {
        v.why = "missing";
        row.runs.push_back(v);
        continue;
      }
      ++present;
      v.present = true;
      const Record& r = *it->second;
      v.outcome = r.outcome;
      if (r.outcome != Outcome::passed) {
        v.why = results::to_string(r.outcome);
      } else if (headline == nullptr) {
        v.why = "no metric";
      } else if (const Metric* m = r.find_metric(row.metric); m == nullptr) {
        v.why = fmt::format("no {} metric", row.metric);
      } else if (m->unit != row.unit) {
        v.why = fmt::format("unit {} differs", m->unit);
      } else {
        v.metric = *m;
      }
      row.runs.push_back(std::move(v));
    }
    // Ratios and verdicts against the baseline (the first input).
    const RunValue& base = row.runs.front();
    if (base.metric) row.runs.front().verdict = Verdict::baseline;
    for (std::size_t i = 1; i < row.runs.size(); ++i) {
      RunValue& v = row.runs[i];
      if (!v.metric) continue;
      if (!base.metric) {
        v.why = base.present ? "baseline " + base.why : "not in baseline";
        continue;
      }
      if (base.metric->value != 0) {
        v.ratio = v.metric->value / base.metric->value;
        v.change_pct = (*v.ratio - 1) * 100;
      }
      v.verdict = significance(*base.metric, *v.metric);
    }
    (present >= 2 ? out.rows : out.only_one).push_back(std::move(row));
  }
  return out;
}

std::vector<Table> comparison_tables(const Comparison& c, const std::vector<CompareInput>& inputs) {
  std::vector<Table> tables;

  Table runs;
  runs.key = "runs";
  runs.title = "Runs (the first is the baseline)";
  runs.add_column("label", "Run");
  runs.add_column("file", "File");
  runs.add_column("host", "Host");
  runs.add_column("gpus", "GPUs");
  runs.add_column("created_utc", "Created (UTC)");
  runs.add_column("records", "Records", "", -1, Align::right);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& r = inputs[i].result;
    runs.add_row({c.labels[i], c.origins[i], r.provenance.hostname, gpu_names(r), r.provenance.created_utc,
                  static_cast<std::int64_t>(r.records.size())});
  }
  tables.push_back(std::move(runs));

  Table cmp;
  cmp.key = "comparison";
  cmp.title = "Same records across runs: headline metric";
  cmp.add_column("key", "Key");
  cmp.add_column("metric", "Metric");
  cmp.add_column("unit", "Unit");
  for (const auto& label : c.labels) {
    cmp.add_column(label, label, "", -1, Align::right);
    cmp.add_column(label + "_p10_p90", label + " p10..p90", "", -1, Align::right);
  }
  const std::string& base = c.labels.front();
  for (std::size_t i = 1; i < c.labels.size(); ++i) {
    const auto& label = c.labels[i];
    cmp.add_column(label + "_ratio", fmt::format("{}/{}", label, base), "", 3, Align::right);
    cmp.add_column(label + "_change_pct", fmt::format("{} change", label), "%", 1, Align::right);
    cmp.add_column(label + "_verdict", fmt::format("{} verdict", label));
  }
  for (const CompareRow& row : c.rows) {
    std::vector<Cell> cells = {row.key, row.metric, row.unit};
    for (const RunValue& v : row.runs) {
      cells.push_back(optional_cell(v.metric ? std::optional<double>(v.metric->value) : std::nullopt));
      cells.push_back(range_text(v));
    }
    for (std::size_t i = 1; i < row.runs.size(); ++i) {
      const RunValue& v = row.runs[i];
      cells.push_back(optional_cell(v.ratio));
      cells.push_back(optional_cell(v.change_pct));
      cells.push_back(verdict_text(v));
    }
    cmp.add_row(std::move(cells));
  }
  cmp.notes.push_back(
      "verdict: faster/slower only when the p10..p90 ranges of the two runs do not overlap (a value without a "
      "spread counts as its single value); same: they overlap; unknown: neither run has a spread");
  cmp.notes.push_back("faster means better: higher for rates and bandwidths, lower for times and latencies");
  for (std::size_t i = 0; i < c.labels.size(); ++i)
    cmp.notes.push_back(fmt::format("{} = {}", c.labels[i], c.origins[i]));
  for (const auto& note : c.notes) cmp.notes.push_back(note);
  tables.push_back(std::move(cmp));

  Table only;
  only.key = "only_in_one_run";
  only.title = "Records present in only one run";
  only.add_column("key", "Key");
  only.add_column("run", "Run");
  only.add_column("outcome", "Outcome");
  only.add_column("metric", "Metric");
  only.add_column("value", "Value", "", -1, Align::right);
  only.add_column("unit", "Unit");
  for (const CompareRow& row : c.only_one) {
    for (std::size_t i = 0; i < row.runs.size(); ++i) {
      const RunValue& v = row.runs[i];
      if (!v.present) continue;
      only.add_row({row.key, c.labels[i], results::to_string(v.outcome), row.metric,
                    optional_cell(v.metric ? std::optional<double>(v.metric->value) : std::nullopt), row.unit});
    }
  }
  tables.push_back(std::move(only));
  return tables;
}

}  // namespace gpuscout::report
