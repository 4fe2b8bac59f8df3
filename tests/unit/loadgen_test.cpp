// The load generator against a deterministic test double: a fixed-batch server on a virtual clock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpuscout/serve/load_records.hpp"
#include "gpuscout/serve/loadgen.hpp"
#include "gpuscout/serve/system_under_test.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::serve {
namespace {

// Serves up to `batch` requests at once. A step takes `step_s` on the virtual clock and gives each
// running request `tokens_per_step` tokens (the first step of a request produces its first token:
// prefill is free). Waiting requests join at the next step, in arrival order.
class BatchServer final : public SystemUnderTest {
 public:
  BatchServer(VirtualClock& clock, int batch, double step_s, int tokens_per_step = 1, int max_context = 1 << 30)
      : clock_(clock), batch_(batch), step_s_(step_s), tokens_per_step_(tokens_per_step), max_context_(max_context) {}

  std::string name() const override { return "batch-server"; }
  std::optional<std::string> reject_reason(const Request& r) const override {
    if (r.input_tokens + r.output_tokens > max_context_) {
      return "needs " + std::to_string(r.input_tokens + r.output_tokens) + " tokens of context, the limit is " +
             std::to_string(max_context_);
    }
    return std::nullopt;
  }
  void submit(const Request& r) override {
    ASSERT_LE(r.arrival_s, clock_.now_s());
    waiting_.push_back({r.id, r.output_tokens});
  }
  bool idle() const override { return waiting_.empty() && running_.empty(); }
  void step(std::vector<TokenEvent>& events) override {
    while (static_cast<int>(running_.size()) < batch_ && !waiting_.empty()) {
      running_.push_back(waiting_.front());
      waiting_.pop_front();
    }
    clock_.advance(step_s_);
    ++steps;
    for (auto& s : running_) {
      const int k = std::min(tokens_per_step_, s.remaining);
      s.remaining -= k;
      events.push_back({s.id, k, s.remaining == 0});
    }
    running_.erase(std::remove_if(running_.begin(), running_.end(), [](const Seq& s) { return s.remaining == 0; }),
                   running_.end());
  }
  int steps = 0;

 private:
  struct Seq {
    std::uint64_t id;
    int remaining;
  };
  VirtualClock& clock_;
  int batch_;
  double step_s_;
  int tokens_per_step_;
  int max_context_;
  std::deque<Seq> waiting_;
  std::vector<Seq> running_;
};

// Takes requests and never produces a token (a hung engine), advancing the clock by `step_s`.
class StuckServer final : public SystemUnderTest {
 public:
  StuckServer(VirtualClock& clock, double step_s) : clock_(clock), step_s_(step_s) {}
  std::string name() const override { return "stuck"; }
  std::optional<std::string> reject_reason(const Request&) const override { return std::nullopt; }
  void submit(const Request&) override { ++held_; }
  bool idle() const override { return held_ == 0; }
  void step(std::vector<TokenEvent>&) override { clock_.advance(step_s_); }

 private:
  VirtualClock& clock_;
  double step_s_;
  int held_ = 0;
};

constexpr double kStep = 1.0 / 128;  // 7.8125 ms: a power of two, so sums of steps are exact
constexpr double kStepMs = kStep * 1e3;

LoadSettings fixed(Scenario scenario, int isl, int osl, int requests) {
  LoadSettings s;
  s.scenario = scenario;
  s.lengths.kind = LengthSpec::Kind::fixed;
  s.lengths.input_min = s.lengths.input_max = isl;
  s.lengths.output_min = s.lengths.output_max = osl;
  s.min_requests = requests;
  return s;
}

std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

std::filesystem::path temp_file(const std::string& name, const std::string& content) {
  const auto dir = std::filesystem::temp_directory_path() / "gpuscout_loadgen_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::string data_error(const std::string& name, const std::string& content) {
  const auto path = temp_file(name, content);
  try {
    read_length_file(path.string());
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

// ---------------------------------------------------------------------------------------------
// Percentiles

TEST(LoadgenPercentiles, NearestRankOnKnownData) {
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);  // unsorted on purpose
  const Percentiles p = percentiles(hundred);
  EXPECT_EQ(p.samples, 100);
  EXPECT_DOUBLE_EQ(p.p50, 50);
  EXPECT_DOUBLE_EQ(p.p90, 90);
  EXPECT_DOUBLE_EQ(p.p99, 99);
  EXPECT_DOUBLE_EQ(p.p10, 10);
  EXPECT_DOUBLE_EQ(p.max, 100);
  EXPECT_DOUBLE_EQ(p.min, 1);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);

  // Ten samples: rank ceil(0.5 * 10) = 5, ceil(0.9 * 10) = 9, ceil(0.99 * 10) = 10.
  const Percentiles t = percentiles({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_DOUBLE_EQ(t.p50, 5);
  EXPECT_DOUBLE_EQ(t.p90, 9);
  EXPECT_DOUBLE_EQ(t.p99, 10);
  // Not interpolated: p50 of {1, 2} is 1 (rank 1), p99 of {1, 2} is 2.
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({2, 1}, 50), 1);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile({2, 1}, 99), 2);
  // 1000 samples: p99 is rank 990.
  std::vector<double> thousand;
  for (int i = 1; i <= 1000; ++i) thousand.push_back(i);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile(thousand, 99), 990);
  EXPECT_DOUBLE_EQ(nearest_rank_percentile(thousand, 99.9), 999);

  const Percentiles one = percentiles({3.5});
  EXPECT_DOUBLE_EQ(one.p50, 3.5);
  EXPECT_DOUBLE_EQ(one.p99, 3.5);
  EXPECT_DOUBLE_EQ(one.stddev, 0);
  const Percentiles none = percentiles({});
  EXPECT_EQ(none.samples, 0);
  EXPECT_DOUBLE_EQ(none.p99, 0);
}

// ---------------------------------------------------------------------------------------------
// Scenarios against the batch server

