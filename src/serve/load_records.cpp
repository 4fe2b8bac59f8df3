#include "gpuscout/serve/load_records.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpuscout::serve {
namespace {

void add_latency(results::Record& record, const std::string& name, const Percentiles& p, const std::string& what) {
  if (p.samples == 0) return;
  results::Metric median;
  median.name = name;
  median.value = p.p50;
  median.unit = "ms";
  median.statistic = "median";
  median.samples = p.samples;
  if (p.samples > 1) median.spread = results::Spread{p.min, p.max, p.p10, p.p90, p.mean, p.stddev};
  median.note = what + "; nearest-rank p50";
  record.metrics.push_back(median);

  results::Metric p99;
  p99.name = name + "_p99";
  p99.value = p.p99;
  p99.unit = "ms";
  p99.statistic = "p99";
  p99.samples = p.samples;
  p99.note = what + "; nearest-rank p99";
  record.metrics.push_back(p99);
}

void add_value(results::Record& record, const std::string& name, double value, const std::string& unit,
               const std::string& note) {
  results::Metric m;
  m.name = name;
  m.value = value;
  m.unit = unit;
  m.statistic = "value";
  m.note = note;
  record.metrics.push_back(m);
}

template <typename T>
void set_default(nlohmann::ordered_json& params, const char* key, const T& value) {
  if (!params.contains(key)) params[key] = value;
}

results::Record curve_point(const LoadSummary& run, const std::string& key, const nlohmann::ordered_json& params) {
  results::Record r = to_record(run, key, params);
  r.outcome = results::Outcome::passed;  // an INVALID point is part of the curve
  r.reason.clear();
  return r;
}

}  // namespace

std::string server_rate_key(const std::string& key_prefix, double rate) {
  std::string label = fmt::format("{:.6g}", rate);
  for (char& c : label) {
    if (c == '.') c = 'p';  // keys stay free of dots: rate_2p5
  }
  return fmt::format("{}/rate_{}", key_prefix, label);
}

results::Record to_record(const LoadSummary& s, const std::string& key, nlohmann::ordered_json params) {
  results::Record r;
  r.key = key;
  r.benchmark = "serve";
  if (!params.is_object()) params = nlohmann::ordered_json::object();
  set_default(params, "scenario", to_string(s.scenario));
  if (s.scenario == Scenario::server) set_default(params, "target_rate", s.target_rate);
  if (s.concurrency > 0) set_default(params, "concurrency", s.concurrency);
  set_default(params, "requests", s.requests);
  set_default(params, "warmup_requests", s.warmup_requests);
  set_default(params, "ttft_bound_ms", s.ttft_bound_ms);
  set_default(params, "tpot_bound_ms", s.tpot_bound_ms);
  set_default(params, "gpus", s.gpus);
  r.params = std::move(params);

  const std::string from_arrival = "from the scheduled arrival";
  add_latency(r, "ttft", s.ttft_ms, "time to first token " + from_arrival);
  add_latency(r, "tpot", s.tpot_ms, "(finish - first token) / (output tokens - 1), per request");
  add_latency(r, "itl", s.itl_ms, "gaps between consecutive tokens of a request (tokens of one step: 0 gaps)");
  add_latency(r, "e2e", s.e2e_ms, "last token " + from_arrival);
  const std::string window = "over the measured window (first measured arrival to last finish)";
  add_value(r, "requests_per_s", s.requests_per_s, "requests/s", "finished requests " + window);
  add_value(r, "input_tokens_per_s", s.input_tokens_per_s, "tokens/s", "prompt tokens of finished requests " + window);
  add_value(r, "output_tokens_per_s", s.output_tokens_per_s, "tokens/s", "output tokens " + window);
  add_value(r, "output_tokens_per_s_per_gpu", s.output_tokens_per_s_per_gpu, "tokens/s/GPU",
            fmt::format("output tokens/s / {} GPU{}", s.gpus, s.gpus == 1 ? "" : "s"));
  add_value(r, "input_tokens_per_s_per_gpu", s.input_tokens_per_s_per_gpu, "tokens/s/GPU",
            fmt::format("input tokens/s / {} GPU{}", s.gpus, s.gpus == 1 ? "" : "s"));
  const std::string bounds =
      fmt::format("TTFT <= {} and TPOT <= {}", s.ttft_bound_ms > 0 ? fmt::format("{} ms", s.ttft_bound_ms) : "any",
                  s.tpot_bound_ms > 0 ? fmt::format("{} ms", s.tpot_bound_ms) : "any");
  add_value(r, "goodput", s.goodput_requests_per_s, "requests/s", "requests meeting " + bounds + ", per second");
  add_value(r, "goodput_fraction", s.goodput_fraction * 100.0, "%", "measured requests meeting " + bounds);

  if (s.valid) {
    r.outcome = results::Outcome::passed;
  } else {
    r.outcome = results::Outcome::failed;
    r.reason = fmt::format("INVALID: {}", fmt::join(s.invalid_reasons, "; "));
  }
  r.extra["valid"] = s.valid;
  r.extra["invalid_reasons"] = s.invalid_reasons;
  r.extra["duration_s"] = s.duration_s;
  r.extra["finished"] = s.finished;
  r.extra["steps"] = s.steps;
  if (!s.sut_name.empty()) r.extra["sut"] = s.sut_name;
  return r;
}

