#include "gpuscout/infer/transformer_config.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::infer {
namespace {

const workloads::ModelCatalog& catalog() {
  static const workloads::ModelCatalog instance = workloads::ModelCatalog::load(data::DataSource::embedded());
  return instance;
}

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(TransformerConfig, Llama31_8B) {
  const auto& model = catalog().get("Llama-3.1-8B");
  const TransformerConfig c = TransformerConfig::from_model(model);
  EXPECT_EQ(c.name, "Llama-3.1-8B");
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.ffn_hidden, 14336);
  EXPECT_EQ(c.vocab, 128256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.max_context, 131072);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.qkv_dim(), 6144);
  EXPECT_EQ(c.weight_params(), workloads::count_params(model.arch).total);
  EXPECT_EQ(c.weight_params(), 8'030'261'248);
  // 2 (K, V) x 32 layers x 8 heads x 128 x 2 bytes = 128 KiB per token.
  EXPECT_EQ(c.kv_bytes_per_token(2), 131072);
  EXPECT_EQ(c.kv_bytes_per_token(1), 65536);
}

TEST(TransformerConfig, WeightParamsMatchTheCatalogForEveryAcceptedModel) {
  int accepted = 0;
  for (const auto& model : catalog().all()) {
    try {
      const TransformerConfig c = TransformerConfig::from_model(model);
      EXPECT_EQ(c.weight_params(), workloads::count_params(model.arch).total) << model.name;
      EXPECT_EQ(c.kv_bytes_per_token(2), static_cast<std::int64_t>(workloads::kv_cache_bytes_per_token(model.arch, 2)))
          << model.name;
      ++accepted;
    } catch (const UsageError&) {
    }
  }
  EXPECT_GE(accepted, 6);  // Llama 2 and 3.1 sizes and Mistral 7B
}

