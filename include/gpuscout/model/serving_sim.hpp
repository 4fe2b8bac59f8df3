#pragma once
// Server-mode queueing by discrete-event simulation (docs/modeling.md "Queueing"). The project's own
// continuous-batching Scheduler (infer/scheduler.hpp: decode first, chunked prefill under a token
// budget, paged KV blocks, preemption) runs against a simulated engine whose step time is the
// per-operator speed model of the step it planned (prefill chunks + decodes at their current contexts).
// The load generator (serve/loadgen.hpp) drives it on a VirtualClock: Poisson arrivals, TTFT/TPOT
// percentiles, VALID/INVALID and --find-peak are the ones the real engine is measured with.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuscout/infer/scheduler.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/serve/loadgen.hpp"
#include "gpuscout/serve/system_under_test.hpp"

namespace gpuscout::model {

// The engine's batching limits. Defaults: vLLM's (max_num_seqs 256, 16-token blocks) and the gpuscout
// engine's 8192-token step (the measured serve runs of bench/results); ASSUMPTIONS for other engines.
struct EngineLimits {
  int max_running = 256;
  int max_step_tokens = 8192;
  int block_size = 16;
  std::int64_t kv_tokens = 0;  // KV-cache room of one replica (memory model); 0 = from the memory model
};

// A simulated replica: the Scheduler plans, the speed model times the step, the clock advances by it.
class SimulatedEngine final : public serve::SystemUnderTest {
 public:
  SimulatedEngine(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                  serve::VirtualClock& clock);
  std::string name() const override;
  std::optional<std::string> reject_reason(const serve::Request& request) const override;
  void submit(const serve::Request& request) override;
  bool idle() const override;
  void step(std::vector<serve::TokenEvent>& events) override;

  std::int64_t preemptions() const { return scheduler_->preemptions(); }
  double busy_s() const { return busy_s_; }        // simulated time spent in steps
  double prefill_s() const { return prefill_s_; }  // of which attributed to prefill tokens (by token share)

 private:
  const SpeedContext& ctx_;
  const InferenceSetup& setup_;
  serve::VirtualClock& clock_;
  std::unique_ptr<infer::Scheduler> scheduler_;
  std::vector<std::int32_t> sampled_;
  double busy_s_ = 0, prefill_s_ = 0;
};

// The scheduler configuration of one replica: KV blocks from the memory model (ISL+OSL context,
// framework memory fraction) unless `limits.kv_tokens` is given.
infer::SchedulerConfig engine_scheduler_config(const SpeedContext& ctx, const InferenceSetup& setup,
                                               const EngineLimits& limits);

struct QueueingSettings {
  int isl = 0, osl = 0;
  double range_ratio = 0;  // lengths uniform in [L(1 - r), L(1 + r)] (serve::uniform_lengths); 0: fixed
  double ttft_bound_ms = 0, tpot_bound_ms = 0;
  std::uint64_t seed = 1;
  int warmup_requests = 4;     // as the measured find-peak runs
  int min_requests = 64;       // measured requests per probe at least
  double min_duration_s = 15;  // measured span per probe at least (the measured runs' 15 s)
  double max_run_s = 600;      // simulated seconds before a probe is cut (INVALID)
  double relative_tolerance = 0.05;
  int max_probes = 12;
};

// One Server run at `rate` requests/s on one replica.
serve::LoadSummary simulate_server(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                                   const QueueingSettings& settings, double rate);

// One Concurrency run (closed loop: `clients` requests in flight, each replaced when it finishes) on one
// replica; the bounds judge it as they judge a Server run.
serve::LoadSummary simulate_concurrency(const SpeedContext& ctx, const InferenceSetup& setup,
                                        const EngineLimits& limits, const QueueingSettings& settings, int clients);

// The highest Poisson rate (one replica) whose p99 TTFT and TPOT meet the bounds, by the load generator's
// find_peak starting at `guess` requests/s.
serve::PeakResult simulate_peak(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                                const QueueingSettings& settings, double guess);

}  // namespace gpuscout::model
