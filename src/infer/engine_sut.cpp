#include "gpuscout/infer/engine_sut.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "gpuscout/infer/weights.hpp"
#include "sequence_limits.hpp"

namespace gpuscout::infer {
namespace {

// The scheduler's configuration must stay within what the executor holds memory for.
SchedulerConfig checked(const Executor& executor, SchedulerConfig config, int vocab) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("EngineSut({}): {}", executor.name(), what));
  };
  if (vocab < 1) fail(fmt::format("vocab must be at least 1 (got {})", vocab));
  if (config.block_size != executor.kv_block_size()) {
    fail(fmt::format("block_size {} differs from the executor's KV block size {}", config.block_size,
                     executor.kv_block_size()));
  }
  if (config.num_blocks > executor.kv_blocks()) {
    fail(fmt::format("num_blocks {} exceeds the executor's {} KV blocks", config.num_blocks, executor.kv_blocks()));
  }
  if (config.max_running > executor.max_running()) {
    fail(fmt::format("max_running {} exceeds the executor's {}", config.max_running, executor.max_running()));
  }
  if (config.max_step_tokens > executor.max_step_tokens()) {
    fail(fmt::format("max_step_tokens {} exceeds the executor's {}", config.max_step_tokens,
                     executor.max_step_tokens()));
  }
  return config;
}

}  // namespace

EngineSut::EngineSut(Executor& executor, SchedulerConfig config, int vocab, std::uint64_t prompt_seed,
                     serve::VirtualClock* virtual_clock, StepCost cost)
    : executor_(executor),
      scheduler_(checked(executor, config, vocab)),
      vocab_(vocab),
      prompt_seed_(prompt_seed),
      virtual_clock_(virtual_clock),
      cost_(cost) {}

std::string EngineSut::name() const {
  return executor_.name();
}

std::optional<std::string> EngineSut::reject_reason(const serve::Request& request) const {
  const auto problem = detail::sequence_limit_problem(scheduler_.config(), request.input_tokens, request.output_tokens);
  if (!problem) return std::nullopt;
  return fmt::format("request {}: {}", request.id, *problem);
}

void EngineSut::submit(const serve::Request& request) {
  if (const auto reason = reject_reason(request)) throw std::invalid_argument(*reason);
  SequenceRequest seq;
  seq.id = request.id;
  seq.max_new_tokens = request.output_tokens;
  seq.prompt.reserve(static_cast<std::size_t>(request.input_tokens));
  for (int p = 0; p < request.input_tokens; ++p) {
    seq.prompt.push_back(prompt_token(prompt_seed_, request.id, static_cast<std::uint64_t>(p), vocab_));
  }
  scheduler_.add(std::move(seq));
  outputs_[request.id].reserve(static_cast<std::size_t>(request.output_tokens));
}

EngineSut::~EngineSut() {
  try {
    for (; !in_flight_.empty(); in_flight_.pop_front()) (void)executor_.collect();
  } catch (...) {  // NOLINT(bugprone-empty-catch): the step failed; its error was or will be reported elsewhere
  }
}

void EngineSut::set_pipelined(bool pipelined) {
  if (!in_flight_.empty()) throw std::logic_error("EngineSut::set_pipelined with a step in flight");
  pipelined_ = pipelined;
}

bool EngineSut::idle() const {
  return scheduler_.idle() && in_flight_.empty();
}

void EngineSut::step(std::vector<serve::TokenEvent>& events) {
  StepPlan plan = scheduler_.plan();
  if (plan.empty()) {
    if (!in_flight_.empty()) return collect_oldest(events);
    if (!scheduler_.idle()) {
      throw std::logic_error(
          fmt::format("EngineSut: {} sequences wait and none can be scheduled", scheduler_.waiting()));
    }
    return;
  }
  stats_.max_running = std::max<std::int64_t>(stats_.max_running, scheduler_.running());
  if (!pipelined_) {
    const std::vector<std::int32_t> sampled = executor_.execute(plan);
    report(scheduler_.complete(plan, sampled), plan, events);
    return;
  }
  executor_.submit(plan);
  std::vector<SequenceOutput> pending = scheduler_.complete_pending(plan);
  in_flight_.push_back(InFlight{std::move(plan), std::move(pending)});
  // The plan just submitted is queued behind the one in flight: collect that one now.
  if (in_flight_.size() > 1) collect_oldest(events);
}

void EngineSut::collect_oldest(std::vector<serve::TokenEvent>& events) {
  InFlight done = std::move(in_flight_.front());
  in_flight_.pop_front();
  const std::vector<std::int32_t> sampled = executor_.collect();
  scheduler_.resolve(done.plan, sampled);
  if (sampled.size() != done.outputs.size()) {
    throw std::logic_error(
        fmt::format("EngineSut: {} tokens collected for a step that samples {}", sampled.size(), done.outputs.size()));
  }
  for (std::size_t i = 0; i < sampled.size(); ++i) done.outputs[i].token = sampled[i];
  report(done.outputs, done.plan, events);
}

void EngineSut::report(const std::vector<SequenceOutput>& produced, const StepPlan& plan,
                       std::vector<serve::TokenEvent>& events) {
  for (const SequenceOutput& out : produced) {
    outputs_[out.seq_id].push_back(out.token);
    serve::TokenEvent event;
    event.request_id = out.seq_id;
    event.tokens = 1;
    event.finished = out.finished;
    events.push_back(event);
  }
  ++stats_.steps;
  stats_.preemptions = scheduler_.preemptions();
  stats_.decode_tokens += plan.decode_tokens;
  stats_.prefill_tokens += plan.prefill_tokens;
  if (virtual_clock_ != nullptr) virtual_clock_->advance(cost_.of(plan));
}

}  // namespace gpuscout::infer
