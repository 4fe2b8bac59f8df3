#pragma once
// The load generator (MLPerf LoadGen's scenarios for token-streaming LLM serving). Drives any
// SystemUnderTest; pure C++, no GPU. Scenarios:
//   Offline      every request issued at t = 0; measures throughput.
//   Server       Poisson arrivals at `target_rate` requests/s (fixed seed); VALID when p99 TTFT and
//                p99 TPOT meet their bounds.
//   SingleStream the next request is issued when the previous one finishes; reports latency.
//   Concurrency  a closed loop of `concurrency` clients: each issues its next request when its
//                previous one finishes (vLLM's benchmark_serving --max-concurrency, genai-perf's
//                --concurrency); SingleStream is concurrency 1. Sweeping it traces the
//                latency-vs-throughput curve without choosing rates.
// Latencies count from a request's scheduled arrival, so queueing delay is included.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/serve/system_under_test.hpp"

namespace gpuscout::serve {

enum class Scenario { offline, server, single_stream, concurrency };
std::string to_string(Scenario scenario);
Scenario scenario_from_string(const std::string& text);  // throws UsageError naming --scenario

// Input/output lengths: fixed, uniform in [min, max], or drawn in order from a list read from a
// CSV (columns input_tokens,output_tokens) or JSONL ({"input_tokens":..,"output_tokens":..}) file.
struct LengthSpec {
  enum class Kind { fixed, uniform, from_file } kind = Kind::fixed;
  int input_min = 512, input_max = 512;
  int output_min = 128, output_max = 128;
  std::vector<std::pair<int, int>> pairs;  // from_file
  std::string source;                      // file name, for messages and provenance
};
// Lengths uniform in [floor(L(1 - r)), floor(L(1 + r))] around `input` and `output` tokens, at least 1
// (vLLM's random dataset with --random-range-ratio r); r = 0 gives fixed lengths. Throws UsageError
// naming --range-ratio unless 0 <= r < 1 (validate_range_ratio).
LengthSpec uniform_lengths(int input, int output, double range_ratio);
void validate_range_ratio(double range_ratio);
// Reads a CSV or JSONL length file; throws DataError naming the file, line and field.
LengthSpec read_length_file(const std::string& path);

struct LoadSettings {
  Scenario scenario = Scenario::offline;
  double target_rate = 1.0;  // Server: requests/s
  int concurrency = 1;       // Concurrency: requests in flight (SingleStream: always 1)
  LengthSpec lengths;
  std::uint64_t seed = 1;     // arrivals and uniform lengths
  int min_requests = 64;      // measured requests (after warm-up)
  double min_duration_s = 0;  // measured span at least this long (Server/SingleStream issue more)
  int max_requests = 100000;  // hard cap on issued requests
  int warmup_requests = 0;    // issued first, excluded from every metric
  double ttft_bound_ms = 0;   // 0: no bound
  double tpot_bound_ms = 0;   // 0: no bound
  double max_run_s = 600;     // a run still busy after this many clock seconds stops, marked invalid
  int gpus = 1;               // per-GPU throughput divides by this
};
// Warm-up requests when --warmup is not given: none Offline; 4 for Server and SingleStream (the
// engine warms up under the first arrivals); max(4, N) for Concurrency, the first wave: all N
// clients start at once, so their first requests are the loop's start-up burst, not its steady state.
int default_warmup(Scenario scenario, int concurrency);

// Throws UsageError naming the flag (--rate, --concurrency, --isl, --osl, --ttft-ms, --tpot-ms,
// --requests, --warmup, --duration-s, --max-run-s, --gpus) when a setting is impossible. run_load calls it.
void validate(const LoadSettings& settings);

// Per-request timings (seconds on the clock).
struct RequestTiming {
  std::uint64_t id = 0;
  int input_tokens = 0, output_tokens = 0;
  double arrival_s = 0, first_token_s = 0, finish_s = 0;
  std::vector<double> token_times_s;  // time of every output token
  bool warmup = false;
  bool finished = false;  // false when the run was cut before its last token
  double ttft_ms() const;
  double tpot_ms() const;  // (finish - first) / (output_tokens - 1); 0 for one-token outputs
  double e2e_ms() const;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  std::int64_t samples = 0;
  double min = 0, p10 = 0, stddev = 0;  // for the result file's spread
};
// Nearest-rank percentiles (docs/serving.md): the p-th percentile of n sorted samples is the
// sample of rank ceil(p/100 * n) (1-based), so p99 is always an observed value, never below the
// true fraction. mean, min, max and the sample standard deviation alongside. All 0 for no samples.
Percentiles percentiles(std::vector<double> samples);
// One nearest-rank percentile p in (0, 100] of unsorted samples; 0 for an empty set.
double nearest_rank_percentile(std::vector<double> samples, double p);

// The per-request latency samples a summary's percentiles come from.
struct LatencySamples {
  std::vector<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  // One finished request: its TTFT and end-to-end latency, its TPOT when it has two or more output
  // tokens, and the gap before each of its tokens after the first.
  void add(const RequestTiming& request);
};

struct LoadSummary {
  Scenario scenario = Scenario::offline;
  double target_rate = 0;  // Server
  int concurrency = 0;     // Concurrency and SingleStream (1); 0 otherwise
  int requests = 0;        // measured
  double duration_s = 0;   // first measured arrival to last measured finish
  Percentiles ttft_ms, tpot_ms, itl_ms, e2e_ms;
  double requests_per_s = 0;
  double input_tokens_per_s = 0, output_tokens_per_s = 0;
  double output_tokens_per_s_per_gpu = 0;
  double input_tokens_per_s_per_gpu = 0;
  double goodput_requests_per_s = 0;  // requests meeting both bounds, per second
  double goodput_fraction = 0;
  bool valid = true;
  std::vector<std::string> invalid_reasons;  // "p99 TTFT 812 ms > bound 500 ms", "run cut at 600 s"
  std::vector<RequestTiming> timings;        // every issued request in issue order, warm-up ones flagged

