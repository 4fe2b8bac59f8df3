#include <gtest/gtest.h>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/spec_sheet_fit.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/error.hpp"
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
  static specs::SpecDb* specs_;
  static workloads::ModelCatalog* models_;
};
specs::SpecDb* SpecSheetFitTest::specs_ = nullptr;
workloads::ModelCatalog* SpecSheetFitTest::models_ = nullptr;

TEST_F(SpecSheetFitTest, SeventyBInBf16NeedsTwoH200OrFourEightyGigabyteGpus) {
  const auto& model = models_->get("llama-3.1-70b");
  const auto bf16 = parse_weight_format("bf16", "--weights");
  const double params = static_cast<double>(model.params().total);
  const auto h200 = spec_sheet_fit(specs_->get("h200"), model, bf16);
  EXPECT_NEAR(h200.weight_gb, params * 2 / 1e9, 1e-9);
  ASSERT_TRUE(h200.gpus_needed);
  EXPECT_EQ(*h200.gpus_needed, 2);
  // Two GPUs each stream half the weights per token at 4800 GB/s.
  ASSERT_TRUE(h200.decode_tokens_per_s_bound);
  EXPECT_NEAR(*h200.decode_tokens_per_s_bound, 2 * 4800e9 / (params * 2), 1e-6);
  ASSERT_TRUE(h200.prefill_tokens_per_s_bound);
  EXPECT_NEAR(*h200.prefill_tokens_per_s_bound, 2 * 989.4e12 / (2 * params), 1e-3);
  // KV room: per GPU, 90% of 141 GB minus 1 GB minus half the weights, over half the KV heads.
  const double free_per_gpu = 141e9 * 0.9 - 1e9 - params;
  EXPECT_NEAR(*h200.kv_tokens_capacity, free_per_gpu / (h200.kv_bytes_per_token / 2), 1.0);

  // 80 GB parts: two hold the weights but leave no room for one 8k request, so four.
  for (const char* name : {"h100", "h800", "a100"}) {
    const auto fit = spec_sheet_fit(specs_->get(name), model, bf16);
    ASSERT_TRUE(fit.gpus_needed) << name;
    EXPECT_EQ(*fit.gpus_needed, 4) << name;
    EXPECT_GE(*fit.kv_tokens_capacity, FitAssumptions{}.min_kv_tokens) << name;
  }
}

TEST_F(SpecSheetFitTest, Fp8HalvesTheWeightsAndNeedsAnFp8Peak) {
  const auto& model = models_->get("llama-3.1-70b");
  const auto fp8 = parse_weight_format("fp8", "--weights");
  const auto h100 = spec_sheet_fit(specs_->get("h100"), model, fp8);
  EXPECT_EQ(*h100.gpus_needed, 2);
  EXPECT_TRUE(h100.prefill_tokens_per_s_bound);
  // The A100 stores FP8 weights but has no FP8 tensor cores: no prefill bound, and a note says why.
  const auto a100 = spec_sheet_fit(specs_->get("a100"), model, fp8);
  EXPECT_FALSE(a100.prefill_tokens_per_s_bound);
  ASSERT_FALSE(a100.notes.empty());
  EXPECT_NE(a100.notes.front().find("FP8"), std::string::npos);
}

TEST_F(SpecSheetFitTest, TooBigForANodeSaysSo) {
  const auto fit = spec_sheet_fit(specs_->get("t4"), models_->get("llama-3.1-405b"), parse_weight_format("bf16", "x"));
  EXPECT_FALSE(fit.gpus_needed);
  EXPECT_FALSE(fit.decode_tokens_per_s_bound);
  ASSERT_EQ(fit.notes.size(), 1u);
  EXPECT_NE(fit.notes[0].find("do not fit 8 x T4"), std::string::npos) << fit.notes[0];
}

TEST_F(SpecSheetFitTest, MlaCacheIsNotSplitAcrossRanks) {
  // DeepSeek-V3 caches one latent per token per layer; every tensor-parallel rank keeps all of it.
  const auto& model = models_->get("deepseek-v3");
  const auto fit = spec_sheet_fit(specs_->get("h200"), model, parse_weight_format("fp8", "x"));
  ASSERT_TRUE(fit.gpus_needed);
  EXPECT_EQ(*fit.gpus_needed, 8);
  const double free_per_gpu = 141e9 * 0.9 - 1e9 - static_cast<double>(model.params().total) / 8;
  EXPECT_NEAR(*fit.kv_tokens_capacity, free_per_gpu / fit.kv_bytes_per_token, 1.0);
}

TEST(WeightFormat, RejectsUnknownNamesNamingTheFlag) {
  EXPECT_EQ(parse_weight_format("int8", "--weights").bytes_per_param, 1.0);
  try {
    parse_weight_format("int3", "--weights");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--weights"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuscout::model