TEST(LoadgenOffline, ThroughputEqualsTheAnalyticValue) {
  // 64 requests of 16 output tokens, 8 at a time, one token per step: 8 waves of 16 steps.
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, fixed(Scenario::offline, 100, 16, 64));
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.requests, 64);
  EXPECT_EQ(s.finished, 64);
  EXPECT_EQ(sut.steps, 128);
  EXPECT_DOUBLE_EQ(s.duration_s, 8 * 16 * kStep);
  EXPECT_NEAR(s.requests_per_s, 8 / (16 * kStep), 1e-9);  // B / (L * step) = 64
  EXPECT_NEAR(s.output_tokens_per_s, 8 / kStep, 1e-9);    // B / step = 1024
  EXPECT_NEAR(s.input_tokens_per_s, 100 * 8 / (16 * kStep), 1e-9);
  EXPECT_NEAR(s.output_tokens_per_s_per_gpu, s.output_tokens_per_s, 1e-9);
  // Wave w's first token comes at step 16w + 1: p50 (rank 32) is wave 3.
  EXPECT_NEAR(s.ttft_ms.p50, 49 * kStepMs, 1e-9);
  EXPECT_NEAR(s.ttft_ms.max, 113 * kStepMs, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p50, kStepMs, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p99, kStepMs, 1e-9);
  EXPECT_NEAR(s.itl_ms.max, kStepMs, 1e-9);
  EXPECT_EQ(s.itl_ms.samples, 64 * 15);
  EXPECT_NEAR(s.e2e_ms.max, 128 * kStepMs, 1e-9);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 1.0);  // no bounds

  LoadSettings two_gpus = fixed(Scenario::offline, 100, 16, 64);
  two_gpus.gpus = 2;
  VirtualClock clock2;
  BatchServer sut2(clock2, 8, kStep);
  const LoadSummary per_gpu = run_load(sut2, clock2, two_gpus);
  EXPECT_NEAR(per_gpu.output_tokens_per_s_per_gpu, 4 / kStep, 1e-9);
  EXPECT_NEAR(per_gpu.input_tokens_per_s_per_gpu, 100 * 4 / (16 * kStep), 1e-9);
}

TEST(LoadgenOffline, BoundsGiveGoodputButNotValidity) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::offline, 100, 16, 64);
  settings.ttft_bound_ms = 10 * kStepMs;  // only the first wave (TTFT = 1 step; the next: 17) meets it
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_TRUE(s.valid);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 8.0 / 64);
  EXPECT_NEAR(s.goodput_requests_per_s, 8 / s.duration_s, 1e-9);
}

TEST(LoadgenServer, LowRateTtftIsOneStep) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::server, 100, 16, 200);
  settings.target_rate = 1.0;  // capacity is 64/s; a request rarely meets another
  settings.ttft_bound_ms = 2 * kStepMs;
  settings.tpot_bound_ms = kStepMs;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_TRUE(s.valid) << (s.invalid_reasons.empty() ? "" : s.invalid_reasons.front());
  EXPECT_EQ(s.requests, 200);
  EXPECT_NEAR(s.ttft_ms.p50, kStepMs, 1e-9);
  EXPECT_LE(s.ttft_ms.p99, 2 * kStepMs + 1e-9);
  EXPECT_NEAR(s.tpot_ms.p99, kStepMs, 1e-9);
  EXPECT_NEAR(s.e2e_ms.p50, 16 * kStepMs, 1e-9);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 1.0);
  EXPECT_DOUBLE_EQ(s.target_rate, 1.0);
  // Arrivals are Poisson at the target rate: 199 gaps average about 1 s.
  const double span = s.timings.back().arrival_s - s.timings.front().arrival_s;
  EXPECT_NEAR(span / 199, 1.0, 0.2);
}

TEST(LoadgenServer, OverloadIsInvalidNamingP99Ttft) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::server, 100, 16, 1000);
  settings.target_rate = 128;  // twice the capacity of 64 requests/s
  settings.ttft_bound_ms = 100;
  settings.tpot_bound_ms = 2 * kStepMs;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_FALSE(s.valid);
  ASSERT_EQ(s.invalid_reasons.size(), 1u);
  EXPECT_NE(s.invalid_reasons[0].find("p99 TTFT"), std::string::npos) << s.invalid_reasons[0];
  EXPECT_NE(s.invalid_reasons[0].find("> bound 100 ms"), std::string::npos) << s.invalid_reasons[0];
  EXPECT_LT(s.goodput_fraction, 0.5);
  // The server still runs at its capacity.
  EXPECT_NEAR(s.requests_per_s, 64, 64 * 0.05);
}

TEST(LoadgenServer, TpotBoundIsCheckedToo) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::server, 100, 16, 50);
  settings.target_rate = 1.0;
  settings.tpot_bound_ms = kStepMs / 2;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_FALSE(s.valid);
  ASSERT_EQ(s.invalid_reasons.size(), 1u);
  EXPECT_NE(s.invalid_reasons[0].find("p99 TPOT 7.81 ms > bound 3.91 ms"), std::string::npos) << s.invalid_reasons[0];
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 0.0);
}

TEST(LoadgenServer, SameSeedSameRunOtherSeedOtherArrivals) {
  auto run = [](std::uint64_t seed) {
    VirtualClock clock;
    BatchServer sut(clock, 4, kStep);
    LoadSettings settings = fixed(Scenario::server, 10, 8, 100);
    settings.target_rate = 20;
    settings.seed = seed;
    return run_load(sut, clock, settings);
  };
  const LoadSummary a = run(7), b = run(7), c = run(8);
  ASSERT_EQ(a.timings.size(), b.timings.size());
  for (std::size_t i = 0; i < a.timings.size(); ++i) {
    EXPECT_EQ(a.timings[i].arrival_s, b.timings[i].arrival_s);
    EXPECT_EQ(a.timings[i].token_times_s, b.timings[i].token_times_s);
  }
  EXPECT_NE(a.timings[5].arrival_s, c.timings[5].arrival_s);
  EXPECT_EQ(a.timings[0].arrival_s, 0.0);  // the first request arrives at the start
}

TEST(LoadgenServer, MinimumDurationIssuesMoreRequests) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::server, 10, 4, 10);
  settings.target_rate = 10;
  settings.min_duration_s = 20;  // about 200 arrivals
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_GT(s.requests, 100);
  const double span = s.timings.back().arrival_s - s.timings.front().arrival_s;
  EXPECT_GE(span, 20.0);
  // The request before the last one had not covered 20 s yet.
  EXPECT_LT(s.timings[s.timings.size() - 2].arrival_s - s.timings.front().arrival_s, 20.0);

  settings.max_requests = 50;  // the cap wins
  VirtualClock clock2;
  BatchServer sut2(clock2, 8, kStep);
  EXPECT_EQ(run_load(sut2, clock2, settings).requests, 50);
}

TEST(LoadgenSingleStream, OneRequestAtATime) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, fixed(Scenario::single_stream, 100, 16, 10));
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.requests, 10);
  EXPECT_NEAR(s.ttft_ms.p50, kStepMs, 1e-9);
  EXPECT_NEAR(s.ttft_ms.max, kStepMs, 1e-9);
  EXPECT_NEAR(s.e2e_ms.p99, 16 * kStepMs, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p50, kStepMs, 1e-9);
  EXPECT_DOUBLE_EQ(s.duration_s, 10 * 16 * kStep);
  EXPECT_NEAR(s.requests_per_s, 1 / (16 * kStep), 1e-9);
  for (std::size_t i = 1; i < s.timings.size(); ++i) {
    EXPECT_EQ(s.timings[i].arrival_s, s.timings[i - 1].finish_s);  // issued when the previous finished
  }
  EXPECT_EQ(sut.steps, 160);
}

