#include <gtest/gtest.h>

#include <cmath>

#include "gpuscout/bench/gemm_shapes.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::bench::gemm {
namespace {

TEST(GemmShapes, FlopsAndBytes) {
  const GemmShape s{8192, 8192, 8192, "", ""};
  EXPECT_DOUBLE_EQ(flops(s), 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_DOUBLE_EQ(flops({1, 6144, 4096, "m", "qkv"}), 2.0 * 6144 * 4096);
  // bf16: 2 bytes for X, W and Y.
  EXPECT_EQ(operand_bytes({16, 4096, 1024, "", ""}, GemmPrecision::bf16), (16 * 1024 + 4096 * 1024 + 16 * 4096) * 2);
  // fp8: 1-byte inputs, bf16 output; int8: int32 output.
  EXPECT_EQ(operand_bytes({16, 32, 64, "", ""}, GemmPrecision::fp8_e4m3), 16 * 64 + 32 * 64 + 16 * 32 * 2);
  EXPECT_EQ(operand_bytes({16, 32, 64, "", ""}, GemmPrecision::int8), 16 * 64 + 32 * 64 + 16 * 32 * 4);
}

TEST(GemmShapes, RecordKeys) {
  EXPECT_EQ(record_key(GemmPrecision::bf16, {8192, 8192, 8192, "", ""}), "gemm/bf16/m8192_n8192_k8192");
  EXPECT_EQ(record_key(GemmPrecision::fp8_e4m3, {128, 6144, 4096, "llama-3.1-8b", "qkv"}),
            "gemm/fp8/llama-3.1-8b.qkv/m128_n6144_k4096");
}

TEST(GemmShapes, PrecisionNames) {
  for (GemmPrecision p : kAllGemmPrecisions) EXPECT_EQ(parse_precision(to_string(p)), p);
  EXPECT_EQ(parse_precision("BF16"), GemmPrecision::bf16);
  EXPECT_EQ(parse_precision(" e4m3 "), GemmPrecision::fp8_e4m3);
  EXPECT_EQ(parse_precision("half"), GemmPrecision::fp16);
  EXPECT_FALSE(parse_precision("fp4"));
  EXPECT_EQ(rate_unit(GemmPrecision::int8), "TOP/s");
  EXPECT_EQ(rate_unit(GemmPrecision::fp8_e5m2), "TFLOP/s");
}

TEST(GemmShapes, SupportByComputeCapability) {
  EXPECT_FALSE(unsupported_reason(GemmPrecision::fp8_e4m3, 9, 0));
  EXPECT_FALSE(unsupported_reason(GemmPrecision::fp8_e4m3, 8, 9));
  const auto reason = unsupported_reason(GemmPrecision::fp8_e5m2, 8, 0);
  ASSERT_TRUE(reason);
  EXPECT_NE(reason->find("FP8 needs compute capability 8.9+"), std::string::npos);
  EXPECT_TRUE(unsupported_reason(GemmPrecision::bf16, 7, 5));
  EXPECT_FALSE(unsupported_reason(GemmPrecision::bf16, 8, 0));
  EXPECT_FALSE(unsupported_reason(GemmPrecision::fp32, 6, 0));
  EXPECT_FALSE(unsupported_reason(GemmPrecision::int8, 10, 0));
}

TEST(GemmShapes, TolerancePerPrecision) {
  // Exact for integers, tight for FP64, loosening with fewer mantissa bits.
  EXPECT_EQ(info(GemmPrecision::int8).tolerance, 0.0);
  EXPECT_LT(info(GemmPrecision::fp64).tolerance, info(GemmPrecision::fp32).tolerance);
  EXPECT_LT(info(GemmPrecision::fp32).tolerance, info(GemmPrecision::tf32).tolerance);
  EXPECT_LT(info(GemmPrecision::fp16).tolerance, info(GemmPrecision::bf16).tolerance);
  EXPECT_LE(info(GemmPrecision::bf16).tolerance, 0.05);
  EXPECT_EQ(info(GemmPrecision::fp8_e4m3).tolerance, info(GemmPrecision::bf16).tolerance);  // same bf16 output
  EXPECT_TRUE(info(GemmPrecision::fp8_e4m3).requires_tn);
  EXPECT_TRUE(info(GemmPrecision::int8).requires_tn);
  EXPECT_FALSE(info(GemmPrecision::bf16).requires_tn);
}

TEST(GemmShapes, ErrorMeasure) {
  EXPECT_DOUBLE_EQ(max_error_vs_rms({1, -1, 1, -1}, {1, -1, 1, -1}), 0.0);
  // rms(ref) = 2; the worst deviation is 0.5.
  EXPECT_DOUBLE_EQ(max_error_vs_rms({2.5, -2, 2, -2}, {2, -2, 2, -2}), 0.25);
  EXPECT_TRUE(std::isnan(max_error_vs_rms({NAN, 1}, {1, 1})));
  EXPECT_TRUE(std::isnan(max_error_vs_rms({1, 1}, {0, 0})));
  EXPECT_TRUE(std::isnan(max_error_vs_rms({}, {})));
}

TEST(GemmShapes, Llama31LayerShapes) {
  const auto dims = llama31_8b();
  const auto shapes = layer_shapes(dims, {"qkv", "o", "gate_up", "gate", "down"}, {1, 4096});
  ASSERT_EQ(shapes.size(), 10u);
  EXPECT_EQ(shapes[0], (GemmShape{1, 6144, 4096, "llama-3.1-8b", "qkv"}));
  EXPECT_EQ(shapes[1], (GemmShape{4096, 6144, 4096, "llama-3.1-8b", "qkv"}));
  EXPECT_EQ(shapes[2], (GemmShape{1, 4096, 4096, "llama-3.1-8b", "o"}));
  EXPECT_EQ(shapes[4], (GemmShape{1, 28672, 4096, "llama-3.1-8b", "gate_up"}));
  EXPECT_EQ(shapes[6], (GemmShape{1, 14336, 4096, "llama-3.1-8b", "gate"}));
  EXPECT_EQ(shapes[8], (GemmShape{1, 4096, 14336, "llama-3.1-8b", "down"}));
  EXPECT_THROW(layer_shapes(dims, {"attn"}, {1}), UsageError);
  auto ungated = dims;
  ungated.gated_mlp = false;
  EXPECT_THROW(layer_shapes(ungated, {"gate_up"}, {1}), UsageError);
}

TEST(GemmShapes, ParseSizes) {
  EXPECT_EQ(parse_size("8192"), (GemmShape{8192, 8192, 8192, "", ""}));
  EXPECT_EQ(parse_size("16x4096X1024"), (GemmShape{16, 4096, 1024, "", ""}));
  EXPECT_THROW(parse_size("0"), UsageError);
  EXPECT_THROW(parse_size("4k"), UsageError);
  EXPECT_THROW(parse_size("16x16"), UsageError);
  EXPECT_THROW(parse_size("-5"), UsageError);
  EXPECT_THROW(parse_size(""), UsageError);
}

TEST(GemmShapes, DefaultPlans) {
  const auto dims = llama31_8b();
  const auto standard = make_plan(PlanMode::standard, {}, dims);
  EXPECT_EQ(standard.precisions.size(), std::size(kAllGemmPrecisions));
  ASSERT_EQ(standard.sizes.size(), 3u);
  EXPECT_EQ(standard.sizes[2].m, 16384);
  EXPECT_EQ(standard.llm_precisions, (std::vector<GemmPrecision>{GemmPrecision::bf16, GemmPrecision::fp8_e4m3}));
  EXPECT_EQ(standard.llm_shapes.size(), 4u * 6u);

  const auto quick = make_plan(PlanMode::quick, {}, dims);
  ASSERT_EQ(quick.sizes.size(), 2u);
  EXPECT_EQ(quick.sizes[1].k, 8192);
  EXPECT_EQ(quick.llm_shapes.size(), 4u * 3u);

  const auto full = make_plan(PlanMode::full, {}, dims);
  EXPECT_EQ(full.llm_precisions.size(), std::size(kAllGemmPrecisions));
}

TEST(GemmShapes, PlansFromFlags) {
  const auto dims = llama31_8b();
  const auto plan = make_plan(PlanMode::standard,
                              {{"precisions", {"bf16", "fp8", "bf16"}},
                               {"gemm-sizes", {"8192", "1024x2048x4096"}},
                               {"gemm-m", {"16"}},
                               {"gemm-shapes", {"down"}}},
                              dims);
  EXPECT_EQ(plan.precisions, (std::vector<GemmPrecision>{GemmPrecision::bf16, GemmPrecision::fp8_e4m3}));
  EXPECT_EQ(plan.llm_precisions, plan.precisions);
  ASSERT_EQ(plan.sizes.size(), 2u);
  EXPECT_EQ(plan.sizes[1], (GemmShape{1024, 2048, 4096, "", ""}));
  ASSERT_EQ(plan.llm_shapes.size(), 1u);
  EXPECT_EQ(plan.llm_shapes[0], (GemmShape{16, 4096, 14336, "llama-3.1-8b", "down"}));

  const auto no_llm = make_plan(PlanMode::standard, {{"gemm-m", {"none"}}}, dims);
  EXPECT_TRUE(no_llm.llm_shapes.empty());
  EXPECT_TRUE(no_llm.llm_precisions.empty());
  const auto no_sizes = make_plan(PlanMode::standard, {{"gemm-sizes", {"none"}}}, dims);
  EXPECT_TRUE(no_sizes.sizes.empty());

  // Explicit shapes through --gemm-shapes replace the default sizes and, alone, the LLM shapes.
  const auto explicit_only = make_plan(PlanMode::standard, {{"gemm-shapes", {"4096x4096x4096", "16x1024x512"}}}, dims);
  ASSERT_EQ(explicit_only.sizes.size(), 2u);
  EXPECT_EQ(explicit_only.sizes[1], (GemmShape{16, 1024, 512, "", ""}));
  EXPECT_TRUE(explicit_only.llm_shapes.empty());
  const auto mixed =
      make_plan(PlanMode::quick, {{"gemm-shapes", {"o", "128x256x512"}}, {"gemm-sizes", {"8192"}}}, dims);
  ASSERT_EQ(mixed.sizes.size(), 2u);
  EXPECT_EQ(mixed.sizes[0].m, 8192);
  EXPECT_EQ(mixed.sizes[1], (GemmShape{128, 256, 512, "", ""}));
  ASSERT_EQ(mixed.llm_shapes.size(), 3u);  // o at the quick token counts
  EXPECT_EQ(mixed.llm_shapes[0].layer, "o");

  EXPECT_THROW(make_plan(PlanMode::standard, {{"precisions", {"fp4"}}}, dims), UsageError);
  EXPECT_THROW(make_plan(PlanMode::standard, {{"gemm-m", {"0"}}}, dims), UsageError);
  EXPECT_THROW(make_plan(PlanMode::standard, {{"gemm-shapes", {"attention"}}}, dims), UsageError);
}

TEST(GemmShapes, LmHeadLayer) {
  const auto dims = llama31_8b();
  const auto plan = make_plan(PlanMode::quick, {{"gemm-shapes", {"lm_head"}}, {"gemm-m", {"1", "32"}}}, dims);
  ASSERT_EQ(plan.llm_shapes.size(), 2u);
  EXPECT_EQ(plan.llm_shapes[0], (GemmShape{1, 128256, 4096, "llama-3.1-8b", "lm_head"}));
  EXPECT_EQ(record_key(GemmPrecision::bf16, plan.llm_shapes[1]), "gemm/bf16/llama-3.1-8b.lm_head/m32_n128256_k4096");
  // Not among the default layers: the default selection stays comparable with older runs.
  for (const auto& shape : make_plan(PlanMode::standard, {}, dims).llm_shapes) EXPECT_NE(shape.layer, "lm_head");
  EXPECT_EQ(catalog_dims("llama-3.1-70b").vocab, 128256);
  auto no_vocab = dims;
  no_vocab.vocab = 0;
  try {
    make_plan(PlanMode::quick, {{"gemm-shapes", {"lm_head"}}}, no_vocab);
    ADD_FAILURE() << "lm_head without a vocabulary size was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

TEST(GemmShapes, RotationSets) {
  const std::int64_t mib = 1 << 20;
  // 32 MiB of operands, 50 MiB of L2, 4x: 200 MiB -> 7 sets.
  EXPECT_EQ(rotation_sets(32 * mib, 50 * mib, 4.0, 100000 * mib, 64), 7);
  // A set larger than the whole target: one.
  EXPECT_EQ(rotation_sets(3072 * mib, 50 * mib, 4.0, 100000 * mib, 64), 1);
  // Capped by the count and by memory.
  EXPECT_EQ(rotation_sets(1024, 50 * mib, 4.0, 100000 * mib, 64), 64);
  EXPECT_EQ(rotation_sets(32 * mib, 50 * mib, 4.0, 96 * mib, 64), 3);
  EXPECT_EQ(rotation_sets(32 * mib, 50 * mib, 4.0, 1 * mib, 64), 1);
}

}  // namespace
}  // namespace gpuscout::bench::gemm

namespace gpuscout::bench::gemm {
namespace {

TEST(GemmShapes, CatalogDims) {
  const auto dims = catalog_dims("llama-3.1-8b");
  const auto builtin = llama31_8b();
  EXPECT_EQ(dims.model, builtin.model);
  EXPECT_EQ(dims.hidden, builtin.hidden);
  EXPECT_EQ(dims.heads, builtin.heads);
  EXPECT_EQ(dims.kv_heads, builtin.kv_heads);
  EXPECT_EQ(dims.head_dim, builtin.head_dim);
  EXPECT_EQ(dims.ffn_hidden, builtin.ffn_hidden);
  EXPECT_EQ(dims.vocab, builtin.vocab);
  EXPECT_TRUE(dims.gated_mlp);
  EXPECT_NE(dims.source.find("model catalog"), std::string::npos);
  EXPECT_THROW(catalog_dims("no-such-model"), NotFoundError);
  EXPECT_THROW(catalog_dims("deepseek-v3"), UsageError);  // MoE + MLA
  EXPECT_THROW(catalog_dims("bert-large"), UsageError);   // encoder
}

}  // namespace
}  // namespace gpuscout::bench::gemm

#include "gpuscout/specs/gpu_spec.hpp"

namespace gpuscout::bench::gemm {
namespace {

TEST(GemmShapes, DensePeakFromSpec) {
  specs::GpuSpec spec;
  EXPECT_FALSE(dense_peak(nullptr, GemmPrecision::bf16));
  EXPECT_FALSE(dense_peak(&spec, GemmPrecision::bf16));
  spec.peak_dense[static_cast<std::size_t>(specs::Precision::bf16)] = specs::Figure{989.4, "datasheet", ""};
  spec.peak_dense[static_cast<std::size_t>(specs::Precision::fp8)] = specs::Figure{1978.9, "datasheet", ""};
  spec.peak_dense[static_cast<std::size_t>(specs::Precision::fp64)] = specs::Figure{9.7, "datasheet", ""};
  EXPECT_EQ(dense_peak(&spec, GemmPrecision::bf16), 989.4);
  EXPECT_EQ(dense_peak(&spec, GemmPrecision::fp8_e5m2), 1978.9);
  EXPECT_EQ(dense_peak(&spec, GemmPrecision::fp64), 9.7);  // no tensor FP64 figure: plain FP64
  spec.peak_dense[static_cast<std::size_t>(specs::Precision::fp64_tensor)] = specs::Figure{67, "datasheet", ""};
  EXPECT_EQ(dense_peak(&spec, GemmPrecision::fp64), 67.0);
  EXPECT_FALSE(dense_peak(&spec, GemmPrecision::tf32));
}

}  // namespace
}  // namespace gpuscout::bench::gemm
