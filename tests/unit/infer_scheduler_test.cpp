#include "gpuscout/infer/scheduler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "gpuscout/infer/reference_model.hpp"
#include "gpuscout/infer/weights.hpp"

namespace gpuscout::infer {
namespace {

// Tokens as a pure function of the chunk's last input token and the position it predicts, so a
// recomputed sequence gets the same tokens without any model.
class FakeExecutor final : public Executor {
 public:
  std::string name() const override { return "fake"; }
  int kv_block_size() const override { return 16; }
  int kv_blocks() const override { return 1 << 20; }
  int max_running() const override { return 1 << 20; }
  int max_step_tokens() const override { return 1 << 20; }
  std::vector<std::int32_t> execute(const StepPlan& plan) override {
    std::vector<std::int32_t> out;
    for (const SeqChunk& c : plan.chunks) {
      if (!c.samples) continue;
      const int next_position = c.start_position + static_cast<int>(c.tokens.size());
      out.push_back((c.tokens.back() * 7 + next_position * 13) % 1000);
    }
    return out;
  }
};

std::vector<std::int32_t> prompt_of(std::uint64_t id, int length, int vocab = 512) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(prompt_token(7, id, static_cast<std::uint64_t>(i), vocab));
  return p;
}

struct RunResult {
  std::map<std::uint64_t, std::vector<std::int32_t>> tokens;
  std::int64_t steps = 0;
  std::int64_t preemptions = 0;
  int max_running = 0;
};

// Runs every request to the end, checking the plan invariants of every step.
RunResult run_all(Scheduler& scheduler, Executor& executor, const std::vector<SequenceRequest>& requests,
                  const std::function<void(const StepPlan&)>& on_plan = {}) {
  const SchedulerConfig& cfg = scheduler.config();
  std::map<std::uint64_t, int> wanted;
  std::map<std::uint64_t, int> slot_of;  // while running
  for (const auto& r : requests) {
    wanted[r.id] = r.max_new_tokens;
    scheduler.add(r);
  }
  RunResult result;
  while (!scheduler.idle()) {
    const StepPlan plan = scheduler.plan();
    EXPECT_FALSE(plan.empty()) << "no progress at step " << result.steps;
    if (plan.empty()) break;
    if (on_plan) on_plan(plan);
    for (std::uint64_t id : plan.preempted) slot_of.erase(id);
    // Token budget, counts, decode chunks first.
    int total = 0;
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
      const SeqChunk& c = plan.chunks[i];
      total += static_cast<int>(c.tokens.size());
      if (static_cast<int>(i) < plan.decode_tokens) {
        EXPECT_EQ(c.tokens.size(), 1u);
        EXPECT_GT(c.start_position, 0);
        EXPECT_TRUE(c.samples);
        EXPECT_TRUE(c.is_decode());
      }
      const int end = c.start_position + static_cast<int>(c.tokens.size());
      EXPECT_EQ(static_cast<int>(c.block_table.size()), (end + cfg.block_size - 1) / cfg.block_size);
      EXPECT_GE(c.slot, 0);
      EXPECT_LT(c.slot, cfg.max_running);
      const auto known = slot_of.find(c.seq_id);
      if (known != slot_of.end()) {
        EXPECT_EQ(known->second, c.slot) << "slot of sequence " << c.seq_id << " changed while running";
      } else {
        slot_of[c.seq_id] = c.slot;
      }
    }
    EXPECT_EQ(total, plan.total_tokens());
    EXPECT_LE(plan.total_tokens(), cfg.max_step_tokens);
    // Distinct sequences, slots and blocks within the step.
    std::set<std::uint64_t> ids;
    std::set<int> slots;
    std::set<std::int32_t> blocks;
    std::size_t block_count = 0;
    for (const SeqChunk& c : plan.chunks) {
      ids.insert(c.seq_id);
      slots.insert(c.slot);
      blocks.insert(c.block_table.begin(), c.block_table.end());
      block_count += c.block_table.size();
    }
    EXPECT_EQ(ids.size(), plan.chunks.size());
    EXPECT_EQ(slots.size(), plan.chunks.size());
    EXPECT_EQ(blocks.size(), block_count) << "two sequences share a KV block";
    EXPECT_LE(static_cast<int>(block_count), cfg.num_blocks);
    EXPECT_LE(scheduler.running(), cfg.max_running);
    result.max_running = std::max(result.max_running, scheduler.running());

    const auto sampled = executor.execute(plan);
    for (const SequenceOutput& out : scheduler.complete(plan, sampled)) {
      auto& got = result.tokens[out.seq_id];
      got.push_back(out.token);
      EXPECT_EQ(out.generated, static_cast<int>(got.size()));
      EXPECT_EQ(out.finished, out.generated == wanted[out.seq_id]);
      if (out.finished) slot_of.erase(out.seq_id);
    }
    ++result.steps;
    EXPECT_LT(result.steps, 100000);
    if (result.steps >= 100000) break;
  }
  EXPECT_EQ(scheduler.free_blocks(), cfg.num_blocks) << "KV blocks leaked";
  EXPECT_EQ(scheduler.running(), 0);
  EXPECT_EQ(scheduler.waiting(), 0);
  for (const auto& [id, n] : wanted) EXPECT_EQ(static_cast<int>(result.tokens[id].size()), n) << id;
  result.preemptions = scheduler.preemptions();
  return result;
}

