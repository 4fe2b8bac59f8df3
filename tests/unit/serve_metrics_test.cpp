#include "gpuscout/bench/serve_metrics.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpuscout/bench/serve_options.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::bench {
namespace {

using infer::TransformerConfig;
using infer::WeightFormat;
using results::Outcome;
using results::Record;

const workloads::ModelCatalog& catalog() {
  static const workloads::ModelCatalog instance = workloads::ModelCatalog::load(data::DataSource::embedded());
  return instance;
}

TransformerConfig llama(const std::string& name) {
  return TransformerConfig::from_model(catalog().get(name));
}

// The tiny configuration by hand: hidden 128, 4 query heads and 2 KV heads of 32 (QKV width
// (4 + 2 x 2) x 32 = 256), FFN 256, 2 layers, vocab 512, untied.
//   per layer: QKV 128 x 256 = 32768, O 128 x 128 = 16384, gate/up/down 3 x 128 x 256 = 98304,
//   two norms 256: 147712; two layers 295424.
TEST(ServeMetrics, LayerParamsByHand) {
  EXPECT_EQ(layer_params(TransformerConfig::tiny()), 295424);
  // Llama-3.1-8B: 32 x (4096 x 6144 + 4096 x 4096 + 3 x 4096 x 14336 + 8192) = 6 979 584 000; with the
  // embedding and LM head (2 x 128256 x 4096) and the final norm 4096: the published 8.03 B.
  const TransformerConfig m = llama("Llama-3.1-8B");
  EXPECT_EQ(layer_params(m), 6979584000);
  EXPECT_EQ(layer_params(m) + 2 * std::int64_t{128256} * 4096 + 4096, m.weight_params());
  EXPECT_EQ(m.weight_params(), 8030261248);
}

TEST(ServeMetrics, PrefillFlopsByHand) {
  // tiny, 10 tokens: matmuls 2 x 295424 x 10 = 5 908 480; attention 2 layers x 4 x 4 heads x 32 x
  // (10 x 11 / 2) = 56 320; LM head of the last token 2 x 512 x 128 = 131 072.
  EXPECT_DOUBLE_EQ(prefill_flops(TransformerConfig::tiny(), 10), 6095872.0);
  EXPECT_DOUBLE_EQ(prefill_flops(TransformerConfig::tiny(), 0), 131072.0);  // the LM head alone
  // Llama-3.1-8B, 8192 tokens: 2 x 6 979 584 000 x 8192 + 32 x 4 x 32 x 128 x 8192 x 8193 / 2
  // + 2 x 128256 x 4096 = 131 948 888 457 216, the `flops` param of the committed 8B serve run
  // (bench/results/h200-serve-llama-3.1-8b-20261130.json).
  EXPECT_DOUBLE_EQ(prefill_flops(llama("Llama-3.1-8B"), 8192), 131948888457216.0);
  // Attention grows with the square of the prompt: doubling it more than doubles the FLOPs.
  const TransformerConfig m = llama("Llama-3.1-8B");
  EXPECT_GT(prefill_flops(m, 16384) - 2 * prefill_flops(m, 8192), 0);
}

TEST(ServeMetrics, PrefillFlopsWithThePrunedLastLayerByHand) {
  // tiny, 10 tokens: layer 1 as above, 2 x 147 712 x 10 + 4 x 4 x 32 x 55 = 2 982 400; the last
  // layer's attention norm and QKV for all 10 tokens 2 x (128 x 256 + 128) x 10 = 657 920, its
  // other 114 816 params for the last token 2 x 114 816 = 229 632, that token's attention over 10
  // keys 4 x 4 x 32 x 10 = 5 120; LM head 131 072.
  const TransformerConfig tiny = TransformerConfig::tiny();
  EXPECT_DOUBLE_EQ(prefill_flops(tiny, 10, true), 4006144.0);
  EXPECT_DOUBLE_EQ(prefill_flops(tiny, 0, true), 131072.0);  // no token: the LM head alone, as unpruned
  // Llama-3.1-8B at 8192 tokens saves the last layer's other params for 8191 tokens and its causal
  // attention but one query: 2 x (218 112 000 - 25 169 920) x 8191 + 4 x 32 x 128 x (8192 x 8193 / 2
  // - 8192) = 3 160 777 154 560 + 549 688 705 024 FLOPs, 2.8% of the 131.9 TFLOP above.
  const TransformerConfig m = llama("Llama-3.1-8B");
  EXPECT_DOUBLE_EQ(prefill_flops(m, 8192) - prefill_flops(m, 8192, true), 3160777154560.0 + 549688705024.0);
}

TEST(ServeMetrics, DecodeStepBytesByHand) {
  // tiny, batch 2 at context 9 over TP 2: weights 426624 params - the 65536-entry embedding table =
  // 361088 x 2 B = 722176 B; K/V 2 layers x 2 x 64 x 2 B = 512 B per token x 2 sequences x 10
  // positions = 10240 B; per GPU (722176 + 10240) / 2 = 366208.
  const DecodeStepBytes b = decode_step_bytes(TransformerConfig::tiny(), 2, 9, 2);
  EXPECT_EQ(b.weight_bytes, 722176);
  EXPECT_EQ(b.kv_bytes, 10240);
  EXPECT_DOUBLE_EQ(b.per_gpu, 366208.0);
  // Tied embeddings: the one table is read whole as the LM head, so a step reads the same bytes.
  TransformerConfig tied = TransformerConfig::tiny();
  tied.tied_embeddings = true;
  EXPECT_EQ(decode_step_bytes(tied, 2, 9, 2).weight_bytes, 722176);
  // FP8 projections: 2 layers x (128 x 256 QKV + 128 x 128 O + 3 x 128 x 256 MLP) = 294912 at
  // 1 B, the other 66176 (norms, final norm, LM head) at 2 B: 427264 B; the KV cache stays BF16.
  const DecodeStepBytes fp8 = decode_step_bytes(TransformerConfig::tiny(), 2, 9, 1, WeightFormat::fp8_e4m3);
  EXPECT_EQ(fp8.weight_bytes, 427264);
  EXPECT_EQ(fp8.kv_bytes, 10240);

  // The params of the committed serve runs (bench/results/h200-serve-llama-3.1-8b-20261130.json and
  // h200x2-serve-llama-3.1-70b-tp2-20261130.json).
  const DecodeStepBytes b32 = decode_step_bytes(llama("Llama-3.1-8B"), 32, 512, 1);
  EXPECT_EQ(b32.weight_bytes, 15009849344);
  EXPECT_EQ(b32.kv_bytes, 2151677952);
  EXPECT_DOUBLE_EQ(b32.per_gpu, 17161527296.0);
  const DecodeStepBytes tp2 = decode_step_bytes(llama("Llama-3.1-70B"), 1, 512, 2);
  EXPECT_EQ(tp2.weight_bytes, 139006066688);
  EXPECT_EQ(tp2.kv_bytes, 168099840);
  EXPECT_DOUBLE_EQ(tp2.per_gpu, 69587083264.0);
}

TEST(ServeMetrics, HbmRoofline) {
  // 4.2 GB per GPU at 4200 GB/s: 1 ms; a step of 2 ms is 50% of the roofline.
  EXPECT_DOUBLE_EQ(roofline_step_ms(4.2e9, 4200), 1.0);
  EXPECT_DOUBLE_EQ(hbm_roofline_pct(4.2e9, 2e-3, 4200), 50.0);
  // The 8B batch-1 decode record of the committed run: 15 077 089 280 B per step, copy 4236.4 GB/s,
  // median step 5.005 ms -> roofline 3.559 ms, 71.1%.
  EXPECT_NEAR(roofline_step_ms(15077089280.0, 4236.403315647627), 3.558936238273418, 1e-12);
  EXPECT_NEAR(hbm_roofline_pct(15077089280.0, 5.0049065e-3, 4236.403315647627), 71.10894555719308, 1e-9);
}

TEST(ServeMetrics, KvBlocksRoundUp) {
  EXPECT_EQ(kv_blocks_for(0, 16), 0);
  EXPECT_EQ(kv_blocks_for(1, 16), 1);
  EXPECT_EQ(kv_blocks_for(512, 16), 32);
  EXPECT_EQ(kv_blocks_for(513, 16), 33);
  EXPECT_EQ(kv_blocks_for(8193, 256), 33);
}

Record gemm(const std::string& precision, int m, int n, int k, double tflops, Outcome outcome = Outcome::passed) {
  Record r;
  r.key = "gemm/" + precision + "/m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" + std::to_string(k);
  r.benchmark = "gemm";
  r.params = {{"precision", precision}, {"m", m}, {"n", n}, {"k", k}};
  r.metrics.push_back({"throughput", tflops, "TFLOP/s", "median", 10, std::nullopt, ""});
  r.outcome = outcome;
  return r;
}

Record serve(const std::string& key, double value, const std::string& unit, Outcome outcome = Outcome::passed) {
  Record r;
  r.key = key;
  r.benchmark = "serve";
  r.metrics.push_back({"throughput", value, unit, "median", 5, std::nullopt, ""});
  r.outcome = outcome;
  return r;
}

TEST(ServeMetrics, PrefillAgainstTheBestSquareBf16Gemm) {
  std::vector<Record> records = {
      gemm("bf16", 4096, 4096, 4096, 650),
      gemm("bf16", 8192, 8192, 8192, 700),                   // the reference
      gemm("bf16", 16384, 4096, 4096, 760),                  // not square
      gemm("fp8", 8192, 8192, 8192, 1250),                   // not BF16
      gemm("bf16", 2048, 2048, 2048, 900, Outcome::failed),  // not passed
      serve("serve/prefill/llama-3.1-8b/tp1/t8192", 476, "TFLOP/s"),
      serve("serve/prefill/llama-3.1-8b/tp1/t2048", 300, "TFLOP/s", Outcome::skipped),
      serve("serve/decode/llama-3.1-8b/tp1/b1_ctx512", 200, "tokens/s"),
      serve("serve/prefill/llama-3.1-8b/tp1/t4096", 9000, "tokens/s"),  // no TFLOP/s throughput
  };
  EXPECT_EQ(annotate_prefill_vs_gemm(records), 1);
  const Record& prefill = records[5];
  const results::Metric* pct = prefill.find_metric("throughput_pct_of_gemm");
  ASSERT_NE(pct, nullptr);
  EXPECT_DOUBLE_EQ(pct->value, 68.0);  // 476 / 700
  EXPECT_EQ(pct->unit, "%");
  EXPECT_NE(pct->note.find("gemm/bf16/m8192_n8192_k8192"), std::string::npos);
  EXPECT_EQ(prefill.extra["gemm_reference"]["key"], "gemm/bf16/m8192_n8192_k8192");
  EXPECT_DOUBLE_EQ(prefill.extra["gemm_reference"]["throughput_tflops"].get<double>(), 700);
  for (std::size_t i : {6u, 7u, 8u}) {
    EXPECT_EQ(records[i].find_metric("throughput_pct_of_gemm"), nullptr) << records[i].key;
    EXPECT_FALSE(records[i].extra.contains("gemm_reference")) << records[i].key;
  }
}

TEST(ServeMetrics, Fp8PrefillAgainstTheBestSquareFp8Gemm) {
  std::vector<Record> records = {gemm("bf16", 8192, 8192, 8192, 700), gemm("fp8", 8192, 8192, 8192, 1250),
                                 serve("serve/prefill/llama-3.1-8b/tp1-fp8/t8192", 800, "TFLOP/s"),
                                 serve("serve/prefill/llama-3.1-8b/tp1/t8192", 476, "TFLOP/s")};
  records[2].params["dtype"] = "fp8";
  EXPECT_EQ(annotate_prefill_vs_gemm(records), 2);
  EXPECT_DOUBLE_EQ(records[2].find_metric("throughput_pct_of_gemm")->value, 64.0);  // 800 / 1250
  EXPECT_EQ(records[2].extra["gemm_reference"]["key"], "gemm/fp8/m8192_n8192_k8192");
  EXPECT_DOUBLE_EQ(records[3].find_metric("throughput_pct_of_gemm")->value, 68.0);  // 476 / 700
  // No FP8 GEMM in the run: the FP8 prefill is left alone, not compared with the BF16 rate.
  records = {gemm("bf16", 8192, 8192, 8192, 700), serve("serve/prefill/llama-3.1-8b/tp1-fp8/t8192", 800, "TFLOP/s")};
  records[1].params["dtype"] = "fp8";
  EXPECT_EQ(annotate_prefill_vs_gemm(records), 0);
  EXPECT_EQ(records[1].find_metric("throughput_pct_of_gemm"), nullptr);
}

TEST(ServeMetrics, NoGemmReferenceLeavesPrefillAlone) {
  std::vector<Record> records = {gemm("bf16", 16384, 4096, 4096, 760), gemm("fp8", 8192, 8192, 8192, 1250),
                                 serve("serve/prefill/llama-3.1-8b/tp1/t8192", 476, "TFLOP/s")};
  EXPECT_EQ(annotate_prefill_vs_gemm(records), 0);
  EXPECT_EQ(records[2].find_metric("throughput_pct_of_gemm"), nullptr);
  EXPECT_EQ(records[2].metrics.size(), 1u);
}

TEST(ServeStepBudget, VllmDefaultsByScenarioAndGpu) {
  const ServeOptions defaults;
  constexpr std::uint64_t kGiB = 1ULL << 30;
  using serve::Scenario;
  // 141 GB H200 and 80 GB H100: the large-GPU budgets.
  EXPECT_EQ(step_token_budget(defaults, Scenario::offline, 141 * kGiB, "NVIDIA H200"), 16384);
  EXPECT_EQ(step_token_budget(defaults, Scenario::server, 141 * kGiB, "NVIDIA H200"), 8192);
  EXPECT_EQ(step_token_budget(defaults, Scenario::single_stream, 80 * kGiB, "NVIDIA H100 80GB HBM3"), 8192);
  // The A100 80GB is excluded by name (vLLM found the large budget slower there), in any case.
  EXPECT_EQ(step_token_budget(defaults, Scenario::offline, 80 * kGiB, "NVIDIA A100-SXM4-80GB"), 8192);
  EXPECT_EQ(step_token_budget(defaults, Scenario::server, 80 * kGiB, "nvidia a100 80gb pcie"), 2048);
  // Under 70 GiB (L40S 48 GB).
  EXPECT_EQ(step_token_budget(defaults, Scenario::offline, 45 * kGiB, "NVIDIA L40S"), 8192);
  EXPECT_EQ(step_token_budget(defaults, Scenario::server, 45 * kGiB, "NVIDIA L40S"), 2048);
  // --max-step-tokens wins everywhere.
  ServeOptions given;
  given.max_step_tokens = 4096;
  EXPECT_EQ(step_token_budget(given, Scenario::offline, 141 * kGiB, "NVIDIA H200"), 4096);
  EXPECT_EQ(step_token_budget(given, Scenario::server, 45 * kGiB, "NVIDIA L40S"), 4096);
}

}  // namespace
}  // namespace gpuscout::bench