TEST(LoadgenSingleStream, MinimumDurationAddsRequests) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::single_stream, 10, 16, 2);
  settings.min_duration_s = 1.0;  // each request takes 16 steps = 0.125 s: 8 requests
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_EQ(s.requests, 8);
  EXPECT_DOUBLE_EQ(s.duration_s, 1.0);
}

// The most requests in flight at any moment (a request is in flight from its arrival to its finish).
int most_in_flight(const std::vector<RequestTiming>& timings) {
  int most = 0;
  for (const RequestTiming& r : timings) {
    const auto overlapping = std::count_if(timings.begin(), timings.end(), [&](const RequestTiming& o) {
      return o.arrival_s <= r.arrival_s && r.arrival_s < o.finish_s;
    });
    most = std::max(most, static_cast<int>(overlapping));
  }
  return most;
}

LoadSettings closed_loop(int clients, int osl, int requests) {
  LoadSettings s = fixed(Scenario::concurrency, 10, osl, requests);
  s.concurrency = clients;
  return s;
}

TEST(LoadgenConcurrency, KeepsNRequestsInFlight) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, closed_loop(4, 16, 12));
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.concurrency, 4);
  EXPECT_EQ(s.requests, 12);
  ASSERT_EQ(s.timings.size(), 12u);
  // Four at the start; each later one arrives exactly when the one four places before it finished.
  for (std::size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(s.timings[i].arrival_s, s.timings[0].arrival_s);
  for (std::size_t i = 4; i < 12; ++i) EXPECT_DOUBLE_EQ(s.timings[i].arrival_s, s.timings[i - 4].finish_s);
  EXPECT_EQ(most_in_flight(s.timings), 4);
  // The server batches all four: three rounds of 16 steps, every TTFT one step.
  EXPECT_EQ(sut.steps, 48);
  EXPECT_DOUBLE_EQ(s.duration_s, 48 * kStep);
  EXPECT_NEAR(s.ttft_ms.max, kStepMs, 1e-9);
  EXPECT_NEAR(s.output_tokens_per_s, 12 * 16 / (48 * kStep), 1e-6);
}

TEST(LoadgenConcurrency, OneClientIsSingleStream) {
  VirtualClock clock1, clock2;
  BatchServer sut1(clock1, 8, kStep), sut2(clock2, 8, kStep);
  const LoadSummary closed = run_load(sut1, clock1, closed_loop(1, 16, 5));
  const LoadSummary single = run_load(sut2, clock2, fixed(Scenario::single_stream, 10, 16, 5));
  EXPECT_EQ(single.concurrency, 1);
  ASSERT_EQ(closed.timings.size(), single.timings.size());
  for (std::size_t i = 0; i < closed.timings.size(); ++i) {
    EXPECT_DOUBLE_EQ(closed.timings[i].arrival_s, single.timings[i].arrival_s);
    EXPECT_DOUBLE_EQ(closed.timings[i].finish_s, single.timings[i].finish_s);
  }
}

TEST(LoadgenConcurrency, MoreClientsThanTheBatchQueueAndBreakTheBound) {
  // 16 clients on an 8-wide server: half of them wait a whole request (16 steps) for a slot.
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = closed_loop(16, 16, 16);
  settings.ttft_bound_ms = 4 * kStepMs;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_EQ(most_in_flight(s.timings), 16);
  EXPECT_NEAR(s.ttft_ms.max, 17 * kStepMs, 1e-9);
  EXPECT_NEAR(s.ttft_ms.p50, kStepMs, 1e-9);
  EXPECT_NEAR(s.output_tokens_per_s, 8 / kStep, 1e-6);  // the server's capacity, nothing more
  EXPECT_FALSE(s.valid);
  ASSERT_EQ(s.invalid_reasons.size(), 1u);
  EXPECT_NE(s.invalid_reasons[0].find("p99 TTFT"), std::string::npos) << s.invalid_reasons[0];
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 0.5);
}

TEST(LoadgenConcurrency, FewerRequestsThanClientsStillFillTheLoop) {
  // 2 requests asked for, 8 clients: each client issues one, so 8 are in flight and measured.
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, closed_loop(8, 16, 2));
  EXPECT_EQ(s.requests, 8);
  EXPECT_EQ(most_in_flight(s.timings), 8);
}

TEST(LoadgenConcurrency, MinimumDurationAndWarmup) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = closed_loop(2, 16, 2);
  settings.warmup_requests = 2;
  settings.min_duration_s = 1.0;  // 16 steps = 0.125 s per request, two at a time: 16 measured requests
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_EQ(s.requests, 16);
  ASSERT_EQ(s.timings.size(), 18u);
  EXPECT_TRUE(s.timings[0].warmup);
  EXPECT_DOUBLE_EQ(s.duration_s, 1.0);
  EXPECT_EQ(most_in_flight(s.timings), 2);
}

TEST(LoadgenWarmup, DefaultsPerScenario) {
  EXPECT_EQ(default_warmup(Scenario::offline, 0), 0);
  EXPECT_EQ(default_warmup(Scenario::server, 0), 4);
  EXPECT_EQ(default_warmup(Scenario::single_stream, 1), 4);
  EXPECT_EQ(default_warmup(Scenario::concurrency, 2), 4);
  EXPECT_EQ(default_warmup(Scenario::concurrency, 128), 128);  // the first wave
}

TEST(LoadgenWarmup, ExcludedFromEveryMetric) {
  // Warm-up rows first: 100 output tokens each; measured rows 16.
  const auto path = temp_file("warmup.csv", "input_tokens,output_tokens\n10,100\n10,100\n10,16\n");
  LoadSettings settings;
  settings.scenario = Scenario::offline;
  settings.lengths = read_length_file(path.string());
  settings.warmup_requests = 2;
  settings.min_requests = 4;  // rows cycle: warm-up rows 1, 2; measured rows 3, 1, 2, 3 -> 16, 100, 100, 16
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_EQ(s.requests, 4);
  ASSERT_EQ(s.timings.size(), 6u);
  EXPECT_TRUE(s.timings[0].warmup);
  EXPECT_TRUE(s.timings[1].warmup);
  EXPECT_FALSE(s.timings[2].warmup);
  // Offline: the measured requests are issued together once the warm-up has drained.
  EXPECT_DOUBLE_EQ(s.timings[2].arrival_s, 100 * kStep);
  EXPECT_DOUBLE_EQ(s.timings[5].arrival_s, 100 * kStep);
  EXPECT_EQ(s.ttft_ms.samples, 4);
  EXPECT_NEAR(s.ttft_ms.max, kStepMs, 1e-9);  // a warm-up TTFT would be the same; e2e tells them apart
  EXPECT_NEAR(s.e2e_ms.max, 100 * kStepMs, 1e-9);
  EXPECT_NEAR(s.e2e_ms.min, 16 * kStepMs, 1e-9);
  EXPECT_DOUBLE_EQ(s.duration_s, 100 * kStep);  // from the measured arrival, not the run start
  EXPECT_NEAR(s.output_tokens_per_s, (16 + 100 + 100 + 16) / (100 * kStep), 1e-9);

  // Server: the first arrivals of the stream are the warm-up.
  LoadSettings server = fixed(Scenario::server, 10, 4, 20);
  server.target_rate = 5;
  server.warmup_requests = 5;
  VirtualClock clock2;
  BatchServer sut2(clock2, 8, kStep);
  const LoadSummary w = run_load(sut2, clock2, server);
  EXPECT_EQ(w.requests, 20);
  ASSERT_EQ(w.timings.size(), 25u);
  EXPECT_EQ(w.ttft_ms.samples, 20);
  EXPECT_NEAR(w.duration_s, w.timings.back().finish_s - w.timings[5].arrival_s, 1e-12);
}