std::vector<SequenceRequest> mixed_requests(int count, int vocab = 512) {
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < count; ++i) {
    SequenceRequest r;
    r.id = 100 + static_cast<std::uint64_t>(i);
    r.prompt = prompt_of(r.id, 1 + (i * 37) % 90, vocab);
    r.max_new_tokens = 1 + (i * 13) % 25;
    requests.push_back(r);
  }
  return requests;
}

std::string invalid_argument_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no invalid_argument)";
}

SchedulerConfig small_config() {
  SchedulerConfig c;
  c.block_size = 16;
  c.num_blocks = 64;
  c.max_step_tokens = 64;
  c.max_running = 8;
  c.max_sequence_tokens = 512;
  return c;
}

TEST(Scheduler, RejectsUnusableConfigurationsNamingTheField) {
  const std::pair<const char*, std::function<void(SchedulerConfig&)>> cases[] = {
      {"block_size", [](SchedulerConfig& c) { c.block_size = 0; }},
      {"num_blocks", [](SchedulerConfig& c) { c.num_blocks = 0; }},
      {"max_step_tokens", [](SchedulerConfig& c) { c.max_step_tokens = 0; }},
      {"max_running", [](SchedulerConfig& c) { c.max_running = -1; }},
      {"max_sequence_tokens", [](SchedulerConfig& c) { c.max_sequence_tokens = -5; }},
  };
  for (const auto& [field, spoil] : cases) {
    SchedulerConfig c = small_config();
    spoil(c);
    const std::string message = invalid_argument_of([&] { Scheduler s(c); });
    EXPECT_NE(message.find(field), std::string::npos) << message;
  }
}

