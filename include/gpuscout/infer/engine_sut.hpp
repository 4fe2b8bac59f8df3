#pragma once
// A serving system under test made of the continuous-batching Scheduler and an Executor (the CPU
// reference or the CUDA engine): prompts are deterministic token ids, outputs have fixed length.
// With a VirtualClock and a StepCost it is the deterministic engine the load generator's tests
// use in CI.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuscout/infer/scheduler.hpp"
#include "gpuscout/serve/system_under_test.hpp"

namespace gpuscout::infer {

// Modelled seconds of one step, for virtual clocks: fixed + per decode token + per prefill token.
struct StepCost {
  double fixed_s = 0;
  double per_decode_token_s = 0;
  double per_prefill_token_s = 0;
  double of(const StepPlan& plan) const {
    return fixed_s + per_decode_token_s * plan.decode_tokens + per_prefill_token_s * plan.prefill_tokens;
  }
};

struct EngineSutStats {
  std::int64_t steps = 0;
  std::int64_t preemptions = 0;
  std::int64_t max_running = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t prefill_tokens = 0;
};

class EngineSut final : public serve::SystemUnderTest {
 public:
  // `vocab` and `prompt_seed` define the prompts (prompt_token in weights.hpp). When
  // `virtual_clock` is set, every step advances it by `cost.of(plan)`.
  EngineSut(Executor& executor, SchedulerConfig config, int vocab, std::uint64_t prompt_seed = 1,
            serve::VirtualClock* virtual_clock = nullptr, StepCost cost = {});
  // Collects (and drops) steps still in flight, so that the executor can serve another SUT.
  ~EngineSut() override;
  EngineSut(const EngineSut&) = delete;
  EngineSut& operator=(const EngineSut&) = delete;

  // Pipelined stepping (off by default): each step() submits the next plan before it collects the
  // one in flight, so the executor's queue never runs dry while the host collects tokens, plans and
  // launches (Executor::submit). A step's tokens are then reported one step() later, and a request
  // arriving meanwhile is planned one step later. Same tokens either way.
  void set_pipelined(bool pipelined);

  std::string name() const override;
  std::optional<std::string> reject_reason(const serve::Request& request) const override;
  void submit(const serve::Request& request) override;
  bool idle() const override;
  void step(std::vector<serve::TokenEvent>& events) override;

  const EngineSutStats& stats() const { return stats_; }
  bool pipelined() const { return pipelined_; }
  // Tokens produced per request so far (tests compare them across engines).
  const std::unordered_map<std::uint64_t, std::vector<std::int32_t>>& outputs() const { return outputs_; }

 private:
  Executor& executor_;
  Scheduler scheduler_;
  int vocab_;
  std::uint64_t prompt_seed_;
  serve::VirtualClock* virtual_clock_;
  StepCost cost_;
  EngineSutStats stats_;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> outputs_;
  bool pipelined_ = false;
  // Pipelined: submitted plans not yet collected (at most two), with their pending outputs.
  struct InFlight {
    StepPlan plan;
    std::vector<SequenceOutput> outputs;
  };
  std::deque<InFlight> in_flight_;

  // Collects the oldest plan in flight: its tokens into the scheduler, outputs and events.
  void collect_oldest(std::vector<serve::TokenEvent>& events);
  void report(const std::vector<SequenceOutput>& produced, const StepPlan& plan,
              std::vector<serve::TokenEvent>& events);
};

}  // namespace gpuscout::infer
