#include <gtest/gtest.h>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/model/spec_sheet_fit.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model {
namespace {

class SpecSheetFitTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    specs_ = new specs::SpecDb(specs::SpecDb::load(data::DataSource::embedded()));
    models_ = new workloads::ModelCatalog(workloads::ModelCatalog::load(data::DataSource::embedded()));
  }
  static void TearDownTestSuite() {
    delete specs_;
    delete models_;
  }
  // The memory model's view of one layout, as spec_sheet_fit should see it.
  static InferenceMemory memory_at(const specs::GpuSpec& gpu, const workloads::ModelInfo& model,
                                   const Quantization& weights, std::int64_t tp) {
    InferenceConfig config;
    config.weights = weights;
    config.context = FitAssumptions{}.context;
    return inference_memory(model.arch, Parallelism{tp, 1, 1, 1}, config, gpu_capacity_bytes(gpu));
  }
  static specs::SpecDb* specs_;
  static workloads::ModelCatalog* models_;
};
specs::SpecDb* SpecSheetFitTest::specs_ = nullptr;
workloads::ModelCatalog* SpecSheetFitTest::models_ = nullptr;

TEST_F(SpecSheetFitTest, PicksTheSmallestTensorParallelDegreeTheMemoryModelAccepts) {
  const auto& model = models_->get("llama-3.1-70b");
  const auto bf16 = parse_quantization("bf16", "--weights");
  for (const char* name : {"h200", "h100", "h800", "a100", "l40s", "a10"}) {
    const auto& gpu = specs_->get(name);
    const auto fit = spec_sheet_fit(gpu, model, bf16);
    ASSERT_TRUE(fit.gpus_needed) << name;
    const int tp = *fit.gpus_needed;
    EXPECT_TRUE(memory_at(gpu, model, bf16, tp).breakdown.fits()) << name;
    if (tp > 1) EXPECT_FALSE(memory_at(gpu, model, bf16, tp / 2).breakdown.fits()) << name;
    EXPECT_DOUBLE_EQ(*fit.kv_tokens_capacity, memory_at(gpu, model, bf16, tp).kv_tokens_capacity) << name;
  }
  // 141 GB of BF16 weights: two GPUs of 80 or 141 GB, with far more KV room on the H200s.
  const auto h200 = spec_sheet_fit(specs_->get("h200"), model, bf16);
  const auto h100 = spec_sheet_fit(specs_->get("h100"), model, bf16);
  EXPECT_EQ(*h200.gpus_needed, 2);
  EXPECT_EQ(*h100.gpus_needed, 2);
  EXPECT_GT(*h200.kv_tokens_capacity, 10 * *h100.kv_tokens_capacity);
}

TEST_F(SpecSheetFitTest, RooflinesFollowBandwidthAndPeak) {
  const auto& model = models_->get("llama-3.1-70b");
  const auto bf16 = parse_quantization("bf16", "--weights");
  const auto& gpu = specs_->get("h200");
  const auto fit = spec_sheet_fit(gpu, model, bf16);
  const auto memory = memory_at(gpu, model, bf16, 2);
  const double per_gpu_weights =
      memory.breakdown.bytes_of("weights_linear") + memory.breakdown.bytes_of("weights_other");
  ASSERT_TRUE(fit.decode_tokens_per_s_bound);
  EXPECT_NEAR(*fit.decode_tokens_per_s_bound, 4800e9 / per_gpu_weights, 1e-6);
  // About 2 x 4.8 TB/s over 141 GB of weights.
  EXPECT_NEAR(*fit.decode_tokens_per_s_bound, 68.0, 1.0);
  const double params = static_cast<double>(model.params().total);
  ASSERT_TRUE(fit.prefill_tokens_per_s_bound);
  EXPECT_NEAR(*fit.prefill_tokens_per_s_bound, 2 * 989.4e12 / (2 * params), 1e-3);
  EXPECT_NEAR(fit.weight_gib, params * 2 / (1024.0 * 1024 * 1024), 0.01 * fit.weight_gib);
}

TEST_F(SpecSheetFitTest, Fp8HalvesTheWeightsAndNeedsAnFp8Peak) {
  const auto& model = models_->get("llama-3.1-70b");
  const auto fp8 = parse_quantization("fp8", "--weights");
  const auto h100 = spec_sheet_fit(specs_->get("h100"), model, fp8);
  const auto h100_bf16 = spec_sheet_fit(specs_->get("h100"), model, parse_quantization("bf16", "x"));
  // Embeddings and LM head stay 16-bit, so a little over half; still just too much for one 80 GB GPU.
  EXPECT_NEAR(h100.weight_gib / h100_bf16.weight_gib, 0.5, 0.02);
  ASSERT_TRUE(h100.gpus_needed);
  EXPECT_EQ(*h100.gpus_needed, 2);
  EXPECT_TRUE(h100.prefill_tokens_per_s_bound);
  // The A100 stores FP8 weights but has no FP8 tensor cores: no prefill bound, and a note says why.
  const auto a100 = spec_sheet_fit(specs_->get("a100"), model, fp8);
  EXPECT_FALSE(a100.prefill_tokens_per_s_bound);
  ASSERT_FALSE(a100.notes.empty());
  EXPECT_NE(a100.notes.front().find("FP8"), std::string::npos);
}

TEST_F(SpecSheetFitTest, TooBigForANodeSaysSo) {
  const auto fit = spec_sheet_fit(specs_->get("t4"), models_->get("llama-3.1-405b"), parse_quantization("bf16", "x"));
  EXPECT_FALSE(fit.gpus_needed);
  EXPECT_FALSE(fit.decode_tokens_per_s_bound);
  ASSERT_EQ(fit.notes.size(), 1u);
  EXPECT_NE(fit.notes[0].find("do not fit 8 x T4"), std::string::npos) << fit.notes[0];
}

TEST_F(SpecSheetFitTest, DeepSeekV3InFp8NeedsAFullNodeOfH200) {
  const auto fit = spec_sheet_fit(specs_->get("h200"), models_->get("deepseek-v3"), parse_quantization("fp8", "x"));
  ASSERT_TRUE(fit.gpus_needed);
  EXPECT_EQ(*fit.gpus_needed, 8);
  EXPECT_GT(*fit.kv_tokens_capacity, 0);
}

}  // namespace
}  // namespace gpuscout::model