TEST(LoadgenItl, AStepOfKTokensGivesKMinusOneZeroGaps) {
  VirtualClock clock;
  BatchServer sut(clock, 1, kStep, /*tokens_per_step=*/4);
  const LoadSummary s = run_load(sut, clock, fixed(Scenario::single_stream, 10, 16, 1));
  const RequestTiming& r = s.timings.front();
  ASSERT_EQ(r.token_times_s.size(), 16u);
  EXPECT_EQ(s.itl_ms.samples, 15);
  // Steps at 1..4: gaps 0,0,0 | step | 0,0,0 | step | 0,0,0 | step | 0,0,0
  EXPECT_DOUBLE_EQ(s.itl_ms.p50, 0.0);
  EXPECT_NEAR(s.itl_ms.max, kStepMs, 1e-9);
  EXPECT_NEAR(s.itl_ms.mean, 3 * kStepMs / 15, 1e-9);
  EXPECT_NEAR(s.tpot_ms.p50, 3 * kStepMs / 15, 1e-9);  // (finish - first) / (n - 1)
  EXPECT_NEAR(s.ttft_ms.p50, kStepMs, 1e-9);
}

TEST(LoadgenRun, CutRunIsInvalid) {
  VirtualClock clock;
  StuckServer sut(clock, 0.5);
  LoadSettings settings = fixed(Scenario::server, 10, 4, 5);
  settings.target_rate = 10;
  settings.max_run_s = 3;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_FALSE(s.valid);
  EXPECT_TRUE(s.cut);
  ASSERT_EQ(s.invalid_reasons.size(), 1u);
  EXPECT_NE(s.invalid_reasons[0].find("run cut at 3 s"), std::string::npos) << s.invalid_reasons[0];
  EXPECT_NE(s.invalid_reasons[0].find("5 of 5 measured requests unfinished"), std::string::npos)
      << s.invalid_reasons[0];
  EXPECT_EQ(s.finished, 0);
  EXPECT_GE(clock.now_s(), 3.0);
  EXPECT_LT(clock.now_s(), 3.6);

  // Offline and SingleStream are valid unless cut: a cut run is not.
  LoadSettings offline = fixed(Scenario::offline, 10, 4, 5);
  offline.max_run_s = 2;
  VirtualClock clock2;
  StuckServer stuck2(clock2, 0.5);
  EXPECT_FALSE(run_load(stuck2, clock2, offline).valid);
}

TEST(LoadgenRun, ASystemThatNeverProgressesIsCut) {
  // A virtual clock that nothing advances would never reach max_run_s.
  class Frozen final : public SystemUnderTest {
   public:
    std::string name() const override { return "frozen"; }
    std::optional<std::string> reject_reason(const Request&) const override { return std::nullopt; }
    void submit(const Request&) override { held_ = true; }
    bool idle() const override { return !held_; }
    void step(std::vector<TokenEvent>&) override {}

   private:
    bool held_ = false;
  } sut;
  VirtualClock clock;
  const LoadSummary s = run_load(sut, clock, fixed(Scenario::offline, 10, 4, 2));
  EXPECT_FALSE(s.valid);
  EXPECT_TRUE(s.cut);
  ASSERT_EQ(s.invalid_reasons.size(), 1u);
  EXPECT_NE(s.invalid_reasons[0].find("frozen made no progress"), std::string::npos) << s.invalid_reasons[0];
}

TEST(LoadgenRun, OneTokenOutputsHaveNoTpotOrItl) {
  VirtualClock clock;
  BatchServer sut(clock, 4, kStep);
  LoadSettings settings = fixed(Scenario::offline, 10, 1, 8);
  settings.tpot_bound_ms = 1e-6;  // a one-token request meets any TPOT bound
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_TRUE(s.valid);
  EXPECT_EQ(s.ttft_ms.samples, 8);
  EXPECT_EQ(s.tpot_ms.samples, 0);
  EXPECT_EQ(s.itl_ms.samples, 0);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 1.0);
  EXPECT_DOUBLE_EQ(s.timings[0].tpot_ms(), 0.0);
  const results::Record r = to_record(s, "k");
  EXPECT_EQ(r.find_metric("tpot"), nullptr);  // no samples: no metric
  EXPECT_EQ(r.find_metric("itl_p99"), nullptr);
  EXPECT_NE(r.find_metric("ttft"), nullptr);
}

TEST(LoadgenRun, RejectReasonPropagates) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep, 1, /*max_context=*/100);
  const std::string message = usage_message([&] { run_load(sut, clock, fixed(Scenario::offline, 90, 20, 4)); });
  EXPECT_NE(message.find("batch-server"), std::string::npos) << message;
  EXPECT_NE(message.find("90 input + 20 output tokens"), std::string::npos) << message;
  EXPECT_NE(message.find("needs 110 tokens of context, the limit is 100"), std::string::npos) << message;
  EXPECT_TRUE(sut.idle());  // nothing was issued
  EXPECT_EQ(clock.now_s(), 0.0);

  // Uniform lengths: every drawn request is checked, so a range reaching past the limit fails too.
  LoadSettings uniform = fixed(Scenario::server, 10, 10, 200);
  uniform.target_rate = 1;
  uniform.lengths.kind = LengthSpec::Kind::uniform;
  uniform.lengths.input_max = 95;
  EXPECT_NE(usage_message([&] { run_load(sut, clock, uniform); }).find("the limit is 100"), std::string::npos);
}

