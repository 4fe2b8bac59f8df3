#include "gpuscout/workloads/model_catalog.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpuscout/util/error.hpp"

namespace gpuscout::workloads {
namespace {

const ModelCatalog& catalog() {
  static const ModelCatalog instance = ModelCatalog::load(data::DataSource::embedded());
  return instance;
}

double relative_difference(std::int64_t computed, std::int64_t published) {
  return std::abs(static_cast<double>(computed) / static_cast<double>(published) - 1.0);
}

TEST(ModelCatalog, LoadsEveryModel) {
  EXPECT_GE(catalog().all().size(), 14u);
  for (const char* name : {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3.1-8B", "Llama-3.1-70B",
                           "Llama-3.1-405B", "Mistral-7B-v0.1", "Mixtral-8x7B", "Mixtral-8x22B", "DeepSeek-V3",
                           "Qwen2.5-7B", "Qwen2.5-72B", "GPT-3-175B", "BERT-large"}) {
    EXPECT_NE(catalog().find(name), nullptr) << name;
  }
}

TEST(ModelCatalog, ComputedParamsMatchPublishedWithinOnePercent) {
  for (const auto& model : catalog().all()) {
    const ParamBreakdown p = model.params();
    EXPECT_LT(relative_difference(p.total, model.published.total), 0.01)
        << model.name << ": computed " << p.total << " vs published " << model.published.total;
    EXPECT_EQ(p.total, p.embedding + p.attention + p.mlp + p.norms + p.lm_head + p.pooler) << model.name;
    EXPECT_LE(p.active, p.total) << model.name;
    if (!model.arch.is_moe()) EXPECT_EQ(p.active, p.total) << model.name;
  }
}

TEST(ModelCatalog, ActiveParamsMatchPublishedForMoe) {
  for (const auto& model : catalog().all()) {
    if (!model.published.active) continue;
    // Published activated counts are rounded to the billion (37B, 39B), hence 2%.
    EXPECT_LT(relative_difference(model.params().active, *model.published.active), 0.02) << model.name;
  }
}

TEST(ParamCount, DenseSpotValues) {
  // Exact counts of the HF checkpoints (sum of tensor sizes).
  EXPECT_EQ(catalog().get("Llama-2-7B").params().total, 6'738'415'616);
  EXPECT_EQ(catalog().get("Llama-2-13B").params().total, 13'015'864'320);
  EXPECT_EQ(catalog().get("Llama-2-70B").params().total, 68'976'648'192);
  EXPECT_EQ(catalog().get("Llama-3.1-8B").params().total, 8'030'261'248);
  EXPECT_EQ(catalog().get("Llama-3.1-70B").params().total, 70'553'706'496);
  EXPECT_EQ(catalog().get("Llama-3.1-405B").params().total, 405'853'388'800);
  EXPECT_EQ(catalog().get("Mistral-7B-v0.1").params().total, 7'241'732'096);
  EXPECT_EQ(catalog().get("Qwen2.5-7B").params().total, 7'615'616'512);
  EXPECT_EQ(catalog().get("Qwen2.5-72B").params().total, 72'706'203'648);
}

TEST(ParamCount, Gpt3) {
  const ParamBreakdown p = catalog().get("GPT-3-175B").params();
  // 96 x (12 d^2 + 13 d) + (vocab + 2048 positions) x d + final LayerNorm 2d; LM head tied.
  EXPECT_EQ(p.total, 174'604'259'328);
  EXPECT_EQ(p.lm_head, 0);
  EXPECT_EQ(p.embedding, (50257 + 2048) * 12288LL);
}

TEST(ParamCount, BertLarge) {
  const ParamBreakdown p = catalog().get("BERT-large").params();
  // The bare encoder is 334.09M; the pooler adds 1.05M (HF BertModel: 335.14M). The card's 336M also
  // counts the MLM head (1.08M).
  EXPECT_EQ(p.pooler, 1024 * 1024 + 1024);
  EXPECT_EQ(p.total, 335'141'888);
  EXPECT_EQ(p.lm_head, 0);
}

TEST(ParamCount, Mixtral8x7b) {
  const ParamBreakdown p = catalog().get("Mixtral-8x7B").params();
  EXPECT_EQ(p.total, 46'702'792'704);
  EXPECT_EQ(p.active, 12'879'925'248);
  EXPECT_EQ(p.router, 32 * 8 * 4096);
}

TEST(ParamCount, DeepSeekV3) {
  const ModelInfo& model = catalog().get("DeepSeek-V3");
  const ParamBreakdown p = model.params();
  EXPECT_NEAR(p.total / 1e9, 671.0, 671.0 * 0.001);
  EXPECT_NEAR(p.active / 1e9, 37.5, 0.2);
  // MLA attention per layer: q_a, q_b, kv_a (latent + RoPE key), kv_b, o.
  EXPECT_EQ(attention_params_per_layer(model.arch),
            7168LL * 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512LL * 128 * 256 + 128LL * 128 * 7168);
  EXPECT_EQ(model.arch.moe_layers(), 58);
}

TEST(KvCache, BytesPerToken) {
  EXPECT_EQ(kv_cache_bytes_per_token(catalog().get("Llama-3.1-8B").arch, 2), 131072.0);       // 128 KiB
  EXPECT_EQ(kv_cache_bytes_per_token(catalog().get("Llama-2-7B").arch, 2), 524288.0);         // 512 KiB (MHA)
  EXPECT_EQ(kv_cache_bytes_per_token(catalog().get("Llama-3.1-70B").arch, 2), 327680.0);      // 320 KiB
  EXPECT_EQ(kv_cache_bytes_per_token(catalog().get("DeepSeek-V3").arch, 2), 61.0 * 576 * 2);  // MLA latent
  EXPECT_EQ(kv_cache_bytes_per_token(catalog().get("BERT-large").arch, 2), 0.0);
}

TEST(Flops, ForwardPerToken) {
  const ModelArch& arch = catalog().get("Llama-3.1-8B").arch;
  const ParamBreakdown p = count_params(arch);
  const double matmul = static_cast<double>(p.total - p.embedding - p.norms);
  EXPECT_DOUBLE_EQ(forward_flops_per_token(arch, 0), 2 * matmul);
  EXPECT_DOUBLE_EQ(forward_flops_per_token(arch, 1000), 2 * matmul + 2.0 * 32 * 32 * 256 * 1000);
  // Mistral's sliding window caps the attended positions.
  const ModelArch& mistral = catalog().get("Mistral-7B-v0.1").arch;
  EXPECT_DOUBLE_EQ(forward_flops_per_token(mistral, 100000), forward_flops_per_token(mistral, 4096));
}

TEST(ModelCatalog, FindsThroughAliases) {
  const ModelInfo* model = catalog().find("llama-3.1-8b");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->name, "Llama-3.1-8B");
  EXPECT_EQ(catalog().find("Llama 3.1 8B"), model);
  EXPECT_EQ(catalog().find("meta-llama/Llama-3.1-8B"), model);
  EXPECT_EQ(catalog().find("deepseek-ai/DeepSeek-V3")->name, "DeepSeek-V3");
  EXPECT_EQ(catalog().find("bert-large-uncased")->name, "BERT-large");
  EXPECT_EQ(catalog().find("no-such-model"), nullptr);
}

TEST(ModelCatalog, UnknownModelSuggests) {
  try {
    catalog().get("llama-3.1-9b");
    FAIL() << "expected NotFoundError";
  } catch (const NotFoundError& e) {
    ASSERT_FALSE(e.suggestions().empty());
    EXPECT_EQ(e.exit_code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("Llama-3.1-8B"), std::string::npos) << e.what();
  }
}

// Bad data files: each case is a data directory under tests/data/models/<case>/.
DataError load_error(const std::string& name) {
  try {
    ModelCatalog::load(data::DataSource::directory(std::string(GPUSCOUT_TEST_DATA_DIR) + "/models/" + name));
  } catch (const DataError& e) {
    return e;
  }
  ADD_FAILURE() << name << ": expected a DataError";
  return DataError("", "", "", "");
}

void expect_message_names(const DataError& e, const std::string& file, const std::string& entry,
                          const std::string& field) {
  const std::string message = e.what();
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find("'" + entry + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("'" + field + "'"), std::string::npos) << message;
  EXPECT_EQ(e.entry(), entry);
  EXPECT_EQ(e.field(), field);
}

TEST(ModelCatalogErrors, MissingField) {
  const DataError e = load_error("missing_field");
  expect_message_names(e, "tiny.toml", "Tiny-1B", "architecture.layers");
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
}

TEST(ModelCatalogErrors, WrongType) {
  const DataError e = load_error("wrong_type");
  expect_message_names(e, "tiny.toml", "Tiny-1B", "architecture.hidden");
  EXPECT_NE(std::string(e.what()).find("expected an integer"), std::string::npos);
}

TEST(ModelCatalogErrors, UnknownKey) {
  const DataError e = load_error("unknown_key");
  expect_message_names(e, "tiny.toml", "Tiny-1B", "architecture.num_layers");
  EXPECT_NE(std::string(e.what()).find("unknown field"), std::string::npos);
}

TEST(ModelCatalogErrors, KvHeadsNotDividingHeads) {
  const DataError e = load_error("bad_kv_heads");
  expect_message_names(e, "tiny.toml", "Tiny-1B", "architecture.kv_heads");
  EXPECT_NE(std::string(e.what()).find("does not divide"), std::string::npos);
}

TEST(ModelCatalogErrors, HiddenNotMultipleOfHeads) {
  const DataError e = load_error("bad_head_dim");
  expect_message_names(e, "tiny.toml", "Tiny-1B", "architecture.head_dim");
}

TEST(ModelCatalogErrors, TopKAboveExperts) {
  const DataError e = load_error("bad_top_k");
  expect_message_names(e, "tiny.toml", "Tiny-MoE", "moe.top_k");
}

TEST(ModelCatalogErrors, DuplicateAliasAcrossFiles) {
  const DataError e = load_error("duplicate_alias");
  // Reported on the second file (b.toml), naming the first (a.toml) too.
  expect_message_names(e, "b.toml", "Tiny-B", "aliases");
  EXPECT_NE(std::string(e.what()).find("a.toml"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("Tiny-A"), std::string::npos) << e.what();
}

TEST(ModelCatalogErrors, SyntaxError) {
  const DataError e = load_error("syntax_error");
  const std::string message = e.what();
  EXPECT_NE(message.find("tiny.toml"), std::string::npos) << message;
  EXPECT_NE(message.find("line"), std::string::npos) << message;
}

TEST(ModelCatalogErrors, GoodTinyFileLoads) {
  const auto catalog =
      ModelCatalog::load(data::DataSource::directory(std::string(GPUSCOUT_TEST_DATA_DIR) + "/models/good"));
  ASSERT_EQ(catalog.all().size(), 1u);
  const ParamBreakdown p = catalog.all()[0].params();
  // vocab 100 x 64, 2 layers of attention 4 x 64^2 and a gated MLP 3 x 64 x 128, RMSNorms, untied head.
  EXPECT_EQ(p.total, 100 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64 + 100 * 64);
}

}  // namespace
}  // namespace gpuscout::workloads
