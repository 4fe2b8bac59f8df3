#pragma once
// What `gpuscout bench --only serve` measures, as the CLI validated it (before any GPU is touched),
// and the one comparison of serve records with other records of the same run (prefill against the
// measured BF16 GEMM rate). Pure C++17: included by the CUDA backend's benchmark.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/infer/transformer_config.hpp"
#include "gpuscout/results/result.hpp"
#include "gpuscout/serve/loadgen.hpp"

namespace gpuscout::bench {

// The catalog model `serve` uses without --model.
inline constexpr const char* kDefaultServeModel = "llama-3.1-8b";

struct ServeOptions {
  infer::TransformerConfig model;             // resolved from the catalog (kDefaultServeModel without --model)
  std::string model_slug;                     // lower-case catalog name, the model part of every record key
  int tp = 1;                                 // tensor-parallel GPUs (--tp, else the number of --gpus given)
  std::vector<int> decode_batches{1, 8, 32};  // --serve-batch: decode roofline cases
  std::vector<int> prefill_tokens{8192};      // --serve-prefill: one prompt of each length
  int isl = 512, osl = 128;                   // decode context; static batch prompt/output lengths; fixed load lengths
  // --scenario (or --find-peak, which implies server): the load-generator case; absent: not run.
  std::optional<serve::LoadSettings> load;
  bool find_peak = false;
  serve::PeakSearch peak;
  std::int64_t kv_blocks = 0;  // --kv-blocks: cap on the engine's KV-cache blocks; 0: as memory allows
  int max_batch = 0;           // --max-batch: the engine's largest decode batch; 0: its default
  // Longest sequence any case needs (prompt + output), for the engine's context.
  int max_sequence_tokens() const;
};

// Whether a --only selector names the benchmark `key` itself or one of its cases ("serve",
// "serve/decode"), as an opt-in benchmark (serve) must be named: a prefix of its key ("s") or an
// empty --only does not select it.
bool names_benchmark(const std::vector<std::string>& selectors, std::string_view key);

// "Llama-3.1-8B" -> "llama-3.1-8b" (record keys are lower case on every machine).
std::string model_slug(std::string_view catalog_name);

// Parameters of the decoder layers (what a token's matrix products multiply by: attention and MLP
// projections and norms), without the embedding table and the LM head.
std::int64_t layer_params(const infer::TransformerConfig& model);
// FLOPs of one prefill of `tokens` prompt tokens on the whole model (all TP ranks together):
// 2 x layer params x tokens, plus causal attention (QK^T and PV over the lower triangle:
// 4 x heads x head_dim x tokens (tokens + 1) / 2 per layer), plus the LM head of the last token.
double prefill_flops(const infer::TransformerConfig& model, std::int64_t tokens);

// Adds to every passed serve/prefill record the metric "throughput_pct_of_gemm" (%): its TFLOP/s
// over the best BF16 square GEMM (gemm/bf16/mN_nN_kN) measured in the same run, named in
// extra["gemm_reference"]. Returns the number of records annotated (0 when no such GEMM record).
int annotate_prefill_vs_gemm(std::vector<results::Record>& records);

}  // namespace gpuscout::bench