  // Context for reports and result records (copied from the settings and the SUT).
  std::string sut_name;
  double ttft_bound_ms = 0, tpot_bound_ms = 0;
  int gpus = 1;
  int warmup_requests = 0;
  int finished = 0;        // measured requests that finished (== requests unless the run was cut)
  bool cut = false;        // max_run_s stopped the run (or the SUT stopped making progress)
  std::int64_t steps = 0;  // sut.step() calls, warm-up included
};

// Runs one scenario to completion. Throws UsageError for impossible settings (rate <= 0, lengths
// < 1, bounds < 0) naming the flag, and when the SUT rejects a request (its reason).
LoadSummary run_load(SystemUnderTest& sut, Clock& clock, const LoadSettings& settings);

// --find-peak: the highest Server rate that stays VALID. The first probe runs at `high` (the
// caller's guess); the search doubles while probes are valid or halves (not below `low`) while
// they are invalid until it holds a valid and an invalid rate, then bisects to a relative tolerance. `run_at_rate`
// runs one Server probe at the given rate on a fresh system (the caller resets engine and clock).
struct PeakSearch {
  double low = 0.1, high = 8.0;
  double relative_tolerance = 0.05;
  int max_probes = 12;
};
struct PeakResult {
  double peak_rate = 0;  // 0 when even `low` is invalid
  bool found = false;
  std::vector<LoadSummary> probes;  // in the order they ran
};
PeakResult find_peak(const std::function<LoadSummary(double rate)>& run_at_rate, const PeakSearch& search);
// Throws UsageError when low <= 0, high <= low, relative_tolerance <= 0 or max_probes < 2.
void validate(const PeakSearch& search);

}  // namespace gpuscout::serve
