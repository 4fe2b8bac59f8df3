#pragma once
// The arithmetic of the serve benchmark's figures (backends/cuda/benchmarks/serve.cpp), kept out of
// the CUDA file so CI tests it: the FLOPs of a prefill, the bytes a decode step must read and its
// HBM roofline, and the one comparison of serve records with other records of the same run (prefill
// against the measured BF16 GEMM rate). Pure C++17: included by CUDA sources.
#include <cstdint>
#include <vector>

#include "gpuscout/infer/transformer_config.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::bench {

// Parameters of the decoder layers (what a token's matrix products multiply by: attention and MLP
// projections and norms), without the embedding table and the LM head.
std::int64_t layer_params(const infer::TransformerConfig& model);
// FLOPs of one prefill of `tokens` prompt tokens on the whole model (all TP ranks together):
// 2 x layer params x tokens, plus causal attention (QK^T and PV over the lower triangle:
// 4 x heads x head_dim x tokens (tokens + 1) / 2 per layer), plus the LM head of the last token.
// last_layer_pruned: the FLOPs an engine that finishes the last layer for the last token only
// executes (CudaEngine's prune_last_layer): there every token's attention norm and QKV
// projection (its K/V are stored), but attention (one query over all tokens), o, the MLP norm and
// the MLP for the last token alone.
double prefill_flops(const infer::TransformerConfig& model, std::int64_t tokens, bool last_layer_pruned = false);

// Bytes one decode-only step of `batch` sequences at `context` tokens must read, over all GPUs:
// every weight but the embedding table (a step gathers `batch` rows of it; tied embeddings are read
// whole as the LM head), and the K/V of every position each sequence attends to (its context plus
// the new token). BF16 everywhere, except the projection matrices under WeightFormat::fp8_e4m3
// (1 byte each: the gpuscout engine's FP8 mode, which keeps the KV cache and LM head in BF16).
struct DecodeStepBytes {
  std::int64_t weight_bytes = 0;
  std::int64_t kv_bytes = 0;
  double per_gpu = 0;  // (weight_bytes + kv_bytes) / tp: TP splits both evenly
};
DecodeStepBytes decode_step_bytes(const infer::TransformerConfig& model, int batch, int context, int tp,
                                  infer::WeightFormat format = infer::WeightFormat::bf16);

// The step time the HBM roofline allows: `bytes_per_gpu` at `copy_gbps` (GB/s, 1 GB = 1e9 B), in ms.
double roofline_step_ms(double bytes_per_gpu, double copy_gbps);
// How close a step of `step_seconds` comes to that roofline, in %: 100 x roofline time / step time.
double hbm_roofline_pct(double bytes_per_gpu, double step_seconds, double copy_gbps);

// KV-cache blocks of `block_size` tokens that `tokens` positions take (rounded up).
std::int64_t kv_blocks_for(std::int64_t tokens, int block_size);

// Adds to every passed serve/prefill record the metric "throughput_pct_of_gemm" (%): its TFLOP/s
// over the best square GEMM of the record's dtype param (gemm/bf16/mN_nN_kN, or gemm/fp8/... for
// the FP8 engine; bf16 when absent) measured in the same run, named in extra["gemm_reference"].
// Returns the number of records annotated (0 when no such GEMM record).
int annotate_prefill_vs_gemm(std::vector<results::Record>& records);

}  // namespace gpuscout::bench
