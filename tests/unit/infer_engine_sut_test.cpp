#include "gpuscout/infer/engine_sut.hpp"

#include <gtest/gtest.h>

#include <map>

#include "gpuscout/infer/reference_model.hpp"
#include "gpuscout/infer/weights.hpp"

namespace gpuscout::infer {
namespace {

ReferenceOptions options_for(const SchedulerConfig& c) {
  ReferenceOptions o;
  o.kv_block_size = c.block_size;
  o.kv_blocks = c.num_blocks;
  o.max_running = c.max_running;
  o.max_step_tokens = c.max_step_tokens;
  return o;
}

SchedulerConfig engine_config() {
  SchedulerConfig c;
  c.block_size = 8;
  c.num_blocks = 48;
  c.max_step_tokens = 64;
  c.max_running = 6;
  c.max_sequence_tokens = 1024;
  return c;
}

std::vector<serve::Request> requests(int n) {
  std::vector<serve::Request> out;
  for (int i = 0; i < n; ++i) {
    serve::Request r;
    r.id = 1000 + static_cast<std::uint64_t>(i);
    r.input_tokens = 3 + (i * 17) % 60;
    r.output_tokens = 1 + (i * 5) % 12;
    out.push_back(r);
  }
  return out;
}

struct Drive {
  std::map<std::uint64_t, int> tokens;    // tokens seen per request
  std::map<std::uint64_t, int> finished;  // finished events per request
  int steps = 0;
};

// The loop a load generator runs: submit what has arrived, step, collect events.
Drive drive(EngineSut& sut, const std::vector<serve::Request>& all, int submit_every = 0) {
  Drive d;
  std::size_t next = 0;
  auto submit_some = [&](std::size_t count) {
    for (std::size_t i = 0; i < count && next < all.size(); ++i) sut.submit(all[next++]);
  };
  submit_some(submit_every == 0 ? all.size() : 1);
  while (!sut.idle() || next < all.size()) {
    if (submit_every > 0 && d.steps % submit_every == 0) submit_some(1);
    std::vector<serve::TokenEvent> events;
    sut.step(events);
    for (const auto& e : events) {
      EXPECT_EQ(d.finished[e.request_id], 0) << "event after the last token of " << e.request_id;
      d.tokens[e.request_id] += e.tokens;
      if (e.finished) ++d.finished[e.request_id];
    }
    ++d.steps;
    if (d.steps > 10000) {
      ADD_FAILURE() << "no end";
      break;
    }
  }
  return d;
}

TEST(EngineSut, ServesEveryRequestToItsLength) {
  const SchedulerConfig config = engine_config();
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  EngineSut sut(model, config, 512);
  EXPECT_EQ(sut.name(), "cpu-reference");
  EXPECT_TRUE(sut.idle());
  const auto all = requests(14);
  const Drive d = drive(sut, all);
  std::int64_t prompt_tokens = 0, output_tokens = 0;
  for (const auto& r : all) {
    EXPECT_EQ(d.tokens.at(r.id), r.output_tokens) << r.id;
    EXPECT_EQ(d.finished.at(r.id), 1) << r.id;
    ASSERT_EQ(sut.outputs().at(r.id).size(), static_cast<std::size_t>(r.output_tokens));
    for (std::int32_t t : sut.outputs().at(r.id)) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 512);
    }
    prompt_tokens += r.input_tokens;
    output_tokens += r.output_tokens;
  }
  const EngineSutStats& s = sut.stats();
  EXPECT_EQ(s.steps, d.steps);
  EXPECT_EQ(s.preemptions, 0);
  EXPECT_EQ(s.max_running, 6);
  EXPECT_EQ(s.prefill_tokens, prompt_tokens);
  EXPECT_EQ(s.decode_tokens, output_tokens - static_cast<std::int64_t>(all.size()));  // the first comes from prefill
}

TEST(EngineSut, OutputsDoNotDependOnBatchingArrivalsOrPreemption) {
  const auto all = requests(10);
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> expected;
  {
    SchedulerConfig one = engine_config();
    one.max_running = 1;
    ReferenceModel model(TransformerConfig::tiny(), options_for(one));
    EngineSut sut(model, one, 512);
    drive(sut, all);
    expected = sut.outputs();
  }
  SchedulerConfig tight = engine_config();
  tight.num_blocks = 12;  // the longest request needs 10 blocks of 8
  tight.max_step_tokens = 24;
  ReferenceModel model(TransformerConfig::tiny(), options_for(tight));
  EngineSut sut(model, tight, 512);
  drive(sut, all, /*submit_every=*/3);
  EXPECT_GT(sut.stats().preemptions, 0);
  EXPECT_EQ(sut.outputs(), expected);
}

TEST(EngineSut, PipelinedStepsGiveTheSameTokens) {
  const auto all = requests(10);
  SchedulerConfig tight = engine_config();
  tight.num_blocks = 12;  // preemption and recompute while steps are in flight
  tight.max_step_tokens = 24;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> expected;
  std::int64_t steps = 0;
  {
    ReferenceModel model(TransformerConfig::tiny(), options_for(tight));
    EngineSut sut(model, tight, 512);
    drive(sut, all, /*submit_every=*/3);
    expected = sut.outputs();
    steps = sut.stats().steps;
  }
  ReferenceModel model(TransformerConfig::tiny(), options_for(tight));
  EngineSut sut(model, tight, 512);
  sut.set_pipelined(true);
  EXPECT_TRUE(sut.pipelined());
  const Drive d = drive(sut, all, /*submit_every=*/3);
  EXPECT_GT(sut.stats().preemptions, 0);
  EXPECT_EQ(sut.outputs(), expected);
  for (const auto& r : all) EXPECT_EQ(d.finished.at(r.id), 1) << r.id;
  // Arrivals are planned a step later, so the step counts may differ, but not by much.
  EXPECT_NEAR(static_cast<double>(sut.stats().steps), static_cast<double>(steps), 0.2 * steps);
  EXPECT_TRUE(sut.idle());
}

