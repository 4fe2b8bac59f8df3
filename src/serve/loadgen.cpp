#include "gpuscout/serve/loadgen.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "gpuscout/util/error.hpp"

namespace gpuscout::serve {

// ---------------------------------------------------------------------------------------------
// Scenario names

std::string to_string(Scenario scenario) {
  switch (scenario) {
    case Scenario::offline:
      return "offline";
    case Scenario::server:
      return "server";
    case Scenario::single_stream:
      return "single-stream";
    case Scenario::concurrency:
      return "concurrency";
  }
  return "offline";
}

Scenario scenario_from_string(const std::string& text) {
  std::string key;
  for (char c : text) {
    if (c == '-' || c == '_' || c == ' ') continue;
    key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (key == "offline") return Scenario::offline;
  if (key == "server") return Scenario::server;
  if (key == "singlestream") return Scenario::single_stream;
  if (key == "concurrency") return Scenario::concurrency;
  throw UsageError(
      fmt::format("--scenario: unknown scenario '{}' (expected offline, server, single-stream or concurrency)", text));
}

int default_warmup(Scenario scenario, int concurrency) {
  switch (scenario) {
    case Scenario::offline:
      return 0;
    case Scenario::concurrency:
      return std::max(4, concurrency);
    default:
      return 4;
  }
}

// ---------------------------------------------------------------------------------------------
// Lengths

void validate_range_ratio(double range_ratio) {
  if (!(range_ratio >= 0 && range_ratio < 1)) {
    throw UsageError(fmt::format(
        "--range-ratio must be in [0, 1): lengths uniform in [L(1 - R), L(1 + R)] around --isl/--osl, got {}",
        range_ratio));
  }
}

LengthSpec uniform_lengths(int input, int output, double range_ratio) {
  validate_range_ratio(range_ratio);
  LengthSpec l;
  l.kind = range_ratio > 0 ? LengthSpec::Kind::uniform : LengthSpec::Kind::fixed;
  auto spread = [&](int n, double sign) {
    return std::max(1, static_cast<int>(std::floor(n * (1 + sign * range_ratio))));
  };
  l.input_min = spread(input, -1);
  l.input_max = spread(input, +1);
  l.output_min = spread(output, -1);
  l.output_max = spread(output, +1);
  return l;
}

// ---------------------------------------------------------------------------------------------
// Request timings and percentiles

double RequestTiming::ttft_ms() const {
  return (first_token_s - arrival_s) * 1e3;
}

double RequestTiming::tpot_ms() const {
  if (output_tokens <= 1) return 0.0;
  return (finish_s - first_token_s) * 1e3 / static_cast<double>(output_tokens - 1);
}

double RequestTiming::e2e_ms() const {
  return (finish_s - arrival_s) * 1e3;
}

namespace {

// Rank ceil(p/100 * n) (1-based) of sorted samples, clamped to [1, n].
double nearest_rank_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double n = static_cast<double>(sorted.size());
  // The small slack keeps p/100 * n from rounding up past an exact integer (0.9 * 10 = 9.000000000000002).
  auto rank = static_cast<std::int64_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<std::int64_t>(rank, 1, static_cast<std::int64_t>(sorted.size()));
  return sorted[static_cast<std::size_t>(rank - 1)];
}

}  // namespace

double nearest_rank_percentile(std::vector<double> samples, double p) {
  std::sort(samples.begin(), samples.end());
  return nearest_rank_sorted(samples, p);
}

void LatencySamples::add(const RequestTiming& r) {
  ttft_ms.push_back(r.ttft_ms());
  e2e_ms.push_back(r.e2e_ms());
  if (r.output_tokens > 1) tpot_ms.push_back(r.tpot_ms());
  for (std::size_t i = 1; i < r.token_times_s.size(); ++i) {
    itl_ms.push_back((r.token_times_s[i] - r.token_times_s[i - 1]) * 1e3);
  }
}

Percentiles percentiles(std::vector<double> samples) {
  Percentiles out;
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  out.samples = static_cast<std::int64_t>(samples.size());
  out.p10 = nearest_rank_sorted(samples, 10);
  out.p50 = nearest_rank_sorted(samples, 50);
  out.p90 = nearest_rank_sorted(samples, 90);
  out.p99 = nearest_rank_sorted(samples, 99);
  out.min = samples.front();
  out.max = samples.back();
  const double n = static_cast<double>(samples.size());
  out.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  double sum_sq = 0;
  for (double x : samples) sum_sq += (x - out.mean) * (x - out.mean);
  out.stddev = samples.size() > 1 ? std::sqrt(sum_sq / (n - 1)) : 0.0;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Settings

namespace {

std::string num(double v) {
  if (!std::isfinite(v)) return fmt::format("{}", v);
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

void check_lengths(const char* flag, const char* what, int lo, int hi) {
  if (lo < 1) throw UsageError(fmt::format("{} must be at least 1 token (got {} {})", flag, what, lo));
  if (lo > hi) {
    throw UsageError(fmt::format("{}: the minimum {} {} exceeds the maximum {}", flag, what, lo, hi));
  }
}

}  // namespace

void validate(const LoadSettings& s) {
  if (s.scenario == Scenario::server && !(s.target_rate > 0 && std::isfinite(s.target_rate))) {
    throw UsageError(fmt::format("--rate must be a positive number of requests/s (got {})", num(s.target_rate)));
  }
  if (s.scenario == Scenario::concurrency && s.concurrency < 1) {
    throw UsageError(fmt::format("--concurrency must be at least 1 request in flight (got {})", s.concurrency));
  }
  const LengthSpec& l = s.lengths;
  if (l.kind == LengthSpec::Kind::from_file) {
    const std::string from = l.source.empty() ? std::string("the length list") : "'" + l.source + "'";
    if (l.pairs.empty()) throw UsageError(fmt::format("--lengths: {} has no rows", from));
    for (std::size_t i = 0; i < l.pairs.size(); ++i) {
      if (l.pairs[i].first < 1 || l.pairs[i].second < 1) {
        throw UsageError(fmt::format("--lengths: row {} of {} has {} input and {} output tokens; both must be >= 1",
                                     i + 1, from, l.pairs[i].first, l.pairs[i].second));
      }
    }
  } else {
    const bool fixed = l.kind == LengthSpec::Kind::fixed;
    check_lengths("--isl", "input length", l.input_min, fixed ? l.input_min : l.input_max);
    check_lengths("--osl", "output length", l.output_min, fixed ? l.output_min : l.output_max);
  }
  if (!(s.ttft_bound_ms >= 0) || !std::isfinite(s.ttft_bound_ms)) {
    throw UsageError(fmt::format("--ttft-ms must be >= 0 ms (0: no bound), got {}", num(s.ttft_bound_ms)));
  }
  if (!(s.tpot_bound_ms >= 0) || !std::isfinite(s.tpot_bound_ms)) {
    throw UsageError(fmt::format("--tpot-ms must be >= 0 ms (0: no bound), got {}", num(s.tpot_bound_ms)));
  }
  if (s.min_requests < 1) throw UsageError(fmt::format("--requests must be at least 1 (got {})", s.min_requests));
  if (s.max_requests < 1) throw UsageError(fmt::format("max_requests must be at least 1 (got {})", s.max_requests));
  if (s.warmup_requests < 0)
    throw UsageError(fmt::format("--warmup must be >= 0 requests (got {})", s.warmup_requests));
  if (static_cast<std::int64_t>(s.min_requests) + s.warmup_requests > s.max_requests) {
    throw UsageError(
        fmt::format("--requests {} (plus --warmup {}) exceeds the cap of {} issued requests (max_requests)",
                    s.min_requests, s.warmup_requests, s.max_requests));
  }
  if (!(s.min_duration_s >= 0) || !std::isfinite(s.min_duration_s)) {
    throw UsageError(fmt::format("--duration-s must be >= 0 s (got {})", num(s.min_duration_s)));
  }
  if (!(s.max_run_s > 0)) throw UsageError(fmt::format("--max-run-s must be > 0 s (got {})", num(s.max_run_s)));
  if (s.gpus < 1) throw UsageError(fmt::format("--gpus must be at least 1 (got {})", s.gpus));
}

// ---------------------------------------------------------------------------------------------
// The run

namespace {

// Deterministic draws from std::mt19937_64. The transforms are written out (not std::*_distribution,
// whose algorithms differ between standard libraries) so a seed gives the same run everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  double uniform01() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double exponential(double rate) { return -std::log1p(-uniform01()) / rate; }
  int uniform_int(int lo, int hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<int>(gen_() % span);  // bias < span / 2^64: negligible
  }

 private:
  std::mt19937_64 gen_;
};

class Lengths {
 public:
  Lengths(const LengthSpec& spec, std::uint64_t seed) : spec_(spec), rng_(seed ^ 0x9e3779b97f4a7c15ULL) {}
  std::pair<int, int> next() {
    switch (spec_.kind) {
      case LengthSpec::Kind::fixed:
        return {spec_.input_min, spec_.output_min};
      case LengthSpec::Kind::uniform: {
        const int in = rng_.uniform_int(spec_.input_min, spec_.input_max);
        const int out = rng_.uniform_int(spec_.output_min, spec_.output_max);
        return {in, out};
      }
      case LengthSpec::Kind::from_file:
        break;
    }
    const auto& pair = spec_.pairs[index_ % spec_.pairs.size()];  // cycles when the run needs more rows
    ++index_;
    return pair;
  }

 private:
  const LengthSpec& spec_;
  Rng rng_;
  std::size_t index_ = 0;
};

struct Planned {
  Request request;
  bool warmup = false;
  bool arrival_known = false;
};

// Requests in flight at once in the closed-loop scenarios (0: open loop).
int clients(const LoadSettings& s) {
  switch (s.scenario) {
    case Scenario::single_stream:
      return 1;
    case Scenario::concurrency:
      return s.concurrency;
    default:
      return 0;
  }
}

// Requests that may be issued, lengths drawn in order. Server arrivals are fixed here; Offline,
// SingleStream and Concurrency arrivals that depend on completions are filled in during the run.
std::vector<Planned> plan_requests(const LoadSettings& s, double t0) {
  Lengths lengths(s.lengths, s.seed);
  std::vector<Planned> plan;
  auto add = [&](double arrival, bool known) {
    Planned p;
    p.request.id = plan.size();
    std::tie(p.request.input_tokens, p.request.output_tokens) = lengths.next();
    p.request.arrival_s = arrival;
    p.warmup = static_cast<int>(plan.size()) < s.warmup_requests;
    p.arrival_known = known;
    plan.push_back(p);
  };
  const int needed = s.warmup_requests + s.min_requests;
  switch (s.scenario) {
    case Scenario::offline:
      // Warm-up requests at the start; the measured ones all at once when the warm-up has drained.
      for (int i = 0; i < needed; ++i) add(t0, s.warmup_requests == 0 || i < s.warmup_requests);
      break;
    case Scenario::server: {
      Rng arrivals(s.seed);
      double t = t0;
      for (;;) {
        const int n = static_cast<int>(plan.size());
        if (n >= s.max_requests) break;
        if (n >= needed) {
          const double span = plan.back().request.arrival_s - plan[s.warmup_requests].request.arrival_s;
          if (span >= s.min_duration_s) break;
        }
        add(t, true);
        t += arrivals.exponential(s.target_rate);
      }
      break;
    }
    case Scenario::single_stream:
    case Scenario::concurrency: {
      // The first `in_flight` requests arrive at once, each later one when an earlier one finishes;
      // with a minimum duration the run may need up to max_requests, decided as it goes.
      // At least one request per client after the warm-up, or the loop never holds N in flight.
      const int in_flight = clients(s);
      const int n = s.min_duration_s > 0 ? s.max_requests
                                         : std::min(s.max_requests, std::max(needed, s.warmup_requests + in_flight));
      for (int i = 0; i < n; ++i) add(t0, i < in_flight);
      break;
    }
  }
  return plan;
}

bool within(double value, double bound) {
  return bound <= 0 || value <= bound * (1 + 1e-9);
}

constexpr std::int64_t kMaxStalledSteps = 1000000;

}  // namespace

LoadSummary run_load(SystemUnderTest& sut, Clock& clock, const LoadSettings& settings) {
  validate(settings);
  const double t0 = clock.now_s();
  std::vector<Planned> plan = plan_requests(settings, t0);

  // Every request the run may issue is checked before the first one is.
  for (const Planned& p : plan) {
    if (auto reason = sut.reject_reason(p.request)) {
      throw UsageError(fmt::format("{} cannot serve a request of {} input + {} output tokens: {}", sut.name(),
                                   p.request.input_tokens, p.request.output_tokens, *reason));
    }
  }

  LoadSummary summary;
  summary.scenario = settings.scenario;
  summary.target_rate = settings.scenario == Scenario::server ? settings.target_rate : 0.0;
  summary.concurrency = clients(settings);
  summary.sut_name = sut.name();
  summary.ttft_bound_ms = settings.ttft_bound_ms;
  summary.tpot_bound_ms = settings.tpot_bound_ms;
  summary.gpus = settings.gpus;
  summary.warmup_requests = settings.warmup_requests;

  std::vector<RequestTiming>& timings = summary.timings;
  // SingleStream with a minimum duration plans up to max_requests; most runs need far fewer.
  timings.reserve(
      std::min<std::size_t>(plan.size(), static_cast<std::size_t>(settings.warmup_requests + settings.min_requests)));
  const double deadline = t0 + settings.max_run_s;
  std::size_t next = 0;  // next planned request to issue
  // Closed loop: requests [0, released) have their arrival known (the first `clients` at the start,
  // one more per finish). Several can finish in one step, so this runs ahead of `next`.
  std::size_t released = std::min<std::size_t>(plan.size(), static_cast<std::size_t>(clients(settings)));
  int warmup_left = settings.warmup_requests;
  int measured_finished = 0;
  std::int64_t stalled_steps = 0;
  std::string cut_reason;
  std::vector<TokenEvent> events;

  auto on_finish = [&](std::size_t index, double t) {
    if (plan[index].warmup) {
      --warmup_left;
    } else {
      ++measured_finished;
    }
    if (next >= plan.size()) return;
    if (settings.scenario == Scenario::offline && warmup_left == 0 && !plan[next].arrival_known) {
      for (std::size_t i = next; i < plan.size(); ++i) {
        plan[i].request.arrival_s = t;
        plan[i].arrival_known = true;
      }
    } else if (clients(settings) > 0 && released < plan.size()) {
      if (settings.min_duration_s > 0 && !plan[index].warmup && measured_finished >= settings.min_requests) {
        const double first = timings[static_cast<std::size_t>(settings.warmup_requests)].arrival_s;
        if (t - first >= settings.min_duration_s) {
          plan.resize(released);  // enough: issue no more
          return;
        }
      }
      plan[released].request.arrival_s = t;
      plan[released].arrival_known = true;
      ++released;
    }
  };

  for (;;) {
    const double now = clock.now_s();
    while (next < plan.size() && plan[next].arrival_known && plan[next].request.arrival_s <= now) {
      const Planned& p = plan[next];
      sut.submit(p.request);
      RequestTiming t;
      t.id = p.request.id;
      t.input_tokens = p.request.input_tokens;
      t.output_tokens = p.request.output_tokens;
      t.arrival_s = p.request.arrival_s;
      t.warmup = p.warmup;
      t.token_times_s.reserve(static_cast<std::size_t>(p.request.output_tokens));
      timings.push_back(std::move(t));
      ++next;
    }
    const bool idle = sut.idle();
    if (next >= plan.size() && idle) break;
    if (now >= deadline) {
      cut_reason = fmt::format("run cut at {} s (max_run_s)", num(settings.max_run_s));
      break;
    }
    if (idle) {
      if (!plan[next].arrival_known) {  // cannot happen: arrivals are known whenever nothing is in flight
        plan[next].request.arrival_s = now;
        plan[next].arrival_known = true;
        continue;
      }
      clock.wait_until(std::min(plan[next].request.arrival_s, deadline));
      continue;
    }

    events.clear();
    sut.step(events);
    const double t = clock.now_s();
    ++summary.steps;
    if (events.empty() && t <= now) {
      if (++stalled_steps >= kMaxStalledSteps) {
        cut_reason = fmt::format("run cut: {} made no progress in {} steps", sut.name(), kMaxStalledSteps);
        break;
      }
    } else {
      stalled_steps = 0;
    }
    for (const TokenEvent& e : events) {
      if (e.request_id >= timings.size() || timings[e.request_id].finished) {
        throw Error(fmt::format("{} produced tokens for request {}, which is not in flight", sut.name(), e.request_id));
      }
      RequestTiming& r = timings[e.request_id];
      if (e.tokens < 1) {
        throw Error(fmt::format("{} reported {} tokens for request {}", sut.name(), e.tokens, e.request_id));
      }
      if (r.token_times_s.empty()) r.first_token_s = t;
      r.token_times_s.insert(r.token_times_s.end(), static_cast<std::size_t>(e.tokens), t);
      const auto produced = static_cast<int>(r.token_times_s.size());
      if (produced > r.output_tokens || (e.finished && produced != r.output_tokens)) {
        throw Error(fmt::format("{} produced {} tokens for request {}{}, which asked for {}", sut.name(), produced,
                                e.request_id, e.finished ? " and finished it" : "", r.output_tokens));
      }
      if (e.finished) {
        r.finish_s = t;
        r.finished = true;
        on_finish(static_cast<std::size_t>(e.request_id), t);
      }
    }
  }
  if (cut_reason.empty()) {
    for (const RequestTiming& r : timings) {
      if (!r.finished) {
        throw Error(fmt::format("{} went idle with request {} unfinished", sut.name(), r.id));
      }
    }
  }
  const double end_s = clock.now_s();

  // Metrics over the measured requests.
  LatencySamples latency;
  double first_arrival = std::numeric_limits<double>::infinity(), last_finish = -first_arrival;
  double input_tokens = 0, output_tokens = 0;
  int good = 0;
  for (const RequestTiming& r : timings) {
    if (r.warmup) continue;
    ++summary.requests;
    first_arrival = std::min(first_arrival, r.arrival_s);
    if (!r.finished) continue;
    ++summary.finished;
    last_finish = std::max(last_finish, r.finish_s);
    input_tokens += r.input_tokens;
    output_tokens += static_cast<double>(r.token_times_s.size());
    latency.add(r);
    if (within(r.ttft_ms(), settings.ttft_bound_ms) && within(r.tpot_ms(), settings.tpot_bound_ms)) ++good;
  }
  summary.ttft_ms = percentiles(std::move(latency.ttft_ms));
  summary.tpot_ms = percentiles(std::move(latency.tpot_ms));
  summary.itl_ms = percentiles(std::move(latency.itl_ms));
  summary.e2e_ms = percentiles(std::move(latency.e2e_ms));
  summary.cut = !cut_reason.empty();
  if (summary.requests > 0) {
    const double end = summary.cut ? end_s : last_finish;
    summary.duration_s = std::max(0.0, end - first_arrival);
  }
  if (summary.duration_s > 0) {
    summary.requests_per_s = summary.finished / summary.duration_s;
    summary.input_tokens_per_s = input_tokens / summary.duration_s;
    summary.output_tokens_per_s = output_tokens / summary.duration_s;
    summary.output_tokens_per_s_per_gpu = summary.output_tokens_per_s / settings.gpus;
    summary.input_tokens_per_s_per_gpu = summary.input_tokens_per_s / settings.gpus;
    summary.goodput_requests_per_s = good / summary.duration_s;
  }
  summary.goodput_fraction = summary.requests > 0 ? static_cast<double>(good) / summary.requests : 0.0;

  if (summary.cut) {
    summary.invalid_reasons.push_back(fmt::format("{}: {} of {} measured requests unfinished", cut_reason,
                                                  summary.requests - summary.finished, summary.requests));
  }
  // The latency bounds judge the scenarios where the load is chosen (a rate or a client count).
  if (settings.scenario == Scenario::server || settings.scenario == Scenario::concurrency) {
    if (settings.ttft_bound_ms > 0 && summary.ttft_ms.samples > 0 &&
        !within(summary.ttft_ms.p99, settings.ttft_bound_ms)) {
      summary.invalid_reasons.push_back(
          fmt::format("p99 TTFT {} ms > bound {} ms", num(summary.ttft_ms.p99), num(settings.ttft_bound_ms)));
    }
    if (settings.tpot_bound_ms > 0 && summary.tpot_ms.samples > 0 &&
        !within(summary.tpot_ms.p99, settings.tpot_bound_ms)) {
      summary.invalid_reasons.push_back(
          fmt::format("p99 TPOT {} ms > bound {} ms", num(summary.tpot_ms.p99), num(settings.tpot_bound_ms)));
    }
  }
  if (summary.finished == 0 && summary.invalid_reasons.empty()) {
    summary.invalid_reasons.push_back("no measured request finished");
  }
  summary.valid = summary.invalid_reasons.empty();
  return summary;
}

// ---------------------------------------------------------------------------------------------
// --find-peak

void validate(const PeakSearch& s) {
  if (!(s.low > 0) || !std::isfinite(s.low)) {
    throw UsageError(fmt::format("--find-peak: the lowest rate must be > 0 requests/s (got {})", num(s.low)));
  }
  if (!(s.high > s.low) || !std::isfinite(s.high)) {
    throw UsageError(
        fmt::format("--find-peak: the starting high rate {} must exceed the low rate {}", num(s.high), num(s.low)));
  }
  if (!(s.relative_tolerance > 0)) {
    throw UsageError(
        fmt::format("--find-peak: the relative tolerance must be > 0 (got {})", num(s.relative_tolerance)));
  }
  if (s.max_probes < 2) throw UsageError(fmt::format("--find-peak: needs at least 2 probes (got {})", s.max_probes));
}

PeakResult find_peak(const std::function<LoadSummary(double rate)>& run_at_rate, const PeakSearch& search) {
  validate(search);
  PeakResult result;
  auto probe = [&](double rate) {
    result.probes.push_back(run_at_rate(rate));
    return result.probes.back().valid;
  };
  auto budget_left = [&] { return static_cast<int>(result.probes.size()) < search.max_probes; };

  // Bracket the peak starting from the guess `high`: double while valid, halve (not below `low`)
  // while invalid. Starting near the answer matters on a real engine: a probe lasts about
  // min_requests / rate seconds, so probing a far-too-low rate first would dominate the search.
  double low = 0, high = 0;  // highest valid, lowest invalid rate seen (0: none yet)
  double rate = search.high;
  while (budget_left()) {
    if (probe(rate)) {
      low = rate;
      if (high > 0) break;
      rate *= 2;
    } else {
      high = rate;
      if (low > 0 || rate <= search.low) break;
      rate = std::max(rate / 2, search.low);
    }
  }
  if (low == 0) return result;  // no valid rate down to `low`: peak 0, not found
  result.found = true;
  // Bisect [low valid, high invalid] until it is within the tolerance of `low`.
  while (high > 0 && budget_left() && (high - low) > search.relative_tolerance * low) {
    const double mid = 0.5 * (low + high);
    if (probe(mid)) {
      low = mid;
    } else {
      high = mid;
    }
  }
  result.peak_rate = low;
  return result;
}

}  // namespace gpuscout::serve