results::Record repeated_record(const std::vector<LoadSummary>& runs, const std::string& key,
                                nlohmann::ordered_json params) {
  if (runs.empty()) throw std::invalid_argument("repeated_record: no runs");
  if (runs.size() == 1) return to_record(runs.front(), key, std::move(params));
  LoadSummary pooled = runs.front();  // scenario, bounds, GPUs and requests per run
  LatencySamples latency;
  pooled.valid = true;
  pooled.invalid_reasons.clear();
  pooled.finished = 0;
  pooled.steps = 0;
  nlohmann::ordered_json per_run = nlohmann::ordered_json::array();
  std::vector<double> durations;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const LoadSummary& run = runs[i];
    for (const RequestTiming& t : run.timings) {
      if (!t.warmup && t.finished) latency.add(t);
    }
    for (const std::string& why : run.invalid_reasons)
      pooled.invalid_reasons.push_back(fmt::format("run {}: {}", i + 1, why));
    pooled.valid = pooled.valid && run.valid;
    pooled.finished += run.finished;
    pooled.steps += run.steps;
    durations.push_back(run.duration_s);
    per_run.push_back({{"output_tokens_per_s", run.output_tokens_per_s},
                       {"requests_per_s", run.requests_per_s},
                       {"duration_s", run.duration_s},
                       {"steps", run.steps},
                       {"valid", run.valid}});
  }
  pooled.ttft_ms = percentiles(std::move(latency.ttft_ms));
  pooled.tpot_ms = percentiles(std::move(latency.tpot_ms));
  pooled.itl_ms = percentiles(std::move(latency.itl_ms));
  pooled.e2e_ms = percentiles(std::move(latency.e2e_ms));
  set_default(params, "repeats", runs.size());
  results::Record r = to_record(pooled, key, std::move(params));

  using Rate = double (*)(const LoadSummary&);
  const std::pair<const char*, Rate> rates[] = {
      {"requests_per_s", [](const LoadSummary& s) { return s.requests_per_s; }},
      {"input_tokens_per_s", [](const LoadSummary& s) { return s.input_tokens_per_s; }},
      {"output_tokens_per_s", [](const LoadSummary& s) { return s.output_tokens_per_s; }},
      {"output_tokens_per_s_per_gpu", [](const LoadSummary& s) { return s.output_tokens_per_s_per_gpu; }},
      {"input_tokens_per_s_per_gpu", [](const LoadSummary& s) { return s.input_tokens_per_s_per_gpu; }},
      {"goodput", [](const LoadSummary& s) { return s.goodput_requests_per_s; }},
      {"goodput_fraction", [](const LoadSummary& s) { return s.goodput_fraction * 100.0; }}};
  for (results::Metric& m : r.metrics) {
    for (const auto& [name, rate] : rates) {
      if (m.name != name) continue;
      std::vector<double> values;
      for (const LoadSummary& run : runs) values.push_back(rate(run));
      const Percentiles p = percentiles(std::move(values));
      m.value = p.p50;
      m.statistic = "median";
      m.samples = p.samples;
      m.spread = results::Spread{p.min, p.max, p.p10, p.p90, p.mean, p.stddev};
      m.note += fmt::format("; nearest-rank median of {} runs", runs.size());
    }
  }
  r.extra["duration_s"] = percentiles(std::move(durations)).p50;
  r.extra["runs"] = std::move(per_run);
  return r;
}

std::vector<results::Record> sweep_records(const std::vector<LoadSummary>& runs, const std::string& key_prefix,
                                           const nlohmann::ordered_json& params) {
  std::vector<results::Record> out;
  out.reserve(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const LoadSummary& run = runs[i];
    const std::string key = run.scenario == Scenario::server        ? server_rate_key(key_prefix, run.target_rate)
                            : run.scenario == Scenario::concurrency ? fmt::format("{}/c{}", key_prefix, run.concurrency)
                                                                    : fmt::format("{}/{}", key_prefix, i);
    results::Record r = curve_point(run, key, params);
    r.extra["sweep_index"] = i;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<results::Record> peak_records(const PeakResult& peak, const std::string& key_prefix,
                                          const nlohmann::ordered_json& params) {
  std::vector<results::Record> out;
  nlohmann::ordered_json probes = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < peak.probes.size(); ++i) {
    const LoadSummary& run = peak.probes[i];
    results::Record r = curve_point(run, fmt::format("{}/probe_{}", key_prefix, i), params);
    r.extra["peak_probe"] = i;
    out.push_back(std::move(r));
    probes.push_back({{"rate", run.target_rate}, {"valid", run.valid}, {"invalid_reasons", run.invalid_reasons}});
  }

  results::Record r;
  r.key = key_prefix + "/peak";
  r.benchmark = "serve";
  r.params = params.is_object() ? params : nlohmann::ordered_json::object();
  if (!peak.probes.empty()) {
    const LoadSummary& first = peak.probes.front();
    set_default(r.params, "scenario", to_string(first.scenario));
    set_default(r.params, "ttft_bound_ms", first.ttft_bound_ms);
    set_default(r.params, "tpot_bound_ms", first.tpot_bound_ms);
    set_default(r.params, "gpus", first.gpus);
  }
  results::Metric m;
  m.name = "peak_rate";
  m.value = peak.peak_rate;
  m.unit = "requests/s";
  m.statistic = "value";
  m.note = "highest Server rate that stayed VALID (bisection over the probes in extra.probes)";
  r.metrics.push_back(m);
  if (!peak.found) {
    r.outcome = results::Outcome::failed;
    const std::string why = peak.probes.empty()
                                ? std::string("no probe ran")
                                : fmt::format("{}", fmt::join(peak.probes.front().invalid_reasons, "; "));
    r.reason = fmt::format("no valid rate: even the lowest probe ({} requests/s) was INVALID: {}",
                           peak.probes.empty() ? 0.0 : peak.probes.front().target_rate, why);
  }
  r.extra["probes"] = std::move(probes);
  out.push_back(std::move(r));
  return out;
}

}  // namespace gpuscout::serve
