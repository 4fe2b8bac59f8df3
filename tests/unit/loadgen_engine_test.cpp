// The load generator driving the CPU serving engine (ReferenceModel under EngineSut) on a virtual
// clock: the deterministic end-to-end path CI runs in place of the GPU.
#include <gtest/gtest.h>

#include "gpuscout/infer/engine_sut.hpp"
#include "gpuscout/infer/reference_model.hpp"
#include "gpuscout/serve/load_records.hpp"
#include "gpuscout/serve/loadgen.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::serve {
namespace {

infer::SchedulerConfig engine_config() {
  infer::SchedulerConfig c;
  c.block_size = 8;
  c.num_blocks = 64;
  c.max_step_tokens = 64;
  c.max_running = 8;
  c.max_sequence_tokens = 1024;
  return c;
}

infer::ReferenceOptions options_for(const infer::SchedulerConfig& c) {
  infer::ReferenceOptions o;
  o.kv_block_size = c.block_size;
  o.kv_blocks = c.num_blocks;
  o.max_running = c.max_running;
  o.max_step_tokens = c.max_step_tokens;
  return o;
}

// 5 ms per step plus 0.1 ms per decode token and 0.05 ms per prefill token.
infer::StepCost step_cost() {
  return {0.005, 0.0001, 0.00005};
}

LoadSettings server_settings(double rate) {
  LoadSettings s;
  s.scenario = Scenario::server;
  s.target_rate = rate;
  s.lengths.kind = LengthSpec::Kind::uniform;
  s.lengths.input_min = 8;
  s.lengths.input_max = 24;
  s.lengths.output_min = 2;
  s.lengths.output_max = 8;
  s.min_requests = 16;
  s.warmup_requests = 2;
  s.ttft_bound_ms = 50;
  s.tpot_bound_ms = 20;
  s.seed = 3;
  return s;
}

TEST(LoadgenEngine, ServerAtALowRateIsValid) {
  const infer::SchedulerConfig config = engine_config();
  const infer::TransformerConfig tiny = infer::TransformerConfig::tiny();
  infer::ReferenceModel model(tiny, options_for(config));
  VirtualClock clock;
  infer::EngineSut sut(model, config, tiny.vocab, 1, &clock, step_cost());

  const LoadSummary s = run_load(sut, clock, server_settings(5));
  EXPECT_TRUE(s.valid) << (s.invalid_reasons.empty() ? "" : s.invalid_reasons.front());
  EXPECT_EQ(s.requests, 16);
  EXPECT_EQ(s.finished, 16);
  EXPECT_EQ(s.sut_name, "cpu-reference");
  // Every request got its output length from the engine.
  for (const RequestTiming& t : s.timings) {
    ASSERT_TRUE(t.finished);
    EXPECT_EQ(sut.outputs().at(t.id).size(), static_cast<std::size_t>(t.output_tokens)) << t.id;
  }
  // At 5 requests/s requests rarely overlap: TTFT is about one prefill step (5 ms + 0.05 ms per
  // prompt token), a later token about one decode step.
  EXPECT_GE(s.ttft_ms.p50, 5.0 + 8 * 0.05 - 1e-9);
  EXPECT_LE(s.ttft_ms.p50, 2 * (5.0 + 24 * 0.05 + 8 * 0.1));
  EXPECT_GE(s.tpot_ms.p50, 5.1 - 1e-9);
  EXPECT_LE(s.tpot_ms.p50, 6.0);
  EXPECT_GT(s.output_tokens_per_s, 0);
  EXPECT_DOUBLE_EQ(s.goodput_fraction, 1.0);
  EXPECT_EQ(to_record(s, "serve/tiny/server").outcome, results::Outcome::passed);

  // The same run again on a fresh engine and clock gives the same timings.
  infer::ReferenceModel model2(tiny, options_for(config));
  VirtualClock clock2;
  infer::EngineSut sut2(model2, config, tiny.vocab, 1, &clock2, step_cost());
  const LoadSummary again = run_load(sut2, clock2, server_settings(5));
  ASSERT_EQ(again.timings.size(), s.timings.size());
  for (std::size_t i = 0; i < s.timings.size(); ++i) {
    EXPECT_EQ(again.timings[i].token_times_s, s.timings[i].token_times_s);
  }
}

TEST(LoadgenEngine, RequestsBeyondTheContextAreRejectedBeforeTheRun) {
  const infer::SchedulerConfig config = engine_config();
  const infer::TransformerConfig tiny = infer::TransformerConfig::tiny();
  infer::ReferenceModel model(tiny, options_for(config));
  VirtualClock clock;
  infer::EngineSut sut(model, config, tiny.vocab, 1, &clock, step_cost());
  LoadSettings settings = server_settings(5);
  settings.lengths.kind = LengthSpec::Kind::fixed;
  settings.lengths.input_min = settings.lengths.input_max = 1020;
  settings.lengths.output_min = settings.lengths.output_max = 10;
  try {
    run_load(sut, clock, settings);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("1020 input + 10 output tokens"), std::string::npos) << message;
    EXPECT_NE(message.find("1024"), std::string::npos) << message;  // the engine's limit, from its reason
  }
  EXPECT_TRUE(sut.idle());
}

}  // namespace
}  // namespace gpuscout::serve
