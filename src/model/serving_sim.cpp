// Server-mode queueing by discrete-event simulation (serving_sim.hpp): the project's Scheduler and load
// generator, with the speed model as the engine's clock.
#include "gpuscout/model/serving_sim.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "../infer/sequence_limits.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::model {

infer::SchedulerConfig engine_scheduler_config(const SpeedContext& ctx, const InferenceSetup& setup,
                                               const EngineLimits& limits) {
  if (limits.max_running < 1)
    throw UsageError(fmt::format("--max-running: must be at least 1, got {}", limits.max_running));
  if (limits.max_step_tokens < 1) {
    throw UsageError(fmt::format("--max-step-tokens: must be at least 1, got {}", limits.max_step_tokens));
  }
  infer::SchedulerConfig c;
  c.block_size = limits.block_size;
  c.max_running = limits.max_running;
  c.max_step_tokens = limits.max_step_tokens;
  double kv_tokens = static_cast<double>(limits.kv_tokens);
  if (kv_tokens <= 0) {
    InferenceConfig mem;
    mem.weights = setup.weights;
    mem.kv_bytes_per_element = setup.kv_bytes_per_element;
    mem.kv_block = limits.block_size;
    mem.prefill_chunk = limits.max_step_tokens;
    mem.batch = limits.max_running;
    mem.runtime.memory_fraction = ctx.framework.memory_fraction;
    Parallelism replica = setup.par;
    replica.dp = 1;
    kv_tokens = inference_memory(setup.arch, replica, mem, gpu_capacity_bytes(*ctx.gpu)).kv_tokens_capacity;
  }
  c.num_blocks = static_cast<int>(std::min(kv_tokens / limits.block_size, 2e9));
  if (c.num_blocks < 1) {
    throw UsageError(fmt::format("--gpus: TP {} x PP {} on {} leaves no KV-cache room for the simulated engine",
                                 setup.par.tp, setup.par.pp, ctx.gpu->name));
  }
  return c;
}

SimulatedEngine::SimulatedEngine(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                                 serve::VirtualClock& clock)
    : ctx_(ctx),
      setup_(setup),
      clock_(clock),
      scheduler_(std::make_unique<infer::Scheduler>(engine_scheduler_config(ctx, setup, limits))) {}

std::string SimulatedEngine::name() const {
  return fmt::format("speed model on {} x {} ({})", setup_.par.tp * setup_.par.pp, ctx_.gpu->name, ctx_.framework.name);
}

std::optional<std::string> SimulatedEngine::reject_reason(const serve::Request& request) const {
  return infer::detail::sequence_limit_problem(scheduler_->config(), request.input_tokens, request.output_tokens);
}

void SimulatedEngine::submit(const serve::Request& request) {
  infer::SequenceRequest r;
  r.id = request.id;
  r.prompt.assign(static_cast<std::size_t>(request.input_tokens), 0);  // token values do not matter to the clock
  r.max_new_tokens = request.output_tokens;
  scheduler_->add(std::move(r));
}

bool SimulatedEngine::idle() const {
  return scheduler_->idle();
}

void SimulatedEngine::step(std::vector<serve::TokenEvent>& events) {
  const infer::StepPlan plan = scheduler_->plan();
  if (plan.empty()) {  // queued work that cannot be admitted yet: the engine idles one step overhead
    clock_.advance(std::max(ctx_.framework.step_overhead_ms * 1e-3, 1e-4));
    return;
  }
  // Decodes as one group at their mean context (attention is linear in the context); each prefill chunk
  // as its own group.
  std::vector<AttentionGroup> groups;
  groups.reserve(plan.chunks.size() - static_cast<std::size_t>(plan.decode_tokens) + 1);
  double decodes = 0, decode_context = 0, sampled = 0;
  for (const auto& c : plan.chunks) {
    if (c.samples) sampled += 1;
    if (c.is_decode()) {
      decodes += 1;
      decode_context += c.start_position;
    } else {
      groups.push_back({1, static_cast<double>(c.tokens.size()), static_cast<double>(c.start_position)});
    }
  }
  if (decodes > 0) groups.push_back({decodes, 1, decode_context / decodes});
  const double seconds = engine_step(ctx_, setup_, groups, sampled).seconds;
  busy_s_ += seconds;
  prefill_s_ += seconds * plan.prefill_tokens / std::max(plan.total_tokens(), 1);
  clock_.advance(seconds);
  sampled_.assign(static_cast<std::size_t>(sampled), 0);
  for (const auto& out : scheduler_->complete(plan, sampled_)) {
    events.push_back({out.seq_id, 1, out.finished});
  }
}

namespace {

serve::LoadSettings server_settings(const QueueingSettings& q, double rate, int gpus) {
  serve::LoadSettings s;
  s.scenario = serve::Scenario::server;
  s.target_rate = rate;
  s.lengths = serve::uniform_lengths(q.isl, q.osl, q.range_ratio);
  s.seed = q.seed;
  s.min_requests = q.min_requests;
  s.min_duration_s = q.min_duration_s;
  s.warmup_requests = q.warmup_requests;
  s.ttft_bound_ms = q.ttft_bound_ms;
  s.tpot_bound_ms = q.tpot_bound_ms;
  s.max_run_s = q.max_run_s;
  s.gpus = gpus;
  return s;
}

}  // namespace

serve::LoadSummary simulate_server(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                                   const QueueingSettings& settings, double rate) {
  serve::VirtualClock clock;
  SimulatedEngine engine(ctx, setup, limits, clock);
  return serve::run_load(engine, clock, server_settings(settings, rate, static_cast<int>(setup.par.tp * setup.par.pp)));
}

serve::LoadSummary simulate_concurrency(const SpeedContext& ctx, const InferenceSetup& setup,
                                        const EngineLimits& limits, const QueueingSettings& settings, int clients) {
  serve::VirtualClock clock;
  SimulatedEngine engine(ctx, setup, limits, clock);
  serve::LoadSettings s = server_settings(settings, 1.0, static_cast<int>(setup.par.tp * setup.par.pp));
  s.scenario = serve::Scenario::concurrency;
  s.concurrency = clients;
  return serve::run_load(engine, clock, s);
}

serve::PeakResult simulate_peak(const SpeedContext& ctx, const InferenceSetup& setup, const EngineLimits& limits,
                                const QueueingSettings& settings, double guess) {
  serve::PeakSearch search;
  search.high = guess;
  search.low = guess / 256;
  search.relative_tolerance = settings.relative_tolerance;
  search.max_probes = settings.max_probes;
  return serve::find_peak([&](double rate) { return simulate_server(ctx, setup, limits, settings, rate); }, search);
}

}  // namespace gpuscout::model