TEST(EngineSut, DestroyedWithAStepInFlightCollectsIt) {
  const SchedulerConfig config = engine_config();
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  {
    EngineSut sut(model, config, 512);
    sut.set_pipelined(true);
    sut.submit(requests(1)[0]);
    std::vector<serve::TokenEvent> events;
    sut.step(events);  // submitted, not collected: no tokens yet
    EXPECT_TRUE(events.empty());
    EXPECT_FALSE(sut.idle());
    EXPECT_THROW(sut.set_pipelined(false), std::logic_error);
  }
  EXPECT_THROW((void)model.collect(), std::logic_error);  // nothing left behind for the next SUT
}

TEST(EngineSut, PromptsComeFromPromptToken) {
  // A one-token request's output is the greedy token after prompt_token(seed, id, 0, vocab).
  SchedulerConfig config = engine_config();
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  EngineSut sut(model, config, 512, /*prompt_seed=*/42);
  serve::Request r;
  r.id = 5;
  r.input_tokens = 1;
  r.output_tokens = 1;
  drive(sut, {r});

  ReferenceModel direct(TransformerConfig::tiny(), options_for(config));
  StepPlan plan;
  SeqChunk c;
  c.seq_id = 5;
  c.tokens = {prompt_token(42, 5, 0, 512)};
  c.block_table = {0};
  c.samples = true;
  plan.chunks.push_back(c);
  plan.prefill_tokens = 1;
  EXPECT_EQ(sut.outputs().at(5), direct.execute(plan));
}

TEST(EngineSut, VirtualClockAdvancesByTheStepCost) {
  const SchedulerConfig config = engine_config();
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  serve::VirtualClock clock;
  StepCost cost;
  cost.fixed_s = 0.004;
  cost.per_decode_token_s = 0.0005;
  cost.per_prefill_token_s = 0.0001;
  EngineSut sut(model, config, 512, 1, &clock, cost);
  std::vector<serve::TokenEvent> events;
  sut.step(events);  // idle: no step, no time
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(clock.now_s(), 0.0);
  drive(sut, requests(5));
  const EngineSutStats& s = sut.stats();
  EXPECT_NEAR(clock.now_s(),
              cost.fixed_s * static_cast<double>(s.steps) +
                  cost.per_decode_token_s * static_cast<double>(s.decode_tokens) +
                  cost.per_prefill_token_s * static_cast<double>(s.prefill_tokens),
              1e-12);
}

TEST(EngineSut, RejectsWhatCanNeverBeServed) {
  SchedulerConfig config = engine_config();
  config.max_sequence_tokens = 300;
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  EngineSut sut(model, config, 512);
  serve::Request ok{1, 200, 50, 0};
  EXPECT_EQ(sut.reject_reason(ok), std::nullopt);

  const serve::Request too_long{2, 280, 40, 0};
  const auto context = sut.reject_reason(too_long);
  ASSERT_TRUE(context);
  EXPECT_NE(context->find("request 2"), std::string::npos) << *context;
  EXPECT_NE(context->find("280 input + 40 output = 320 tokens"), std::string::npos) << *context;
  EXPECT_NE(context->find("context of 300"), std::string::npos) << *context;
  EXPECT_THROW(sut.submit(too_long), std::invalid_argument);

  config.max_sequence_tokens = 0;  // only the cache limits
  config.num_blocks = 10;
  ReferenceModel small(TransformerConfig::tiny(), options_for(config));
  EngineSut tight(small, config, 512);
  const auto blocks = tight.reject_reason({3, 70, 20, 0});
  ASSERT_TRUE(blocks);
  EXPECT_NE(blocks->find("need 12 KV-cache blocks of 8 tokens"), std::string::npos) << *blocks;
  EXPECT_NE(blocks->find("10 blocks (80 tokens)"), std::string::npos) << *blocks;
  EXPECT_EQ(tight.reject_reason({4, 70, 11, 0}), std::nullopt);  // 80 positions cached: exactly 10 blocks
  EXPECT_TRUE(tight.reject_reason({5, 0, 4, 0}));
  EXPECT_TRUE(tight.reject_reason({6, 4, 0, 0}));
  EXPECT_TRUE(tight.idle());
}

TEST(EngineSut, ConfigurationMustFitTheExecutor) {
  const SchedulerConfig config = engine_config();
  ReferenceModel model(TransformerConfig::tiny(), options_for(config));
  SchedulerConfig other_block = config;
  other_block.block_size = 16;
  EXPECT_THROW(EngineSut(model, other_block, 512), std::invalid_argument);
  SchedulerConfig more_blocks = config;
  more_blocks.num_blocks = 49;
  EXPECT_THROW(EngineSut(model, more_blocks, 512), std::invalid_argument);
  SchedulerConfig bigger_batch = config;
  bigger_batch.max_running = 7;
  EXPECT_THROW(EngineSut(model, bigger_batch, 512), std::invalid_argument);
  SchedulerConfig bigger_step = config;
  bigger_step.max_step_tokens = 65;
  EXPECT_THROW(EngineSut(model, bigger_step, 512), std::invalid_argument);
  EXPECT_THROW(EngineSut(model, config, 0), std::invalid_argument);
  SchedulerConfig fewer_blocks = config;
  fewer_blocks.num_blocks = 20;  // using part of the executor's cache is fine
  EXPECT_NO_THROW(EngineSut(model, fewer_blocks, 512));
}

}  // namespace
}  // namespace gpuscout::infer