TEST(LoadgenRun, SettingsValidationNamesTheFlag) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  auto message = [&](const std::function<void(LoadSettings&)>& edit) {
    LoadSettings s = fixed(Scenario::server, 10, 10, 10);
    edit(s);
    return usage_message([&] { run_load(sut, clock, s); });
  };
  auto has = [](const std::string& m, const std::string& flag) { return m.find(flag) != std::string::npos; };
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.target_rate = 0; }), "--rate");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.target_rate = -2; }), "--rate");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.lengths.input_min = s.lengths.input_max = 0; }), "--isl");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.lengths.output_min = s.lengths.output_max = 0; }), "--osl");
  EXPECT_PRED2(has, message([](LoadSettings& s) {
                 s.lengths.kind = LengthSpec::Kind::uniform;
                 s.lengths.input_min = 20;
               }),
               "--isl: the minimum input length 20 exceeds the maximum 10");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.ttft_bound_ms = -1; }), "--ttft-ms");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.tpot_bound_ms = -1; }), "--tpot-ms");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.min_requests = 0; }), "--requests");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.max_requests = 5; }), "--requests 10");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.min_duration_s = -1; }), "--duration-s");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.warmup_requests = -1; }), "--warmup");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.gpus = 0; }), "--gpus");
  EXPECT_PRED2(has, message([](LoadSettings& s) { s.max_run_s = 0; }), "--max-run-s");
  EXPECT_PRED2(has, message([](LoadSettings& s) {
                 s.scenario = Scenario::concurrency;
                 s.concurrency = 0;
               }),
               "--concurrency must be at least 1");
  // Offline and SingleStream do not use the rate.
  LoadSettings offline = fixed(Scenario::offline, 10, 10, 2);
  offline.target_rate = 0;
  EXPECT_NO_THROW(validate(offline));
}

TEST(LoadgenRun, SteadyClockRun) {
  SteadyClock clock;
  const double t = clock.now_s();
  clock.wait_until(t + 0.005);
  EXPECT_GE(clock.now_s(), t + 0.005);

  // A server that really sleeps 1 ms per step.
  class Sleepy final : public SystemUnderTest {
   public:
    std::string name() const override { return "sleepy"; }
    std::optional<std::string> reject_reason(const Request&) const override { return std::nullopt; }
    void submit(const Request& r) override { left_.push_back({r.id, r.output_tokens}); }
    bool idle() const override { return left_.empty(); }
    void step(std::vector<TokenEvent>& events) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (auto& [id, n] : left_) events.push_back({id, 1, --n == 0});
      std::erase_if(left_, [](const auto& p) { return p.second == 0; });
    }

   private:
    std::vector<std::pair<std::uint64_t, int>> left_;
  } sut;
  LoadSettings settings = fixed(Scenario::server, 1, 3, 5);
  settings.target_rate = 200;
  const LoadSummary s = run_load(sut, clock, settings);
  EXPECT_TRUE(s.valid);
  EXPECT_EQ(s.finished, 5);
  EXPECT_GE(s.ttft_ms.min, 1.0);
  EXPECT_GE(s.e2e_ms.min, 3.0);
}