TEST(Scheduler, RejectsSequencesThatCanNeverRun) {
  Scheduler s(small_config());
  const std::string too_long = invalid_argument_of([&] { s.add({1, prompt_of(1, 500), 20}); });
  EXPECT_NE(too_long.find("sequence 1"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("500 input + 20 output = 520 tokens"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("max_sequence_tokens"), std::string::npos) << too_long;

  SchedulerConfig small_cache = small_config();
  small_cache.num_blocks = 4;
  Scheduler t(small_cache);
  EXPECT_NO_THROW(t.add({2, prompt_of(2, 60), 5}));  // positions 0..63: exactly 4 blocks
  const std::string blocks = invalid_argument_of([&] { t.add({3, prompt_of(3, 60), 6}); });
  EXPECT_NE(blocks.find("need 5 KV-cache blocks of 16 tokens"), std::string::npos) << blocks;
  EXPECT_NE(blocks.find("4 blocks (64 tokens)"), std::string::npos) << blocks;

  EXPECT_NE(invalid_argument_of([&] { s.add({4, {}, 5}); }).find("at least 1"), std::string::npos);
  EXPECT_NE(invalid_argument_of([&] { s.add({5, prompt_of(5, 3), 0}); }).find("output"), std::string::npos);
  s.add({6, prompt_of(6, 3), 2});
  EXPECT_NE(invalid_argument_of([&] { s.add({6, prompt_of(6, 3), 2}); }).find("already"), std::string::npos);

  SchedulerConfig unchunked = small_config();
  unchunked.chunked_prefill = false;
  Scheduler u(unchunked);
  EXPECT_NE(invalid_argument_of([&] { u.add({7, prompt_of(7, 65), 2}); }).find("chunked_prefill"), std::string::npos);
}

TEST(Scheduler, EmptyWhenIdle) {
  Scheduler s(small_config());
  EXPECT_TRUE(s.idle());
  EXPECT_TRUE(s.plan().empty());
  EXPECT_EQ(s.free_blocks(), 64);
}

TEST(Scheduler, BudgetDecodeFirstAndNoLeaks) {
  for (bool chunked : {true, false}) {
    SchedulerConfig c = small_config();
    c.chunked_prefill = chunked;
    c.max_step_tokens = 96;
    Scheduler s(c);
    FakeExecutor executor;
    int decode_steps_with_prefill = 0;
    const RunResult r = run_all(s, executor, mixed_requests(40), [&](const StepPlan& plan) {
      if (plan.decode_tokens > 0 && plan.prefill_tokens > 0) ++decode_steps_with_prefill;
    });
    EXPECT_GT(decode_steps_with_prefill, 0) << "prefill and decode never shared a step";
    EXPECT_EQ(r.max_running, 8);
    EXPECT_EQ(r.preemptions, 0);  // 64 blocks hold 8 sequences of at most 114 tokens
  }
}

TEST(Scheduler, EveryDecodingSequenceDecodesEachStep) {
  Scheduler s(small_config());
  FakeExecutor executor;
  std::set<std::uint64_t> decoding;  // sampled at least once and not finished
  std::vector<SequenceRequest> requests = mixed_requests(20);
  std::map<std::uint64_t, int> left;
  for (const auto& r : requests) left[r.id] = r.max_new_tokens;
  run_all(s, executor, requests, [&](const StepPlan& plan) {
    std::set<std::uint64_t> decoded;
    for (int i = 0; i < plan.decode_tokens; ++i) decoded.insert(plan.chunks[static_cast<std::size_t>(i)].seq_id);
    EXPECT_EQ(decoded, decoding);
    for (const SeqChunk& c : plan.chunks) {
      if (!c.samples) continue;
      if (--left[c.seq_id] == 0) {
        decoding.erase(c.seq_id);
      } else {
        decoding.insert(c.seq_id);
      }
    }
  });
}

TEST(Scheduler, ChunksLongPromptsUnderTheBudget) {
  SchedulerConfig c = small_config();
  c.max_step_tokens = 32;
  Scheduler s(c);
  s.add({1, prompt_of(1, 100), 3});
  std::vector<int> sizes;
  FakeExecutor executor;
  while (!s.idle()) {
    const StepPlan plan = s.plan();
    ASSERT_EQ(plan.chunks.size(), 1u);
    sizes.push_back(static_cast<int>(plan.chunks[0].tokens.size()));
    EXPECT_EQ(plan.chunks[0].samples, plan.chunks[0].start_position + plan.chunks[0].tokens.size() >= 100u);
    s.complete(plan, executor.execute(plan));
  }
  EXPECT_EQ(sizes, (std::vector<int>{32, 32, 32, 4, 1, 1}));
  EXPECT_EQ(s.free_blocks(), 64);
}

TEST(Scheduler, UnchunkedPrefillWaitsForARoomyStep) {
  for (bool chunked : {false, true}) {
    SchedulerConfig c = small_config();
    c.max_step_tokens = 40;
    c.chunked_prefill = chunked;
    Scheduler s(c);
    s.add({1, prompt_of(1, 30), 3});
    s.add({2, prompt_of(2, 40), 2});
    FakeExecutor executor;
    std::vector<std::pair<int, int>> steps;  // (decode, prefill) tokens
    while (!s.idle()) {
      const StepPlan plan = s.plan();
      steps.emplace_back(plan.decode_tokens, plan.prefill_tokens);
      s.complete(plan, executor.execute(plan));
    }
    const std::vector<std::pair<int, int>> expected =
        chunked ? std::vector<std::pair<int, int>>{{0, 40}, {1, 30}, {2, 0}}
                // the 40-token prompt fits no step holding a decode: it waits for sequence 1 to finish
                : std::vector<std::pair<int, int>>{{0, 30}, {1, 0}, {1, 0}, {0, 40}, {1, 0}};
    EXPECT_EQ(steps, expected) << (chunked ? "chunked" : "unchunked");
  }
}

TEST(Scheduler, SlotsAreLowestFreeAndStable) {
  SchedulerConfig c = small_config();
  c.max_running = 3;
  Scheduler s(c);
  s.add({1, prompt_of(1, 4), 2});
  s.add({2, prompt_of(2, 4), 6});
  s.add({3, prompt_of(3, 4), 6});
  s.add({4, prompt_of(4, 4), 6});
  FakeExecutor executor;
  StepPlan plan = s.plan();
  ASSERT_EQ(plan.chunks.size(), 3u);  // max_running
  EXPECT_EQ(plan.chunks[0].slot, 0);
  EXPECT_EQ(plan.chunks[1].slot, 1);
  EXPECT_EQ(plan.chunks[2].slot, 2);
  s.complete(plan, executor.execute(plan));
  plan = s.plan();  // sequence 1 produces its last token
  s.complete(plan, executor.execute(plan));
  plan = s.plan();  // sequence 4 takes slot 0; 2 and 3 keep theirs
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[0].seq_id, 2u);
  EXPECT_EQ(plan.chunks[0].slot, 1);
  EXPECT_EQ(plan.chunks[1].seq_id, 3u);
  EXPECT_EQ(plan.chunks[1].slot, 2);
  EXPECT_EQ(plan.chunks[2].seq_id, 4u);
  EXPECT_EQ(plan.chunks[2].slot, 0);
  EXPECT_FALSE(plan.chunks[2].is_decode());
}

TEST(Scheduler, PreemptsTheMostRecentlyAdmittedAndRecomputes) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 4;
  c.max_step_tokens = 64;
  c.max_running = 4;
  Scheduler s(c);
  FakeExecutor executor;
  s.add({1, prompt_of(1, 4), 9});  // at most 12 positions: 3 blocks
  s.add({2, prompt_of(2, 6), 5});  // at most 10 positions: 3 blocks
  std::map<std::uint64_t, std::vector<std::int32_t>> tokens;
  auto step = [&]() {
    StepPlan plan = s.plan();
    for (const auto& out : s.complete(plan, executor.execute(plan))) tokens[out.seq_id].push_back(out.token);
    return plan;
  };
  StepPlan plan = step();  // both prefill: 1 + 2 blocks
  EXPECT_EQ(plan.prefill_tokens, 10);
  EXPECT_EQ(s.free_blocks(), 1);
  step();  // 1 decodes position 4: its second block; none left
  EXPECT_EQ(s.free_blocks(), 0);
  step();           // positions 5 and 7
  plan = s.plan();  // 1 at position 6, then 2 at position 8 needs a block: 1 is the other one, it goes
  ASSERT_EQ(plan.preempted, (std::vector<std::uint64_t>{1}));
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq_id, 2u);
  EXPECT_EQ(plan.decode_tokens, 1);
  EXPECT_EQ(plan.prefill_tokens, 0);
  EXPECT_EQ(s.waiting(), 1);
  EXPECT_EQ(s.running(), 1);
  EXPECT_EQ(s.preemptions(), 1);
  for (const auto& out : s.complete(plan, executor.execute(plan))) tokens[out.seq_id].push_back(out.token);
  while (!s.idle()) step();
  EXPECT_EQ(s.free_blocks(), 4);

  // The same tokens as with a cache large enough for both.
  SchedulerConfig roomy = c;
  roomy.num_blocks = 16;
  Scheduler r(roomy);
  const RunResult expected = run_all(r, executor, {{1, prompt_of(1, 4), 9}, {2, prompt_of(2, 6), 5}});
  EXPECT_EQ(expected.preemptions, 0);
  EXPECT_EQ(tokens, expected.tokens);
}

