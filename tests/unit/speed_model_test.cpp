// Speed model: each formula on its own (GEMM roofline with calibrated efficiency, static batch, pipeline
// bubble, MFU definition, continuous-batching search) and the framework profiles.
#include "gpuscout/model/speed.hpp"

#include <gtest/gtest.h>

#include <string>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"
#include "model_test_data.hpp"

namespace gpuscout::model {
namespace {

using specs::Precision;

using test::catalog;
using test::context;
using test::db;
using test::frameworks;

// Llama-3.1-8B with `weights` ("bf16", "fp8", ...) and the setup's other defaults.
InferenceSetup llama_8b(const char* weights) {
  InferenceSetup s;
  s.arch = catalog().get("llama-3.1-8b").arch;
  s.weights = parse_quantization(weights, "--precision");
  return s;
}

// The seconds of op `key` in a forward step of `batch` sequences of `tokens` new tokens after `context`
// cached ones; -1 where the step has no such op.
double op_seconds(const SpeedContext& c, const InferenceSetup& s, int batch, int tokens, int context,
                  const std::string& key) {
  for (const auto& op : forward_step(c, s, batch, tokens, context).ops) {
    if (op.key == key) return op.seconds;
  }
  return -1;
}

TEST(Frameworks, ProfilesLoadWithSources) {
  ASSERT_EQ(frameworks().size(), 6u);
  for (const auto& f : frameworks()) EXPECT_FALSE(f.source.empty()) << f.key;
  EXPECT_EQ(find_framework(frameworks(), "vLLM", "--framework").key, "vllm");
  EXPECT_EQ(find_framework(frameworks(), "gpuscout engine", "--framework").key, "gpuscout");
  EXPECT_THROW(find_framework(frameworks(), "nope", "--framework"), UsageError);
}

TEST(Speed, GemmComputeBoundUsesCalibratedEfficiency) {
  const auto ctx = context("H200-SXM-141GB");
  const auto op = gemm_time(ctx, Precision::bf16, "g", 8192, 8192, 8192, 2);
  EXPECT_EQ(op.bound, "compute");
  const double eta = ctx.calibration.gemm_efficiency(Precision::bf16, 8192);
  const double peak = *ctx.gpu->peak_tflops(Precision::bf16) * 1e12;
  EXPECT_NEAR(op.seconds, 2.0 * 8192 * 8192 * 8192 / (peak * eta), 1e-9);
}

TEST(Speed, GemmAtOneTokenStreamsWeights) {
  const auto ctx = context("H200-SXM-141GB");
  const auto op = gemm_time(ctx, Precision::bf16, "g", 1, 6144, 4096, 2);
  EXPECT_EQ(op.bound, "memory");
  const double bytes = (4096.0 + 6144.0) * 2 + 6144.0 * 4096 * 2;
  EXPECT_NEAR(op.seconds, bytes / (4800e9 * ctx.calibration.weight_stream_efficiency(Precision::bf16, bytes)), 1e-12);
  // Measured on the H200: 2.9 TFLOP/s at m=1 (bench/results) -> 17.4 us; the model is within 10%.
  EXPECT_NEAR(op.seconds, 17.4e-6, 1.8e-6);
}

TEST(Speed, NoFp8OnAmpere) {
  const auto ctx = context("A100-SXM4-80GB");
  EXPECT_THROW(gemm_time(ctx, Precision::fp8, "g", 1, 1, 1, 1), UsageError);
}

TEST(Speed, DecodeIsWeightStreamingAtBatchOne) {
  const auto ctx = context("H200-SXM-141GB");
  InferenceSetup s = llama_8b("bf16");
  const auto step = forward_step(ctx, s, 1, 1, 1024);
  // ~16 GB of weights at 4.8 TB/s x 0.64 ~ 5 ms, plus 0.3 ms framework overhead.
  EXPECT_GT(step.seconds, 4.5e-3);
  EXPECT_LT(step.seconds, 6.5e-3);
}

TEST(Speed, StaticBatchComposesTtftAndTpot) {
  const auto ctx = context("H100-SXM5-80GB");
  InferenceSetup s;
  s.arch = catalog().get("llama-2-7b").arch;
  s.weights = parse_quantization("fp8", "--precision");
  const auto r = static_batch(ctx, s, 8, 512, 128);
  EXPECT_NEAR(r.total_s, r.ttft_s + 127 * r.tpot_s, 1e-12);
  EXPECT_NEAR(r.output_tokens_per_s, 8 * 128 / r.total_s, 1e-9);
  EXPECT_NEAR(r.total_tokens_per_s, 8 * 640 / r.total_s, 1e-9);
  // TP2 halves the weights per GPU and adds two all-reduces per layer.
  s.par.tp = 2;
  const auto r2 = static_batch(ctx, s, 8, 512, 128);
  bool has_ar = false;
  for (const auto& op : r2.decode_mid.ops) has_ar |= op.key == "tp_allreduce" && op.seconds > 0;
  EXPECT_TRUE(has_ar);
  EXPECT_LT(r2.tpot_s, r.tpot_s);
}

TEST(Speed, PrunedLastLayerShortensPrefillOnly) {
  // gpuscout's engine finishes the last layer of a prefill step for the sampled rows only: with 32
  // layers the prefill loses up to 1/32 of its time less the last layer's QKV (~12% of a layer's
  // GEMM FLOPs for Llama-3.1-8B); decode steps (every row samples) are unchanged.
  const auto pruned = context("H200-SXM-141GB", "gpuscout");
  auto full = pruned;
  full.framework.prunes_last_layer = false;
  ASSERT_TRUE(pruned.framework.prunes_last_layer);
  InferenceSetup s = llama_8b("bf16");
  const double ratio = forward_step(pruned, s, 32, 512, 0).seconds / forward_step(full, s, 32, 512, 0).seconds;
  EXPECT_LT(ratio, 1 - 0.8 / 32);
  EXPECT_GT(ratio, 1 - 1.0 / 32);
  EXPECT_DOUBLE_EQ(forward_step(pruned, s, 32, 1, 600).seconds, forward_step(full, s, 32, 1, 600).seconds);
  // Only the gpuscout profile says so.
  for (const auto& f : frameworks()) EXPECT_EQ(f.prunes_last_layer, f.key == "gpuscout") << f.key;
}

TEST(Speed, FusedSwigluDropsTheActivationKernelOfLargeBf16StepsOnHopper) {
  // gpuscout's engine computes SiLU(gate) * up in the gate/up GEMM's epilogue for steps whose 128 x
  // 128-output tiles fill 6 waves over the SMs (BF16, compute capability 9.0): no activation op there,
  // and one kernel (gap) less per layer.
  auto fused = context("H200-SXM-141GB", "gpuscout");
  fused.framework.prunes_last_layer = false;
  ASSERT_EQ(fused.framework.fused_swiglu_min_waves, 6);
  auto unfused = fused;
  unfused.framework.fused_swiglu_min_waves = 0;
  InferenceSetup s = llama_8b("bf16");
  auto activation_s = [&](const SpeedContext& c, int batch, int tokens) {
    return op_seconds(c, s, batch, tokens, 0, "activation");
  };
  EXPECT_EQ(activation_s(fused, 16, 512), -1);  // 8192 tokens
  const double act = activation_s(unfused, 16, 512);
  ASSERT_GT(act, 0);
  const double gaps = 32 * fused.framework.eager_kernel_gap_us * 1e-6;  // one kernel per layer, eager step
  EXPECT_NEAR(forward_step(unfused, s, 16, 512, 0).seconds - forward_step(fused, s, 16, 512, 0).seconds, act + gaps,
              1e-12);
  // Llama-3.1-8B's 14336 outputs are 112 tiles wide; 6 waves of the H200's 132 SMs are 792 tiles:
  // 8 row tiles (1024 tokens) reach it, 7 (896) do not.
  EXPECT_EQ(activation_s(fused, 1, 1024), -1);
  EXPECT_GT(activation_s(fused, 1, 896), 0);
  // A run's own threshold (validation, from its record) decides where it is given.
  auto run = unfused;
  run.framework.fused_swiglu_min_tokens = 512;
  EXPECT_EQ(activation_s(run, 1, 600), -1);
  EXPECT_GT(activation_s(run, 1, 511), 0);
  EXPECT_GT(activation_s(fused, 32, 1), 0);  // a decode step
  auto ampere = context("A100-SXM4-80GB", "gpuscout");
  EXPECT_GT(activation_s(ampere, 16, 512), 0);  // the kernel is sm_90a
  s.weights = parse_quantization("fp8", "--precision");
  EXPECT_GT(activation_s(fused, 16, 512), 0);  // FP8 weights keep cuBLASLt and the SiLU kernel
  for (const auto& f : frameworks()) EXPECT_EQ(f.fused_swiglu_min_waves > 0, f.key == "gpuscout") << f.key;
}

TEST(Speed, OneRowStepsFoldTheNormsAndSiluIntoTheGemvs) {
  // gpuscout's ring GEMV computes both RMSNorms and SiLU * up at one row (BF16, compute capability
  // 9.0): a batch-1 decode step has no activation op and three kernel gaps fewer per layer.
  const auto folds = context("H200-SXM-141GB", "gpuscout");
  ASSERT_TRUE(folds.framework.folds_elementwise_at_one_row);
  auto plain = folds;
  plain.framework.folds_elementwise_at_one_row = false;
  InferenceSetup s = llama_8b("bf16");
  auto activation_s = [&](const SpeedContext& c, int batch) { return op_seconds(c, s, batch, 1, 512, "activation"); };
  EXPECT_EQ(activation_s(folds, 1), -1);
  const double act = activation_s(plain, 1);
  ASSERT_GT(act, 0);
  const double gaps = 3 * 32 * folds.framework.kernel_gap_us * 1e-6;  // a graph-replayed decode step
  EXPECT_NEAR(forward_step(plain, s, 1, 1, 512).seconds - forward_step(folds, s, 1, 1, 512).seconds, act + gaps, 1e-12);
  // Two rows, FP8 weights or another GPU: nothing folded.
  EXPECT_DOUBLE_EQ(forward_step(plain, s, 2, 1, 512).seconds, forward_step(folds, s, 2, 1, 512).seconds);
  auto ampere = context("A100-SXM4-80GB", "gpuscout");
  EXPECT_GT(activation_s(ampere, 1), 0);
  s.weights = parse_quantization("fp8", "--precision");
  EXPECT_GT(activation_s(folds, 1), 0);
  for (const auto& f : frameworks()) EXPECT_EQ(f.folds_elementwise_at_one_row, f.key == "gpuscout") << f.key;
}

TEST(Speed, Fp8StepsAboveTheOwnKernelsPayTheQuantizationKernels) {
  // gpuscout's engine quantizes each FP8 GEMM's input in two kernels of its own from 9 rows (cuBLASLt);
  // the model adds their gaps (two per GEMM, four GEMMs a layer) and an fp8_quantize op.
  const auto engine = context("H200-SXM-141GB", "gpuscout");
  ASSERT_EQ(engine.framework.fp8_quantize_kernels_per_gemm, 2);
  ASSERT_EQ(engine.framework.fp8_quantize_min_tokens, 9);
  auto fused = engine;
  fused.framework.fp8_quantize_kernels_per_gemm = 0;
  InferenceSetup s = llama_8b("fp8");
  auto quantize_s = [&](const SpeedContext& c, int batch) { return op_seconds(c, s, batch, 1, 512, "fp8_quantize"); };
  const double quantize = quantize_s(engine, 32);
  ASSERT_GT(quantize, 0);
  EXPECT_EQ(quantize_s(fused, 32), -1);
  const double gaps = 8 * 32 * engine.framework.kernel_gap_us * 1e-6;  // a graph-replayed decode step
  EXPECT_NEAR(forward_step(engine, s, 32, 1, 512).seconds - forward_step(fused, s, 32, 1, 512).seconds, quantize + gaps,
              1e-12);
  // Up to 8 rows (the engine's own FP8 kernels) and with BF16 weights: nothing added.
  EXPECT_EQ(quantize_s(engine, 8), -1);
  EXPECT_DOUBLE_EQ(forward_step(engine, s, 8, 1, 512).seconds, forward_step(fused, s, 8, 1, 512).seconds);
  s.weights = parse_quantization("bf16", "--precision");
  EXPECT_EQ(quantize_s(engine, 32), -1);
  for (const auto& f : frameworks()) EXPECT_EQ(f.fp8_quantize_kernels_per_gemm > 0, f.key == "gpuscout") << f.key;
}

TEST(Speed, FlashEfficiencyScalesTheAttentionCoreOnly) {
  // A 32k-token prefill spends about a third of its FLOPs in causal attention: its compute time is
  // inversely proportional to the profile's flash_efficiency, and the GEMMs do not move.
  auto ctx = context("H200-SXM-141GB", "gpuscout");
  ctx.framework.prunes_last_layer = false;  // else the last layer's one-query attention (memory-bound) adds a constant
  InferenceSetup s = llama_8b("bf16");
  auto attention_and_gemms = [&](const SpeedContext& c) {
    double attention = 0, gate_up = 0;
    for (const auto& op : forward_step(c, s, 1, 32768, 0).ops) {
      if (op.key == "attention") attention = op.seconds;
      if (op.key == "gate_up") gate_up = op.seconds;
    }
    return std::pair{attention, gate_up};
  };
  const auto measured = attention_and_gemms(ctx);
  ctx.framework.flash_efficiency = 0.8;
  const auto assumed = attention_and_gemms(ctx);
  EXPECT_NEAR(measured.first / assumed.first, 0.8 / 0.66, 1e-9);
  EXPECT_DOUBLE_EQ(measured.second, assumed.second);
  // The gpuscout profile's figure is measured; the others keep the 0.8 assumption.
  for (const auto& f : frameworks()) EXPECT_DOUBLE_EQ(f.flash_efficiency, f.key == "gpuscout" ? 0.66 : 0.8) << f.key;
}

TEST(Speed, StepsWithPromptTokensPayTheEagerKernelGap) {
  // gpuscout graphs decode-only steps; a step with a prompt chunk is launched kernel by kernel, measured
  // ~0.5 us per kernel slower (data/frameworks.toml): 10 kernels x 32 layers x 0.5 us = 0.16 ms.
  auto ctx = context("H200-SXM-141GB", "gpuscout");
  InferenceSetup s = llama_8b("bf16");
  const std::vector<AttentionGroup> mixed{{32, 1, 536}, {1, 64, 0}}, decode{{32, 1, 536}};
  const double eager_mixed = engine_step(ctx, s, mixed, 33).seconds;
  const double graphed_decode = engine_step(ctx, s, decode, 32).seconds;
  ASSERT_DOUBLE_EQ(ctx.framework.eager_kernel_gap_us, 1.5);
  ctx.framework.eager_kernel_gap_us = ctx.framework.kernel_gap_us;
  EXPECT_NEAR(eager_mixed - engine_step(ctx, s, mixed, 33).seconds, 0.16e-3, 1e-9);
  EXPECT_DOUBLE_EQ(engine_step(ctx, s, decode, 32).seconds, graphed_decode);
  // Without graphs every step pays kernel_gap_us, whatever the eager figure says.
  ctx.framework.cuda_graphs = false;
  ctx.framework.eager_kernel_gap_us = 9;
  EXPECT_DOUBLE_EQ(engine_step(ctx, s, decode, 32).seconds, graphed_decode);
  EXPECT_NEAR(engine_step(ctx, s, mixed, 33).seconds, eager_mixed - 0.16e-3, 1e-9);
  // A profile that does not give the figure assumes no difference.
  for (const auto& f : frameworks()) {
    if (f.key != "gpuscout") EXPECT_DOUBLE_EQ(f.eager_kernel_gap_us, f.kernel_gap_us) << f.key;
  }
}

TEST(Speed, MixedStepsAgainstTheEngineOnAnH200) {
  // Measured (bench/results/h200-engine-bench-mixed-steps-s17-20261201.txt, one H200): 32 sequences
  // decoding at 512..560 tokens plus one new C-token prompt in the same step, median ms. The model
  // was 6-9% short at C = 64-256 before the eager gap.
  const auto ctx = context("H200-SXM-141GB", "gpuscout");
  InferenceSetup s = llama_8b("bf16");
  const std::vector<std::pair<double, double>> measured{
      {64, 6.247}, {256, 9.268}, {512, 14.319}, {1024, 25.052}, {2048, 49.432}};
  for (const auto& [chunk, ms] : measured) {
    const double predicted = 1e3 * engine_step(ctx, s, {{32, 1, 536}, {1, chunk, 0}}, 33).seconds;
    EXPECT_NEAR(predicted / ms, 1.0, 0.10) << "C = " << chunk << ": " << predicted << " ms";
  }
}

TEST(Speed, ServerSearchRespectsBounds) {
  const auto ctx = context("H200-SXM-141GB", "vllm");
  InferenceSetup s = llama_8b("bf16");
  const auto p = best_batch_under_bounds(ctx, s, 1000, 200, 256, 0, 0.030);
  EXPECT_GT(p.batch, 1);
  EXPECT_LE(p.tpot_s, 0.030);
  if (p.batch < 256) {
    EXPECT_GT(continuous_batching(ctx, s, p.batch + 1, 1000, 200).tpot_s, 0.030);
  }
  EXPECT_EQ(best_batch_under_bounds(ctx, s, 1000, 200, 256, 0, 1e-6).batch, 0);
}

TrainingSetup train_setup(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t gbs) {
  TrainingSetup s;
  s.arch = catalog().get("llama-2-7b").arch;
  s.par = {tp, pp, dp, 1};
  s.global_batch = gbs;
  s.config.seq = 4096;
  s.config.micro_batch = 1;
  return s;
}

TEST(Speed, PipelineBubbleOneFOneBAndInterleaved) {
  const auto ctx = context("H100-SXM5-80GB", "megatron");
  auto s = train_setup(1, 4, 1, 16);
  const auto r = training_step(ctx, s);
  EXPECT_DOUBLE_EQ(r.micro_batches, 16);
  EXPECT_DOUBLE_EQ(r.bubble_fraction, 3.0 / 16);  // (p-1)/m
  s.config.schedule = PipelineSchedule::interleaved;
  s.config.virtual_stages = 2;
  EXPECT_DOUBLE_EQ(training_step(ctx, s).bubble_fraction, 3.0 / 32);  // (p-1)/(v·m)
}

TEST(Speed, MfuDefinitionAndRecompute) {
  const auto ctx = context("H100-SXM5-80GB", "megatron");
  auto s = train_setup(1, 1, 8, 64);
  s.config.recompute = Recompute::none;
  const auto r = training_step(ctx, s);
  const double flops = training_flops_per_token(s.arch, 4096) * 64 * 4096;
  EXPECT_NEAR(r.model_flops_per_step, flops, flops * 1e-12);
  EXPECT_NEAR(r.mfu, flops / (8 * r.peak_tflops * 1e12 * r.step_s), 1e-12);
  EXPECT_NE(r.peak_label.find("BF16"), std::string::npos);
  EXPECT_GT(r.mfu, 0.3);
  EXPECT_LT(r.mfu, 0.75);
  EXPECT_GT(r.dp_comm_s, 0);
  s.config.recompute = Recompute::full;
  const auto full = training_step(ctx, s);
  EXPECT_GT(full.step_s, r.step_s);
  EXPECT_NEAR(full.hfu / full.mfu, 4.0 / 3, 1e-9);
  // Uneven split of the global batch is a usage error.
  s.global_batch = 12;
  EXPECT_THROW(training_step(ctx, s), UsageError);
}

}  // namespace
}  // namespace gpuscout::model