TEST(LoadgenScenario, Names) {
  EXPECT_EQ(scenario_from_string("Offline"), Scenario::offline);
  EXPECT_EQ(scenario_from_string("server"), Scenario::server);
  EXPECT_EQ(scenario_from_string("single-stream"), Scenario::single_stream);
  EXPECT_EQ(scenario_from_string("SingleStream"), Scenario::single_stream);
  EXPECT_EQ(to_string(Scenario::single_stream), "single-stream");
  EXPECT_EQ(scenario_from_string("Concurrency"), Scenario::concurrency);
  EXPECT_EQ(to_string(Scenario::concurrency), "concurrency");
  EXPECT_NE(usage_message([] { scenario_from_string("multistream"); }).find("--scenario"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Lengths

TEST(LoadgenLengths, UniformIsSeededAndInRange) {
  auto draw = [](std::uint64_t seed) {
    VirtualClock clock;
    BatchServer sut(clock, 64, kStep);
    LoadSettings s = fixed(Scenario::offline, 1, 1, 300);
    s.lengths.kind = LengthSpec::Kind::uniform;
    s.lengths.input_min = 5;
    s.lengths.input_max = 9;
    s.lengths.output_min = 2;
    s.lengths.output_max = 4;
    s.seed = seed;
    std::vector<std::pair<int, int>> out;
    for (const auto& t : run_load(sut, clock, s).timings) out.emplace_back(t.input_tokens, t.output_tokens);
    return out;
  };
  const auto a = draw(3), b = draw(3), c = draw(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int> seen_in(10, 0), seen_out(5, 0);
  for (const auto& [in, out] : a) {
    ASSERT_GE(in, 5);
    ASSERT_LE(in, 9);
    ASSERT_GE(out, 2);
    ASSERT_LE(out, 4);
    ++seen_in[in];
    ++seen_out[out];
  }
  for (int v = 5; v <= 9; ++v) EXPECT_GT(seen_in[v], 30) << v;  // about 60 each
  for (int v = 2; v <= 4; ++v) EXPECT_GT(seen_out[v], 60) << v;
}

TEST(LoadgenLengths, RangeRatioAsVllm) {
  const LengthSpec l = uniform_lengths(512, 128, 0.5);
  EXPECT_EQ(l.kind, LengthSpec::Kind::uniform);
  EXPECT_EQ(l.input_min, 256);
  EXPECT_EQ(l.input_max, 768);
  EXPECT_EQ(l.output_min, 64);
  EXPECT_EQ(l.output_max, 192);
  const LengthSpec odd = uniform_lengths(100, 3, 0.25);  // floors: 75..125, 2..3
  EXPECT_EQ(odd.input_min, 75);
  EXPECT_EQ(odd.input_max, 125);
  EXPECT_EQ(odd.output_min, 2);
  EXPECT_EQ(odd.output_max, 3);
  const LengthSpec tiny = uniform_lengths(1, 1, 0.9);  // never below one token
  EXPECT_EQ(tiny.input_min, 1);
  EXPECT_EQ(tiny.output_min, 1);
  const LengthSpec fixed_lengths = uniform_lengths(512, 128, 0);
  EXPECT_EQ(fixed_lengths.kind, LengthSpec::Kind::fixed);
  EXPECT_EQ(fixed_lengths.input_max, 512);
  for (double bad : {-0.1, 1.0, 2.0}) {
    EXPECT_NE(usage_message([&] { uniform_lengths(512, 128, bad); }).find("--range-ratio must be in [0, 1)"),
              std::string::npos)
        << bad;
  }
  // A closed loop of spread lengths falls out of phase: the second wave no longer arrives at one time.
  LoadSettings settings = closed_loop(4, 16, 8);
  settings.lengths = uniform_lengths(10, 16, 0.5);
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  const LoadSummary s = run_load(sut, clock, settings);
  ASSERT_EQ(s.timings.size(), 8u);
  std::vector<double> second_wave;
  for (std::size_t i = 4; i < 8; ++i) second_wave.push_back(s.timings[i].arrival_s);
  EXPECT_GT(*std::max_element(second_wave.begin(), second_wave.end()),
            *std::min_element(second_wave.begin(), second_wave.end()));
  for (const RequestTiming& r : s.timings) {
    EXPECT_GE(r.output_tokens, 8);
    EXPECT_LE(r.output_tokens, 24);
  }
}

TEST(LoadgenLengths, CsvAndJsonlFiles) {
  const auto csv = temp_file(
      "lengths.csv", "# from a trace\r\nid,input_tokens,output_tokens\r\n1,128,16\r\n\r\n2, 256 ,32\r\n3,\"64\",8\r\n");
  const LengthSpec c = read_length_file(csv.string());
  EXPECT_EQ(c.kind, LengthSpec::Kind::from_file);
  EXPECT_EQ(c.source, csv.string());
  ASSERT_EQ(c.pairs.size(), 3u);
  EXPECT_EQ(c.pairs[0], std::make_pair(128, 16));
  EXPECT_EQ(c.pairs[1], std::make_pair(256, 32));
  EXPECT_EQ(c.pairs[2], std::make_pair(64, 8));
  EXPECT_EQ(c.input_min, 64);
  EXPECT_EQ(c.input_max, 256);
  EXPECT_EQ(c.output_max, 32);

  const auto jsonl = temp_file("lengths.jsonl",
                               "{\"input_tokens\": 100, \"output_tokens\": 10, \"prompt\": \"hi\"}\n\n"
                               "{\"output_tokens\": 20, \"input_tokens\": 200.0}\n");
  const LengthSpec j = read_length_file(jsonl.string());
  ASSERT_EQ(j.pairs.size(), 2u);
  EXPECT_EQ(j.pairs[1], std::make_pair(200, 20));
  // JSONL recognised by content when the extension says nothing.
  const auto txt = temp_file("lengths.txt", "{\"input_tokens\": 3, \"output_tokens\": 4}\n");
  EXPECT_EQ(read_length_file(txt.string()).pairs.at(0), std::make_pair(3, 4));

  // Rows are used in order and cycle.
  LoadSettings settings;
  settings.scenario = Scenario::single_stream;
  settings.lengths = c;
  settings.min_requests = 5;
  VirtualClock clock;
  BatchServer sut(clock, 1, kStep);
  const LoadSummary s = run_load(sut, clock, settings);
  std::vector<int> outs;
  for (const auto& t : s.timings) outs.push_back(t.output_tokens);
  EXPECT_EQ(outs, (std::vector<int>{16, 32, 8, 16, 32}));
}

TEST(LoadgenLengths, BadRowsNameLineAndField) {
  auto has = [](const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; };
  const std::string bad_value = data_error("bad_value.csv", "input_tokens,output_tokens\n10,5\n12,abc\n");
  EXPECT_PRED2(has, bad_value, "bad_value.csv");
  EXPECT_PRED2(has, bad_value, "line 3");
  EXPECT_PRED2(has, bad_value, "field 'output_tokens'");
  EXPECT_PRED2(has, bad_value, "'abc' is not a whole number");

  const std::string zero = data_error("zero.csv", "input_tokens,output_tokens\n0,5\n");
  EXPECT_PRED2(has, zero, "line 2");
  EXPECT_PRED2(has, zero, "field 'input_tokens'");
  EXPECT_PRED2(has, zero, "expected >= 1");

  const std::string short_row = data_error("short.csv", "input_tokens,output_tokens\n10\n");
  EXPECT_PRED2(has, short_row, "line 2");
  EXPECT_PRED2(has, short_row, "field 'output_tokens'");

  const std::string header = data_error("header.csv", "prompt,completion\n10,5\n");
  EXPECT_PRED2(has, header, "line 1");
  EXPECT_PRED2(has, header, "field 'header'");
  EXPECT_PRED2(has, header, "input_tokens,output_tokens");

  EXPECT_PRED2(has, data_error("empty.csv", ""), "empty");
  EXPECT_PRED2(has, data_error("only_header.csv", "input_tokens,output_tokens\n"), "no rows");

  const std::string missing =
      data_error("missing.jsonl", "{\"input_tokens\": 5, \"output_tokens\": 5}\n{\"input_tokens\": 5}\n");
  EXPECT_PRED2(has, missing, "line 2");
  EXPECT_PRED2(has, missing, "field 'output_tokens'");
  EXPECT_PRED2(has, missing, "is missing");

  const std::string fraction = data_error("fraction.jsonl", "{\"input_tokens\": 5.5, \"output_tokens\": 5}\n");
  EXPECT_PRED2(has, fraction, "field 'input_tokens'");
  EXPECT_PRED2(has, fraction, "5.5 is not a whole number");

  const std::string broken =
      data_error("broken.jsonl", "{\"input_tokens\": 5, \"output_tokens\": 5}\n{\"input_tokens\": \n");
  EXPECT_PRED2(has, broken, "line 2");
  EXPECT_PRED2(has, broken, "not valid JSON");

  EXPECT_THROW(read_length_file("/nonexistent/lengths.csv"), IoError);
}

// ---------------------------------------------------------------------------------------------
// --find-peak

LoadSummary threshold_run(double rate, double threshold) {
  LoadSummary s;
  s.scenario = Scenario::server;
  s.target_rate = rate;
  s.valid = rate <= threshold;
  if (!s.valid) s.invalid_reasons.push_back("p99 TTFT too high");
  return s;
}

TEST(LoadgenPeak, BisectionConvergesToTheThreshold) {
  PeakSearch search;  // low 0.1, high 8, tolerance 5 %
  const PeakResult r = find_peak([](double rate) { return threshold_run(rate, 3.7); }, search);
  EXPECT_TRUE(r.found);
  EXPECT_LE(r.peak_rate, 3.7);
  EXPECT_GE(r.peak_rate, 3.7 / (1 + search.relative_tolerance));
  EXPECT_LE(static_cast<int>(r.probes.size()), search.max_probes);
  // From the guess 8: halve while invalid (8, 4), then bisect [2 valid, 4 invalid].
  EXPECT_DOUBLE_EQ(r.probes[0].target_rate, 8.0);
  EXPECT_DOUBLE_EQ(r.probes[1].target_rate, 4.0);
  EXPECT_DOUBLE_EQ(r.probes[2].target_rate, 2.0);
  EXPECT_DOUBLE_EQ(r.probes[3].target_rate, 3.0);
  for (const LoadSummary& p : r.probes) EXPECT_EQ(p.valid, p.target_rate <= 3.7);

  // Deterministic: the same probes again.
  const PeakResult again = find_peak([](double rate) { return threshold_run(rate, 3.7); }, search);
  ASSERT_EQ(again.probes.size(), r.probes.size());
  for (std::size_t i = 0; i < r.probes.size(); ++i) EXPECT_EQ(again.probes[i].target_rate, r.probes[i].target_rate);
}

TEST(LoadgenPeak, DoublesHighWhileValid) {
  const PeakResult r = find_peak([](double rate) { return threshold_run(rate, 50); }, PeakSearch{});
  ASSERT_GE(r.probes.size(), 5u);
  EXPECT_DOUBLE_EQ(r.probes[0].target_rate, 8);
  EXPECT_DOUBLE_EQ(r.probes[1].target_rate, 16);
  EXPECT_DOUBLE_EQ(r.probes[2].target_rate, 32);
  EXPECT_DOUBLE_EQ(r.probes[3].target_rate, 64);
  EXPECT_DOUBLE_EQ(r.probes[4].target_rate, 48);
  EXPECT_GE(r.peak_rate, 50 / 1.05);
  EXPECT_LE(r.peak_rate, 50);

  // Out of probes while still doubling: the last valid rate.
  PeakSearch few;
  few.max_probes = 3;
  const PeakResult capped = find_peak([](double rate) { return threshold_run(rate, 1000); }, few);
  EXPECT_EQ(capped.probes.size(), 3u);
  EXPECT_TRUE(capped.found);
  EXPECT_DOUBLE_EQ(capped.peak_rate, 32);
}

TEST(LoadgenPeak, NothingValid) {
  const PeakResult r = find_peak([](double rate) { return threshold_run(rate, 0.01); }, PeakSearch{});
  EXPECT_FALSE(r.found);
  EXPECT_DOUBLE_EQ(r.peak_rate, 0);
  // 8, 4, 2, 1, 0.5, 0.25, 0.125, then `low` itself.
  ASSERT_EQ(r.probes.size(), 8u);
  EXPECT_DOUBLE_EQ(r.probes.back().target_rate, 0.1);

  PeakSearch bad;
  bad.high = 0.05;
  EXPECT_THROW(validate(bad), UsageError);
  bad = PeakSearch{};
  bad.low = 0;
  EXPECT_THROW(find_peak([](double rate) { return threshold_run(rate, 1); }, bad), UsageError);
}

TEST(LoadgenPeak, FindsTheCapacityOfTheBatchServer) {
  // Capacity: 8 slots, 16 steps of 1/128 s per request = 64 requests/s. Below it the queue stays
  // short; above it, it grows for the whole run, so p99 TTFT passes any bound well short of the
  // run length.
  const double capacity = 64;
  auto run_at = [](double rate) {
    VirtualClock clock;
    BatchServer sut(clock, 8, kStep);
    LoadSettings settings = fixed(Scenario::server, 10, 16, 20000);
    settings.target_rate = rate;
    settings.ttft_bound_ms = 2000;
    settings.tpot_bound_ms = 2 * kStepMs;
    settings.max_run_s = 1e6;  // 20000 requests at the lowest rate take 5000 s of virtual time
    return run_load(sut, clock, settings);
  };
  PeakSearch search;
  search.low = 4;
  search.high = 32;
  search.relative_tolerance = 0.02;
  const PeakResult r = find_peak(run_at, search);
  ASSERT_TRUE(r.found);
  EXPECT_GT(r.peak_rate, 0.9 * capacity);
  EXPECT_LE(r.peak_rate, 1.02 * capacity);
  // Every probe above the capacity by 5 % or more was INVALID, for TTFT.
  for (const LoadSummary& p : r.probes) {
    if (p.target_rate >= 1.05 * capacity) {
      EXPECT_FALSE(p.valid) << p.target_rate;
      ASSERT_FALSE(p.invalid_reasons.empty());
      EXPECT_NE(p.invalid_reasons[0].find("p99 TTFT"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Result records

TEST(LoadgenRecords, RunRecord) {
  VirtualClock clock;
  BatchServer sut(clock, 8, kStep);
  LoadSettings settings = fixed(Scenario::server, 100, 16, 200);
  settings.target_rate = 1;
  settings.ttft_bound_ms = 50;
  settings.gpus = 2;
  const LoadSummary s = run_load(sut, clock, settings);
  const results::Record r = to_record(s, "serve/double/server", {{"model", "batch-server"}});
  EXPECT_EQ(r.key, "serve/double/server");
  EXPECT_EQ(r.benchmark, "serve");
  EXPECT_EQ(r.outcome, results::Outcome::passed);
  EXPECT_TRUE(r.reason.empty());
  EXPECT_EQ(r.params["model"], "batch-server");
  EXPECT_EQ(r.params["scenario"], "server");
  EXPECT_EQ(r.params["target_rate"], 1.0);
  EXPECT_EQ(r.params["gpus"], 2);
  for (const char* name :
       {"ttft", "ttft_p99", "tpot", "tpot_p99", "itl", "itl_p99", "e2e", "e2e_p99", "requests_per_s",
        "input_tokens_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu", "goodput", "goodput_fraction"}) {
    EXPECT_NE(r.find_metric(name), nullptr) << name;
  }
  const results::Metric* ttft = r.find_metric("ttft");
  ASSERT_NE(ttft, nullptr);
  EXPECT_EQ(ttft->unit, "ms");
  EXPECT_EQ(ttft->statistic, "median");
  EXPECT_DOUBLE_EQ(ttft->value, s.ttft_ms.p50);
  EXPECT_EQ(ttft->samples, 200);
  ASSERT_TRUE(ttft->spread.has_value());
  EXPECT_DOUBLE_EQ(ttft->spread->max, s.ttft_ms.max);
  EXPECT_EQ(r.find_metric("ttft_p99")->statistic, "p99");
  EXPECT_DOUBLE_EQ(r.find_metric("ttft_p99")->value, s.ttft_ms.p99);
  EXPECT_DOUBLE_EQ(r.find_metric("output_tokens_per_s_per_gpu")->value, s.output_tokens_per_s / 2);
  EXPECT_DOUBLE_EQ(r.find_metric("input_tokens_per_s_per_gpu")->value, s.input_tokens_per_s / 2);
  EXPECT_EQ(r.find_metric("output_tokens_per_s_per_gpu")->unit, "tokens/s/GPU");
  EXPECT_DOUBLE_EQ(r.find_metric("goodput_fraction")->value, 100.0);
  EXPECT_EQ(r.extra["valid"], true);

  LoadSummary invalid = s;
  invalid.valid = false;
  invalid.invalid_reasons = {"p99 TTFT 812 ms > bound 500 ms", "p99 TPOT 60 ms > bound 50 ms"};
  const results::Record f = to_record(invalid, "k");
  EXPECT_EQ(f.outcome, results::Outcome::failed);
  EXPECT_EQ(f.reason, "INVALID: p99 TTFT 812 ms > bound 500 ms; p99 TPOT 60 ms > bound 50 ms");
  EXPECT_TRUE(results::is_failure(f.outcome));
}

TEST(LoadgenRecords, RepeatedRunsGiveMedianRatesAndPooledLatencies) {
  // The same 64-request offline batch on three servers whose steps take 1, 2 and 1.5 steps of time:
  // output tokens/s 8 / step, 4 / step and 8 / (1.5 step); the median run is the 1.5 one.
  std::vector<LoadSummary> runs;
  for (double scale : {1.0, 2.0, 1.5}) {
    VirtualClock clock;
    BatchServer sut(clock, 8, kStep * scale);
    runs.push_back(run_load(sut, clock, fixed(Scenario::offline, 100, 16, 64)));
  }
  const results::Record r = repeated_record(runs, "serve/static/m/b8", {{"batch", 8}});
  EXPECT_EQ(r.outcome, results::Outcome::passed);
  EXPECT_EQ(r.params["repeats"], 3);
  EXPECT_EQ(r.params["batch"], 8);
  EXPECT_EQ(r.params["requests"], 64);  // per run
  const results::Metric* rate = r.find_metric("output_tokens_per_s");
  ASSERT_NE(rate, nullptr);
  EXPECT_EQ(rate->statistic, "median");
  EXPECT_EQ(rate->samples, 3);
  EXPECT_NEAR(rate->value, 8 / (1.5 * kStep), 1e-6);
  ASSERT_TRUE(rate->spread.has_value());
  EXPECT_NEAR(rate->spread->min, 4 / kStep, 1e-6);
  EXPECT_NEAR(rate->spread->max, 8 / kStep, 1e-6);
  EXPECT_NE(rate->note.find("median of 3 runs"), std::string::npos) << rate->note;
  EXPECT_NEAR(r.find_metric("requests_per_s")->value, runs[2].requests_per_s, 1e-9);
  EXPECT_DOUBLE_EQ(r.find_metric("goodput_fraction")->value, 100.0);
  // Latencies pool the 3 x 64 requests: the slowest run holds the largest TTFT.
  const results::Metric* ttft = r.find_metric("ttft");
  EXPECT_EQ(ttft->samples, 3 * 64);
  EXPECT_DOUBLE_EQ(ttft->spread->max, runs[1].ttft_ms.max);
  EXPECT_DOUBLE_EQ(ttft->spread->min, runs[0].ttft_ms.min);
  EXPECT_EQ(r.find_metric("itl")->samples, 3 * 64 * 15);
  EXPECT_NEAR(r.find_metric("tpot")->value, 1.5 * kStepMs, 1e-9);  // rank 96 of 192: the 1.5 run's
  ASSERT_EQ(r.extra["runs"].size(), 3u);
  EXPECT_DOUBLE_EQ(r.extra["runs"][1]["output_tokens_per_s"].get<double>(), runs[1].output_tokens_per_s);
  EXPECT_DOUBLE_EQ(r.extra["duration_s"].get<double>(), runs[2].duration_s);
  EXPECT_EQ(r.extra["finished"], 3 * 64);

  // One INVALID run fails the record and says which.
  std::vector<LoadSummary> with_cut = runs;
  with_cut[1].valid = false;
  with_cut[1].invalid_reasons = {"run cut at 600 s: 3 of 64 measured requests unfinished"};
  const results::Record failed = repeated_record(with_cut, "k");
  EXPECT_EQ(failed.outcome, results::Outcome::failed);
  EXPECT_NE(failed.reason.find("run 2: run cut at 600 s"), std::string::npos) << failed.reason;

  // One run is to_record's record; none is a programming error.
  const results::Record single = repeated_record({runs[0]}, "k");
  EXPECT_EQ(single.find_metric("output_tokens_per_s")->statistic, "value");
  EXPECT_FALSE(single.params.contains("repeats"));
  EXPECT_THROW(repeated_record({}, "k"), std::invalid_argument);
}

TEST(LoadgenRecords, SweepAndPeakRecords) {
  std::vector<LoadSummary> runs = {threshold_run(1, 3), threshold_run(2.5, 3), threshold_run(4, 3)};
  const auto sweep = sweep_records(runs, "serve/m/sweep");
  ASSERT_EQ(sweep.size(), 3u);
  EXPECT_EQ(sweep[0].key, "serve/m/sweep/rate_1");
  EXPECT_EQ(sweep[1].key, "serve/m/sweep/rate_2p5");
  // A single Server run has the sweep's key for its rate.
  EXPECT_EQ(server_rate_key("serve/m/server", 2.5), "serve/m/server/rate_2p5");
  EXPECT_EQ(server_rate_key("serve/m/server", 16), "serve/m/server/rate_16");
  EXPECT_EQ(sweep[2].outcome, results::Outcome::passed);  // an INVALID point is part of the curve
  EXPECT_EQ(sweep[2].extra["valid"], false);
  EXPECT_EQ(sweep[2].extra["sweep_index"], 2);
  EXPECT_FALSE(sweep[0].params.contains("concurrency"));

  LoadSummary closed;
  closed.scenario = Scenario::concurrency;
  closed.concurrency = 32;
  const auto clients = sweep_records({closed}, "serve/m/concurrency");
  EXPECT_EQ(clients[0].key, "serve/m/concurrency/c32");
  EXPECT_EQ(clients[0].params["concurrency"], 32);
  EXPECT_FALSE(clients[0].params.contains("target_rate"));

  const PeakResult peak = find_peak([](double rate) { return threshold_run(rate, 3.7); }, PeakSearch{});
  const auto records = peak_records(peak, "serve/m/peak_search", {{"model", "m"}});
  ASSERT_EQ(records.size(), peak.probes.size() + 1);
  EXPECT_EQ(records[0].key, "serve/m/peak_search/probe_0");
  const results::Record& last = records.back();
  EXPECT_EQ(last.key, "serve/m/peak_search/peak");
  EXPECT_EQ(last.outcome, results::Outcome::passed);
  EXPECT_DOUBLE_EQ(last.find_metric("peak_rate")->value, peak.peak_rate);
  EXPECT_EQ(last.find_metric("peak_rate")->unit, "requests/s");
  EXPECT_EQ(last.extra["probes"].size(), peak.probes.size());
  EXPECT_EQ(last.params["model"], "m");

  const PeakResult none = find_peak([](double rate) { return threshold_run(rate, 0.01); }, PeakSearch{});
  const results::Record failed = peak_records(none, "p").back();
  EXPECT_EQ(failed.outcome, results::Outcome::failed);
  EXPECT_NE(failed.reason.find("p99 TTFT too high"), std::string::npos) << failed.reason;
}

}  // namespace
}  // namespace gpuscout::serve