// Requests, a reference model of `kv_blocks` blocks of 8 tokens, and the greedy tokens it produces.
RunResult run_reference(SchedulerConfig config, const std::vector<SequenceRequest>& requests) {
  ReferenceOptions options;
  options.kv_block_size = config.block_size;
  options.kv_blocks = config.num_blocks;
  options.max_running = config.max_running;
  options.max_step_tokens = config.max_step_tokens;
  ReferenceModel model(TransformerConfig::tiny(), options);
  Scheduler s(config);
  return run_all(s, model, requests);
}

std::vector<SequenceRequest> reference_requests() {
  std::vector<SequenceRequest> requests;
  for (int i = 0; i < 6; ++i) {
    SequenceRequest r;
    r.id = 1 + static_cast<std::uint64_t>(i);
    r.prompt = prompt_of(r.id, 5 + 9 * i);
    r.max_new_tokens = 6 + 3 * i;
    requests.push_back(r);
  }
  return requests;
}

TEST(Scheduler, PreemptionAndChunkingDoNotChangeReferenceTokens) {
  SchedulerConfig base;
  base.block_size = 8;
  base.num_blocks = 64;
  base.max_step_tokens = 256;
  base.max_running = 8;
  base.max_sequence_tokens = 1024;
  const RunResult expected = run_reference(base, reference_requests());
  EXPECT_EQ(expected.preemptions, 0);

  SchedulerConfig tight = base;
  tight.num_blocks = 12;  // the longest sequence needs 10
  const RunResult preempted = run_reference(tight, reference_requests());
  EXPECT_GT(preempted.preemptions, 0);
  EXPECT_EQ(preempted.tokens, expected.tokens);

  SchedulerConfig chunked = base;
  chunked.max_step_tokens = 16;
  const RunResult small_chunks = run_reference(chunked, reference_requests());
  EXPECT_EQ(small_chunks.tokens, expected.tokens);

  SchedulerConfig unchunked = base;
  unchunked.chunked_prefill = false;
  unchunked.max_step_tokens = 64;
  const RunResult whole = run_reference(unchunked, reference_requests());
  EXPECT_EQ(whole.tokens, expected.tokens);

  SchedulerConfig tight_unchunked = tight;
  tight_unchunked.chunked_prefill = false;
  tight_unchunked.max_step_tokens = 64;  // some recompute contexts exceed a whole step
  const RunResult tu = run_reference(tight_unchunked, reference_requests());
  EXPECT_GT(tu.preemptions, 0);
  EXPECT_EQ(tu.tokens, expected.tokens);

  SchedulerConfig one_at_a_time = base;
  one_at_a_time.max_running = 1;
  EXPECT_EQ(run_reference(one_at_a_time, reference_requests()).tokens, expected.tokens);
}

