#pragma once
// Load-generator runs as result records (docs/results-format.md, docs/serving.md "Load generator").
// Pure C++, no GPU.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/results/result.hpp"
#include "gpuscout/serve/loadgen.hpp"

namespace gpuscout::serve {

// One record for one run (benchmark "serve"). Metrics, each skipped when it has no samples:
//   ttft, tpot, itl, e2e (ms): median (nearest-rank p50) with the spread of the per-request values
//     (per-gap values for itl); ttft_p99, tpot_p99, itl_p99, e2e_p99 (ms): nearest-rank p99
//   requests_per_s (requests/s), input_tokens_per_s, output_tokens_per_s (tokens/s),
//   output_tokens_per_s_per_gpu, input_tokens_per_s_per_gpu (tokens/s/GPU), goodput (requests/s), goodput_fraction (%)
// params: the caller's params, then scenario, target_rate (Server), concurrency (Concurrency and
// SingleStream), requests, warmup_requests,
// ttft_bound_ms, tpot_bound_ms and gpus where the caller did not set them. outcome: passed when
// VALID; failed with the invalid reasons joined by "; " otherwise. extra: valid, invalid_reasons,
// duration_s, finished, steps, sut.
results::Record to_record(const LoadSummary& summary, const std::string& key,
                          nlohmann::ordered_json params = nlohmann::ordered_json::object());

// Repeated runs of one load (the static batch, run several times on one engine) as one record with
// to_record's metrics: the latencies (ttft, tpot, itl, e2e) over every run's measured requests, the
// rates (requests_per_s, input/output tokens/s and per GPU, goodput, goodput_fraction) the
// nearest-rank median of the runs' values, with their spread over the runs (samples = runs).
// params.repeats = runs; extra.runs holds each run's output_tokens_per_s, requests_per_s, duration_s,
// steps and validity. failed when any run was INVALID (reasons prefixed "run i: "). One run: to_record.
// Throws std::invalid_argument for no runs.
results::Record repeated_record(const std::vector<LoadSummary>& runs, const std::string& key,
                                nlohmann::ordered_json params = nlohmann::ordered_json::object());

// "<key_prefix>/rate_<r>", the key of a Server run at `rate` requests/s: r in up to 6 significant
// digits with 'p' for the decimal point (rate_2p5), so that keys hold no dots.
std::string server_rate_key(const std::string& key_prefix, double rate);

// A latency-vs-throughput sweep (runs over rates, client counts or batch sizes): one record per run,
// key server_rate_key(key_prefix, rate) for Server runs, "<key_prefix>/c<n>" for Concurrency runs and
// "<key_prefix>/<i>" otherwise, extra.sweep_index = i.
// An INVALID point is part of the curve, not a failure: sweep records are passed, with
// extra.valid = false and extra.invalid_reasons saying why.
std::vector<results::Record> sweep_records(const std::vector<LoadSummary>& runs, const std::string& key_prefix,
                                           const nlohmann::ordered_json& params = nlohmann::ordered_json::object());

// --find-peak: every probe as in sweep_records (key "<key_prefix>/probe_<i>", extra.peak_probe = i;
// INVALID probes are how the search brackets the peak, so they are passed with extra.valid =
// false), then one record "<key_prefix>/peak" with metric peak_rate (requests/s) and extra.probes
// (rate and validity of each), failed when even the lowest rate was INVALID.
std::vector<results::Record> peak_records(const PeakResult& peak, const std::string& key_prefix,
                                          const nlohmann::ordered_json& params = nlohmann::ordered_json::object());

}  // namespace gpuscout::serve
