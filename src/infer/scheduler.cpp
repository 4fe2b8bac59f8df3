#include "gpuscout/infer/scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "sequence_limits.hpp"

namespace gpuscout::infer {

namespace detail {

std::optional<std::string> sequence_limit_problem(const SchedulerConfig& config, std::int64_t prompt,
                                                  std::int64_t output) {
  if (prompt < 1) return fmt::format("the prompt has {} tokens; it needs at least 1", prompt);
  if (output < 1) return fmt::format("{} output tokens requested; at least 1 is needed", output);
  const std::int64_t total = prompt + output;
  if (config.max_sequence_tokens > 0 && total > config.max_sequence_tokens) {
    return fmt::format(
        "{} input + {} output = {} tokens exceed the engine's context of {} tokens (max_sequence_tokens)", prompt,
        output, total, config.max_sequence_tokens);
  }
  const std::int64_t blocks = blocks_at_most(config, prompt, output);
  if (blocks > config.num_blocks) {
    return fmt::format(
        "{} input + {} output tokens need {} KV-cache blocks of {} tokens, more than the {} blocks ({} tokens) the "
        "cache has",
        prompt, output, blocks, config.block_size, config.num_blocks,
        static_cast<std::int64_t>(config.num_blocks) * config.block_size);
  }
  if (!config.chunked_prefill && prompt > config.max_step_tokens) {
    return fmt::format("a {}-token prompt does not fit one step of max_step_tokens {} with chunked_prefill off", prompt,
                       config.max_step_tokens);
  }
  return std::nullopt;
}

}  // namespace detail

struct Scheduler::Sequence {
  std::uint64_t id = 0;
  std::vector<std::int32_t> tokens;  // the prompt, then every token produced
  int prompt_len = 0;
  int max_new_tokens = 0;
  int computed = 0;       // positions whose K/V are cached (or planned in the current step)
  bool decoding = false;  // its prefill (or recompute) is done: each step feeds its last token
  bool running = false;   // admitted: holds a slot and blocks
  int slot = -1;
  std::uint64_t admitted = 0;  // admission counter, for "most recently admitted"
  std::vector<std::int32_t> block_table;
  int planned_tokens = 0;  // tokens of its chunk in the plan being built (0: none)
  bool planned_decode = false;