TEST(Scheduler, HeavyPreemptionNeverLeaks) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 30;
  c.max_step_tokens = 48;
  c.max_running = 16;
  Scheduler s(c);
  FakeExecutor executor;
  auto requests = mixed_requests(60);
  for (auto& r : requests) r.prompt.resize(std::min<std::size_t>(r.prompt.size(), 80));
  const RunResult r = run_all(s, executor, requests);
  EXPECT_GT(r.preemptions, 0);

  SchedulerConfig roomy = c;
  roomy.num_blocks = 4096;
  Scheduler t(roomy);
  EXPECT_EQ(run_all(t, executor, requests).tokens, r.tokens);
}

TEST(Scheduler, CompleteChecksTheSampledCount) {
  Scheduler s(small_config());
  s.add({1, prompt_of(1, 4), 2});
  const StepPlan plan = s.plan();
  EXPECT_THROW(s.complete(plan, {}), std::invalid_argument);
}

}  // namespace
}  // namespace gpuscout::infer

namespace gpuscout::infer {
namespace {

TEST(Scheduler, PendingTokensFeedTheNextDecodeAndResolveInPlace) {
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 64;
  c.max_step_tokens = 64;
  Scheduler s(c);
  s.add(SequenceRequest{1, prompt_of(1, 5), 3});
  s.add(SequenceRequest{2, prompt_of(2, 2), 1});
  const StepPlan prefill = s.plan();
  const auto pending = s.complete_pending(prefill);
  ASSERT_EQ(pending.size(), 2u);
  for (const auto& out : pending) EXPECT_EQ(out.token, kPendingToken);
  EXPECT_TRUE(pending[1].finished);  // one token asked: done before its value is known
  EXPECT_EQ(s.running(), 1);

  // The next plan is made before the prefill's tokens are back: its decode input is pending.
  const StepPlan decode = s.plan();
  ASSERT_EQ(decode.chunks.size(), 1u);
  EXPECT_EQ(decode.chunks[0].seq_id, 1u);
  EXPECT_EQ(decode.chunks[0].start_position, 5);
  EXPECT_EQ(decode.chunks[0].tokens, std::vector<std::int32_t>{kPendingToken});

  EXPECT_THROW(s.resolve(prefill, {11}), std::invalid_argument);  // two sampling chunks
  s.resolve(prefill, {11, 22});
  EXPECT_THROW(s.resolve(prefill, {11, 22}), std::logic_error);  // nothing pending there any more
  (void)s.complete(decode, {33});
  const StepPlan last = s.plan();
  ASSERT_EQ(last.chunks.size(), 1u);
  EXPECT_EQ(last.chunks[0].tokens, std::vector<std::int32_t>{33});
  (void)s.complete(last, {44});
  EXPECT_TRUE(s.idle());
}

// The default Executor::submit resolves a pending token from the step submitted before it.
TEST(Executor, DefaultSubmitTakesPendingTokensFromThePreviousStep) {
  FakeExecutor direct, piped;
  SchedulerConfig c;
  c.block_size = 4;
  c.num_blocks = 64;
  c.max_step_tokens = 64;
  Scheduler a(c), b(c);
  for (std::uint64_t id : {1u, 2u}) {
    a.add(SequenceRequest{id, prompt_of(id, 6), 5});
    b.add(SequenceRequest{id, prompt_of(id, 6), 5});
  }
  std::map<std::uint64_t, std::vector<std::int32_t>> want, got;
  while (!a.idle()) {
    const StepPlan p = a.plan();
    for (const auto& o : a.complete(p, direct.execute(p))) want[o.seq_id].push_back(o.token);
  }
  // Depth one: plan n + 1 is submitted before step n is collected.
  std::optional<std::pair<StepPlan, std::vector<SequenceOutput>>> in_flight;
  auto collect = [&] {
    const auto tokens = piped.collect();
    b.resolve(in_flight->first, tokens);
    for (std::size_t i = 0; i < tokens.size(); ++i) got[in_flight->second[i].seq_id].push_back(tokens[i]);
    in_flight.reset();
  };
  while (!b.idle() || in_flight) {
    StepPlan p = b.plan();
    if (p.empty()) {
      collect();
      continue;
    }
    piped.submit(p);
    auto outputs = b.complete_pending(p);
    if (in_flight) collect();
    in_flight.emplace(std::move(p), std::move(outputs));
  }
  EXPECT_EQ(got, want);
  EXPECT_THROW((void)piped.collect(), std::logic_error);
}

// The serve benchmark's static batch (32 x 512 in, 8 out here) under the two budgets compared on the
// H200 (bench/NOTES.md): 16384 tokens prefill all prompts in step 1; with 8192, step 2 also carries the first
// group's decode tokens, so the last prompt's final 16 tokens spill into step 3 and that request
// finishes one step after the others.
TEST(Scheduler, StaticBatchStepsUnderTheOfflineAndOnlineBudgets) {
  for (const int budget : {16384, 8192}) {
    SchedulerConfig c;
    c.block_size = 16;
    c.num_blocks = 32 * 33;  // 520 positions: 33 blocks each, no preemption
    c.max_step_tokens = budget;
    c.max_running = 32;
    c.max_sequence_tokens = 520;
    Scheduler scheduler(c);
    FakeExecutor executor;
    std::vector<SequenceRequest> requests;
    for (std::uint64_t id = 0; id < 32; ++id) requests.push_back({id, prompt_of(id, 512), 8});
    std::vector<int> prefill_tokens;
    const RunResult result = run_all(scheduler, executor, requests,
                                     [&](const StepPlan& plan) { prefill_tokens.push_back(plan.prefill_tokens); });
    ASSERT_EQ(result.tokens.size(), 32u) << "budget " << budget;
    EXPECT_EQ(result.preemptions, 0) << "budget " << budget;
    if (budget == 16384) {
      EXPECT_EQ(prefill_tokens.front(), 16384);
      EXPECT_EQ(result.steps, 1 + 7) << "one prefill step, then 7 decode steps";
    } else {
      ASSERT_GE(prefill_tokens.size(), 3u);
      EXPECT_EQ(prefill_tokens[0], 8192);
      EXPECT_EQ(prefill_tokens[1], 8192 - 16) << "step 2 holds the first 16 requests' decode tokens";
      EXPECT_EQ(prefill_tokens[2], 16) << "the last prompt's remainder";
      EXPECT_EQ(result.steps, 3 + 7) << "the straggler's 7 decode steps follow its step-3 prefill";
    }
  }
}

}  // namespace
}  // namespace gpuscout::infer
