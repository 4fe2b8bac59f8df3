#pragma once
// Continuous batching (engine-agnostic, pure C++): which tokens of which sequences the next engine
// step computes. Every step first decodes one token for each running sequence, then fills the rest
// of the step's token budget with prefill chunks (chunked prefill), admitting waiting sequences
// while KV-cache blocks allow. When a running sequence needs a block and none is free, the most
// recently admitted sequence is preempted: its blocks are freed and it goes back to the front of
// the queue to be recomputed (prompt plus the tokens it already produced) when blocks free up.
//
// The scheduler owns the paged KV-cache block table of every sequence; the executor (CPU reference
// or CUDA engine) stores K/V at the slots those tables name. C++17-clean.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpuscout::infer {

// The input token of a decode chunk whose value the step submitted just before is still computing
// (pipelined stepping: Scheduler::complete_pending, Executor::submit). The executor takes it from
// that step's results.
inline constexpr std::int32_t kPendingToken = -1;

struct SchedulerConfig {
  int block_size = 16;          // tokens per KV-cache block
  int num_blocks = 0;           // blocks the executor has memory for
  int max_step_tokens = 2048;   // token budget of one step (decode tokens + prefill chunk tokens)
  int max_running = 256;        // sequences decoding at once (the engine's largest batch)
  int max_sequence_tokens = 0;  // prompt + output limit per sequence (the engine's context)
  bool chunked_prefill = true;  // false: a prompt's prefill is never split across steps
};

struct SequenceRequest {
  std::uint64_t id = 0;
  std::vector<std::int32_t> prompt;
  int max_new_tokens = 1;  // output length (fixed: no end-of-sequence token)
};

// The slice of one sequence a step computes.
struct SeqChunk {
  std::uint64_t seq_id = 0;
  int slot = 0;            // index of the sequence among running ones, stable while it runs (< max_running)
  int start_position = 0;  // position of tokens[0] in the sequence; the chunk attends to [0, start_position + size)
  std::vector<std::int32_t> tokens;       // input token ids (decode: the last token produced)
  std::vector<std::int32_t> block_table;  // KV blocks covering positions [0, start_position + tokens.size())
  bool samples = false;                   // the chunk reaches the sequence's end: the engine returns its next token
  bool is_decode() const { return tokens.size() == 1 && start_position > 0; }
};

struct StepPlan {
  std::vector<SeqChunk> chunks;  // decode chunks first, then prefill chunks
  int decode_tokens = 0;
  int prefill_tokens = 0;
  std::vector<std::uint64_t> preempted;  // sequences preempted while planning this step
  bool empty() const { return chunks.empty(); }
  int total_tokens() const { return decode_tokens + prefill_tokens; }
};

// What a completed step produced for one sequence.
struct SequenceOutput {
  std::uint64_t seq_id = 0;
  std::int32_t token = 0;
  int generated = 0;  // tokens produced so far, this one included
  bool finished = false;
};

class Scheduler {
 public:
  // Throws std::invalid_argument naming the field when the configuration is unusable.
  explicit Scheduler(SchedulerConfig config);
  ~Scheduler();  // out of line: Sequence is complete only in scheduler.cpp
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence. Throws std::invalid_argument when it can never run (longer than
  // max_sequence_tokens, or needing more blocks than the cache has), naming the limit.
  void add(SequenceRequest request);

  // The next step's work; empty when nothing is queued or running.
  StepPlan plan();
  // Records the executor's sampled token for each chunk with samples=true (in plan order) and
  // returns one output per such chunk. Finished sequences release their blocks.
  std::vector<SequenceOutput> complete(const StepPlan& plan, const std::vector<std::int32_t>& sampled);
  // Pipelined stepping: completes the plan before its tokens are known, so that the next plan can be
  // made while the executor runs this one. The tokens it samples are kPendingToken until resolve();
  // the outputs are complete()'s with token kPendingToken (sequences that reach their length finish
  // and release their blocks now: a later step reusing them runs after this one). Only the next
  // plan may be made before resolve(): its decode chunks then carry kPendingToken.
  std::vector<SequenceOutput> complete_pending(const StepPlan& plan);
  // The tokens of a plan completed by complete_pending(), in plan order as complete() takes them.
  void resolve(const StepPlan& plan, const std::vector<std::int32_t>& sampled);

  bool idle() const;
  int waiting() const;
  int running() const;
  int free_blocks() const;
  std::int64_t preemptions() const;
  const SchedulerConfig& config() const;

 private:
  struct Sequence;
  // Moves blocks from the free list to `seq` until it has `blocks`, preempting victims chosen by
  // `later_only` (true: only sequences admitted after `seq`; false: any other running one, most
  // recently admitted first). False when not enough blocks can be found.
  bool reserve_blocks(Sequence& seq, int blocks, bool later_only, StepPlan& plan, int& budget);
  void preempt(Sequence& victim, StepPlan& plan, int& budget);
  void release(Sequence& seq);  // blocks and slot back to the free lists, out of running_
  void add_chunk(Sequence& seq, int tokens, bool decode, StepPlan& plan, int& budget);
  int chunk_size(int remaining, int budget) const;
  // complete() and complete_pending() (sampled null).
  std::vector<SequenceOutput> finish_step(const StepPlan& plan, const std::vector<std::int32_t>* sampled);

  SchedulerConfig config_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;         // in admission order
  std::vector<std::int32_t> free_blocks_;  // a stack: the lowest id on top
  std::vector<int> free_slots_;            // sorted descending: the lowest slot at the back
  std::int64_t preemptions_ = 0;
  std::uint64_t admissions_ = 0;
  bool plan_outstanding_ = false;
  std::vector<std::unique_ptr<Sequence>> storage_;  // owns every sequence not yet finished
};

// Runs steps. The CPU reference and the CUDA engine implement it; the scheduler never sees which.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual int kv_block_size() const = 0;
  virtual int kv_blocks() const = 0;        // KV-cache blocks it holds memory for
  virtual int max_running() const = 0;      // largest batch of decoding sequences it supports
  virtual int max_step_tokens() const = 0;  // largest step it supports
  // Runs one forward pass over every chunk of the plan (KV of all chunk tokens written at the slots
  // of their block tables) and returns the greedy next token of each chunk with samples=true, in
  // plan order.
  virtual std::vector<std::int32_t> execute(const StepPlan& plan) = 0;

  // Pipelined stepping: submit() starts a plan and may return before it has run; collect() waits
  // for the oldest plan submitted and not yet collected and returns what execute() would have. At
  // most two plans are outstanding. A decode chunk may carry kPendingToken when the plan submitted
  // just before samples its sequence: the executor uses that step's token. The default runs the
  // plan in submit(), through execute().
  virtual void submit(const StepPlan& plan);
  virtual std::vector<std::int32_t> collect();

 protected:
  // Sequence id -> index among the plan's sampling chunks (the order of execute()'s result).
  static std::unordered_map<std::uint64_t, int> sampling_index(const StepPlan& plan);

 private:
  std::deque<std::vector<std::int32_t>> collected_;               // the default submit()'s results, oldest first
  std::unordered_map<std::uint64_t, std::int32_t> last_sampled_;  // by sequence, of the last submit()
};

}  // namespace gpuscout::infer