  int generated() const { return static_cast<int>(tokens.size()) - prompt_len; }
  int length() const { return static_cast<int>(tokens.size()); }
};

namespace {

void require(bool ok, const char* field, const std::string& what) {
  if (!ok) throw std::invalid_argument(fmt::format("scheduler: {} {}", field, what));
}

int blocks_for(int positions, int block_size) {
  return (positions + block_size - 1) / block_size;
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config) : config_(config) {
  require(config_.block_size >= 1, "block_size", fmt::format("must be at least 1 (got {})", config_.block_size));
  require(config_.num_blocks >= 1, "num_blocks", fmt::format("must be at least 1 (got {})", config_.num_blocks));
  require(config_.max_step_tokens >= 1, "max_step_tokens",
          fmt::format("must be at least 1 (got {})", config_.max_step_tokens));
  require(config_.max_running >= 1, "max_running", fmt::format("must be at least 1 (got {})", config_.max_running));
  require(config_.max_sequence_tokens >= 0, "max_sequence_tokens",
          fmt::format("must be at least 0 (0: no limit but the cache; got {})", config_.max_sequence_tokens));
  free_blocks_.reserve(config_.num_blocks);
  for (int b = config_.num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
  free_slots_.reserve(config_.max_running);
  for (int s = config_.max_running - 1; s >= 0; --s) free_slots_.push_back(s);
}

Scheduler::~Scheduler() = default;

void Scheduler::add(SequenceRequest request) {
  const auto problem =
      detail::sequence_limit_problem(config_, static_cast<std::int64_t>(request.prompt.size()), request.max_new_tokens);
  if (problem) throw std::invalid_argument(fmt::format("sequence {}: {}", request.id, *problem));
  for (const auto& s : storage_) {
    if (s->id == request.id)
      throw std::invalid_argument(fmt::format("sequence {}: already queued or running", request.id));
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = request.id;
  seq->prompt_len = static_cast<int>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->max_new_tokens = request.max_new_tokens;
  waiting_.push_back(seq.get());
  storage_.push_back(std::move(seq));
}

void Scheduler::release(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) free_blocks_.push_back(*it);
  seq.block_table.clear();
  free_slots_.insert(std::upper_bound(free_slots_.begin(), free_slots_.end(), seq.slot, std::greater<int>()), seq.slot);
  seq.slot = -1;
  seq.running = false;
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
}

void Scheduler::preempt(Sequence& victim, StepPlan& plan, int& budget) {
  if (victim.planned_tokens > 0) {  // it already has a chunk in this plan: take it out
    const auto it =
        std::find_if(plan.chunks.begin(), plan.chunks.end(), [&](const SeqChunk& c) { return c.seq_id == victim.id; });
    plan.chunks.erase(it);
    (victim.planned_decode ? plan.decode_tokens : plan.prefill_tokens) -= victim.planned_tokens;
    budget += victim.planned_tokens;
    victim.planned_tokens = 0;
  }
  release(victim);
  victim.computed = 0;  // recomputed from prompt + produced tokens
  victim.decoding = false;
  waiting_.push_front(&victim);
  ++preemptions_;
  plan.preempted.push_back(victim.id);
}

bool Scheduler::reserve_blocks(Sequence& seq, int blocks, bool later_only, StepPlan& plan, int& budget) {
  // Preempt nobody unless the victims allowed would free enough.
  std::size_t reachable = free_blocks_.size();
  for (const Sequence* other : running_) {
    if (other != &seq && (!later_only || other->admitted > seq.admitted)) reachable += other->block_table.size();
  }
  if (static_cast<int>(reachable) < blocks - static_cast<int>(seq.block_table.size())) return false;
  while (static_cast<int>(free_blocks_.size()) < blocks - static_cast<int>(seq.block_table.size())) {
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (*it != &seq) {
        victim = *it;
        break;
      }
    }
    if (victim == nullptr || (later_only && victim->admitted < seq.admitted)) return false;
    preempt(*victim, plan, budget);
  }
  while (static_cast<int>(seq.block_table.size()) < blocks) {
    seq.block_table.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  return true;
}

void Scheduler::add_chunk(Sequence& seq, int tokens, bool decode, StepPlan& plan, int& budget) {
  SeqChunk chunk;
  chunk.seq_id = seq.id;
  chunk.slot = seq.slot;
  chunk.start_position = seq.computed;
  chunk.tokens.assign(seq.tokens.begin() + seq.computed, seq.tokens.begin() + seq.computed + tokens);
  // A pending token is only ever the input of a decode chunk (the step after the one sampling it).
  if (!decode && seq.generated() > 0 &&
      std::find(chunk.tokens.begin(), chunk.tokens.end(), kPendingToken) != chunk.tokens.end()) {
    throw std::logic_error(fmt::format(
        "scheduler: sequence {} would recompute a token still being sampled (resolve() the pipelined step first)",
        seq.id));
  }
  chunk.block_table = seq.block_table;
  chunk.samples = seq.computed + tokens == seq.length();
  plan.chunks.push_back(std::move(chunk));
  (decode ? plan.decode_tokens : plan.prefill_tokens) += tokens;
  budget -= tokens;
  seq.computed += tokens;
  seq.planned_tokens = tokens;
  seq.planned_decode = decode;
}

// Tokens of a prefill with `remaining` tokens to compute that fit `budget` (0: it waits).
int Scheduler::chunk_size(int remaining, int budget) const {
  if (config_.chunked_prefill || remaining <= budget) return std::min(remaining, budget);
  // Unchunked: a recompute context longer than a whole step (add() keeps prompts within one) is
  // still split, over steps that hold nothing else.
  if (remaining > config_.max_step_tokens && budget == config_.max_step_tokens) return budget;
  return 0;
}

StepPlan Scheduler::plan() {
  if (plan_outstanding_) throw std::logic_error("Scheduler::plan() called before complete() of the previous plan");
  StepPlan plan;
  int budget = config_.max_step_tokens;
  for (Sequence* s : running_) s->planned_tokens = 0;

  // 1. One decode token for every running sequence past its prefill, oldest first.
  const std::vector<Sequence*> running_now = running_;
  for (Sequence* seq : running_now) {
    if (budget == 0) break;
    if (!seq->running || !seq->decoding) continue;
    const int blocks = blocks_for(seq->computed + 1, config_.block_size);
    if (!reserve_blocks(*seq, blocks, /*later_only=*/false, plan, budget)) {
      // Alone and out of blocks: add() rules this out (a sequence's blocks at most fit the cache).
      throw std::logic_error(fmt::format("scheduler: sequence {} needs a KV block and none can be freed", seq->id));
    }
    add_chunk(*seq, 1, /*decode=*/true, plan, budget);
  }

  // 2. Prefill chunks: first sequences admitted in earlier steps whose prefill is unfinished ...
  for (Sequence* seq : running_now) {
    if (budget == 0) break;
    if (!seq->running || seq->decoding) continue;
    const int n = chunk_size(seq->length() - seq->computed, budget);
    if (n == 0) break;
    if (!reserve_blocks(*seq, blocks_for(seq->computed + n, config_.block_size), /*later_only=*/true, plan, budget)) {
      break;
    }
    add_chunk(*seq, n, /*decode=*/false, plan, budget);
  }
  // ... then admissions from the queue, in order, while the chunk's blocks and a slot are free (not
  // in a step that had to preempt: memory is short, and the preempted would come straight back).
  while (budget > 0 && plan.preempted.empty() && !waiting_.empty() &&
         static_cast<int>(running_.size()) < config_.max_running) {
    Sequence& seq = *waiting_.front();
    const int n = chunk_size(seq.length(), budget);
    if (n == 0) break;
    if (blocks_for(n, config_.block_size) > static_cast<int>(free_blocks_.size())) break;
    waiting_.pop_front();
    seq.running = true;
    seq.admitted = admissions_++;
    seq.slot = free_slots_.back();
    free_slots_.pop_back();
    running_.push_back(&seq);
    reserve_blocks(seq, blocks_for(n, config_.block_size), /*later_only=*/true, plan, budget);
    add_chunk(seq, n, /*decode=*/false, plan, budget);
  }
  plan_outstanding_ = !plan.empty();
  return plan;
}

std::vector<SequenceOutput> Scheduler::complete(const StepPlan& plan, const std::vector<std::int32_t>& sampled) {
  return finish_step(plan, &sampled);
}

std::vector<SequenceOutput> Scheduler::complete_pending(const StepPlan& plan) {
  return finish_step(plan, nullptr);
}

std::vector<SequenceOutput> Scheduler::finish_step(const StepPlan& plan, const std::vector<std::int32_t>* sampled) {
  const auto sampling =
      std::count_if(plan.chunks.begin(), plan.chunks.end(), [](const SeqChunk& c) { return c.samples; });
  if (sampled != nullptr && static_cast<std::size_t>(sampling) != sampled->size()) {
    throw std::invalid_argument(fmt::format("Scheduler::complete: {} sampled tokens for a plan with {} sampling chunks",
                                            sampled->size(), sampling));
  }
  std::unordered_map<std::uint64_t, Sequence*> by_id;
  for (Sequence* s : running_) by_id.emplace(s->id, s);

  std::vector<SequenceOutput> outputs;
  outputs.reserve(static_cast<std::size_t>(sampling));
  std::size_t next = 0;
  std::vector<Sequence*> finished;
  for (const SeqChunk& chunk : plan.chunks) {
    const auto it = by_id.find(chunk.seq_id);
    if (it == by_id.end()) {
      throw std::invalid_argument(
          fmt::format("Scheduler::complete: sequence {} of the plan is not running", chunk.seq_id));
    }
    Sequence& seq = *it->second;
    seq.planned_tokens = 0;
    if (!chunk.samples) continue;
    seq.tokens.push_back(sampled != nullptr ? (*sampled)[next++] : kPendingToken);
    seq.decoding = true;
    SequenceOutput out;
    out.seq_id = seq.id;
    out.token = seq.tokens.back();
    out.generated = seq.generated();
    out.finished = out.generated >= seq.max_new_tokens;
    outputs.push_back(out);
    if (out.finished) finished.push_back(&seq);
  }
  for (Sequence* seq : finished) {
    release(*seq);
    storage_.erase(std::find_if(storage_.begin(), storage_.end(), [&](const auto& p) { return p.get() == seq; }));
  }
  plan_outstanding_ = false;
  return outputs;
}

void Scheduler::resolve(const StepPlan& plan, const std::vector<std::int32_t>& sampled) {
  const auto sampling =
      std::count_if(plan.chunks.begin(), plan.chunks.end(), [](const SeqChunk& c) { return c.samples; });
  if (static_cast<std::size_t>(sampling) != sampled.size()) {
    throw std::invalid_argument(fmt::format("Scheduler::resolve: {} sampled tokens for a plan with {} sampling chunks",
                                            sampled.size(), sampling));
  }
  std::unordered_map<std::uint64_t, Sequence*> by_id;
  for (const auto& s : storage_) by_id.emplace(s->id, s.get());
  std::size_t next = 0;
  for (const SeqChunk& chunk : plan.chunks) {
    if (!chunk.samples) continue;
    const std::int32_t token = sampled[next++];
    const auto it = by_id.find(chunk.seq_id);
    if (it == by_id.end()) continue;  // finished: its tokens are only in the outputs
    // The chunk ended at the sequence's end, so the token it sampled follows it.
    const std::size_t at = static_cast<std::size_t>(chunk.start_position) + chunk.tokens.size();
    std::vector<std::int32_t>& tokens = it->second->tokens;
    if (at >= tokens.size() || tokens[at] != kPendingToken) {
      throw std::logic_error(
          fmt::format("Scheduler::resolve: sequence {} has no pending token at position {}", chunk.seq_id, at));
    }
    tokens[at] = token;
  }
}

void Executor::submit(const StepPlan& plan) {
  const StepPlan* run = &plan;
  StepPlan resolved;
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const SeqChunk& c = plan.chunks[i];
    if (c.tokens.size() != 1 || c.tokens[0] != kPendingToken) continue;
    const auto it = last_sampled_.find(c.seq_id);
    if (it == last_sampled_.end()) {
      throw std::logic_error(
          fmt::format("{}: sequence {} has a pending token but the previous step did not sample it", name(), c.seq_id));
    }
    if (run == &plan) {
      resolved = plan;
      run = &resolved;
    }
    resolved.chunks[i].tokens[0] = it->second;
  }
  std::vector<std::int32_t> tokens = execute(*run);
  last_sampled_.clear();
  for (const auto& [id, index] : sampling_index(plan))
    last_sampled_.emplace(id, tokens[static_cast<std::size_t>(index)]);
  collected_.push_back(std::move(tokens));
}

std::vector<std::int32_t> Executor::collect() {
  if (collected_.empty()) throw std::logic_error(name() + ": collect() without a submitted step");
  std::vector<std::int32_t> tokens = std::move(collected_.front());
  collected_.pop_front();
  return tokens;
}

std::unordered_map<std::uint64_t, int> Executor::sampling_index(const StepPlan& plan) {
  std::unordered_map<std::uint64_t, int> index;
  int next = 0;
  for (const SeqChunk& c : plan.chunks) {
    if (c.samples) index.emplace(c.seq_id, next++);
  }
  return index;
}

bool Scheduler::idle() const {
  return waiting_.empty() && running_.empty();
}
int Scheduler::waiting() const {
  return static_cast<int>(waiting_.size());
}
int Scheduler::running() const {
  return static_cast<int>(running_.size());
}
int Scheduler::free_blocks() const {
  return static_cast<int>(free_blocks_.size());
}
std::int64_t Scheduler::preemptions() const {
  return preemptions_;
}
const SchedulerConfig& Scheduler::config() const {
  return config_;
}

}  // namespace gpuscout::infer