TEST(TransformerConfig, AcceptsLlamaFamilyAndMistral) {
  for (const char* name : {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3.1-70B", "Llama-3.1-405B"}) {
    EXPECT_NO_THROW(TransformerConfig::from_model(catalog().get(name))) << name;
  }
  const TransformerConfig l2 = TransformerConfig::from_model(catalog().get("Llama-2-7B"));
  EXPECT_EQ(l2.kv_heads, 32);
  EXPECT_DOUBLE_EQ(l2.rope_theta, 10000.0);
  EXPECT_EQ(l2.max_context, 4096);
  // Sliding window 4096: full causal attention is the same up to the window, so that is the context.
  const TransformerConfig mistral = TransformerConfig::from_model(catalog().get("Mistral-7B-v0.1"));
  EXPECT_EQ(mistral.max_context, 4096);
  EXPECT_EQ(mistral.vocab, 32000);
}

// Qwen2.5: QKV biases (the only biases the engine implements), 7 query heads per KV head, tied
// embeddings on the small sizes only; every parameter the catalog counts is one the engine holds.
TEST(TransformerConfig, AcceptsQwenWithQkvBiases) {
  for (const char* name : {"Qwen2.5-7B", "Qwen2.5-72B"}) {
    const TransformerConfig c = TransformerConfig::from_model(catalog().get(name));
    EXPECT_TRUE(c.qkv_bias) << name;
    EXPECT_EQ(c.weight_params(), catalog().get(name).params().total) << name;
  }
  const TransformerConfig q7 = TransformerConfig::from_model(catalog().get("Qwen2.5-7B"));
  EXPECT_EQ(q7.heads / q7.kv_heads, 7);
  EXPECT_EQ(q7.qkv_dim(), 3584 + 2 * 512);
  EXPECT_DOUBLE_EQ(q7.rope_theta, 1000000.0);
  const TransformerConfig llama = TransformerConfig::from_model(catalog().get("Llama-3.1-8B"));
  EXPECT_FALSE(llama.qkv_bias);
  EXPECT_EQ(llama.weight_params(), catalog().get("Llama-3.1-8B").params().total);
}

TEST(TransformerConfig, RejectsWhatTheEngineDoesNotImplement) {
  EXPECT_NE(usage_error_of([] {
              TransformerConfig::from_model(catalog().get("Mixtral-8x7B"));
            }).find("Mixtral-8x7B: mixture-of-experts MLPs are not implemented"),
            std::string::npos);
  const std::string deepseek = usage_error_of([] { TransformerConfig::from_model(catalog().get("DeepSeek-V3")); });
  EXPECT_NE(deepseek.find("mixture-of-experts"), std::string::npos) << deepseek;
  EXPECT_NE(deepseek.find("multi-head latent attention"), std::string::npos) << deepseek;
  const std::string bert = usage_error_of([] { TransformerConfig::from_model(catalog().get("BERT-large")); });
  EXPECT_NE(bert.find("BERT-large: encoder models"), std::string::npos) << bert;
  const std::string gpt3 = usage_error_of([] { TransformerConfig::from_model(catalog().get("GPT-3-175B")); });
  for (const char* what : {"LayerNorm", "learned position embeddings", "non-gated MLPs", "gelu", "biases"}) {
    EXPECT_NE(gpt3.find(what), std::string::npos) << gpt3;
  }
}

TEST(TransformerConfig, ProjectionParamsAndWeightFormats) {
  const TransformerConfig c = TransformerConfig::tiny();
  // 2 x (128 x 256 + 128 x 128 + 3 x 128 x 256), the rest is embedding, norms and LM head.
  EXPECT_EQ(c.projection_params(), 294912);
  EXPECT_EQ(c.weight_params() - c.projection_params(), 2 * 512 * 128 + 2 * 2 * 128 + 128);
  EXPECT_EQ(parse_weight_format("bf16", "--weights"), WeightFormat::bf16);
  EXPECT_EQ(parse_weight_format("fp8", "--weights"), WeightFormat::fp8_e4m3);
  EXPECT_STREQ(to_string(WeightFormat::fp8_e4m3), "fp8");
  const std::string e = usage_error_of([] { parse_weight_format("int8", "--weights"); });
  EXPECT_NE(e.find("--weights"), std::string::npos);
  EXPECT_NE(e.find("bf16 or fp8"), std::string::npos);
  EXPECT_NE(e.find("int8"), std::string::npos);
}

TEST(TransformerConfig, Tiny) {
  const TransformerConfig c = TransformerConfig::tiny();
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.hidden, 128);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.ffn_hidden, 256);
  EXPECT_EQ(c.vocab, 512);
  EXPECT_EQ(c.max_context, 1024);
  EXPECT_EQ(c.qkv_dim(), 256);
  // embedding + 2 x (QKV + O + 3 MLP + 2 norms) + final norm + LM head.
  EXPECT_EQ(c.weight_params(), 512 * 128 + 2 * (128 * 256 + 128 * 128 + 3 * 128 * 256 + 2 * 128) + 128 + 512 * 128);
  TransformerConfig tied = c;
  tied.tied_embeddings = true;
  EXPECT_EQ(tied.weight_params(), c.weight_params() - 512 * 128);
  EXPECT_EQ(c.kv_bytes_per_token(2), 2 * 2 * 2 * 32 * 2);
}

TEST(TransformerConfig, TensorParallel) {
  const TransformerConfig c = TransformerConfig::from_model(catalog().get("Llama-3.1-70B"));
  for (int tp : {1, 2, 4, 8}) EXPECT_NO_THROW(c.check_tensor_parallel(tp)) << tp;
  const std::string three = usage_error_of([&] { c.check_tensor_parallel(3); });
  EXPECT_NE(three.find("--tp 3"), std::string::npos) << three;
  EXPECT_NE(three.find("64 query heads"), std::string::npos) << three;
  EXPECT_NE(three.find("1, 2, 4 and 8"), std::string::npos) << three;
  const std::string sixteen = usage_error_of([&] { c.check_tensor_parallel(16); });
  EXPECT_NE(sixteen.find("8 KV heads"), std::string::npos) << sixteen;
  EXPECT_NE(usage_error_of([&] { c.check_tensor_parallel(0); }).find("--tp 0"), std::string::npos);
  TransformerConfig odd_ffn = TransformerConfig::tiny();
  odd_ffn.ffn_hidden = 250;
  odd_ffn.kv_heads = 4;
  EXPECT_NE(usage_error_of([&] { odd_ffn.check_tensor_parallel(4); }).find("an FFN width of 250"), std::string::npos);
}

}  // namespace
}  // namespace gpuscout::infer
