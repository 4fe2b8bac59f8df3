#pragma once
// The serving engine's own CUDA kernels (GEMMs go through cuBLASLt in the engine; the skinny GEMM
// here is the alternative the engine times against it for decode batches of a few rows).
//
// Conventions (shared with the engine and the CPU reference, include/gpuscout/infer/):
//   - activations are row-major [rows, width] BF16; every kernel accumulates in FP32;
//   - the fused QKV buffer is [T, qkv_stride] with Q in columns [0, heads*D), K in
//     [heads*D, (heads+kv_heads)*D) and V after it (heads are those of this tensor-parallel rank);
//   - the paged KV cache of one layer is k_cache and v_cache, each [num_blocks, kv_heads,
//     block_size, D]; token t of a sequence lives in block block_table[t / block_size] at offset
//     t % block_size; a slot is block * block_size + offset, slot -1 means "do not store";
//   - RoPE rotates pairs (i, i + D/2) (the Hugging Face Llama convention) with inverse frequency
//     theta^(-2i/D), angle = position * inv_freq, computed in FP32;
//   - attention: query head h uses KV head h / (heads / kv_heads); scale 1/sqrt(D); a query at
//     position p attends to cache positions [0, p] (causal), all of which are already stored.
// Every launch_* enqueues on `stream` and returns; none synchronizes or allocates, so they can be
// captured in CUDA graphs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "gpuscout/infer/weights.hpp"

namespace gpuscout::cuda::infer {

using bf16 = __nv_bfloat16;

struct AttentionShape {
  int heads = 0;       // query heads on this rank
  int kv_heads = 0;    // KV heads on this rank
  int head_dim = 0;    // D: 64 or 128 (kernels may require one of these; check_attention_shape says)
  int block_size = 0;  // tokens per KV block
};

// The sequences of one attention call (device arrays of num_seqs entries, except block_tables).
struct AttentionBatch {
  const std::int32_t* q_start = nullptr;       // first row of the sequence's queries in the Q/out buffers
  const std::int32_t* q_len = nullptr;         // queries of the sequence (decode: 1)
  const std::int32_t* context_len = nullptr;   // cached tokens it attends to, its own queries included
  const std::int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  int num_seqs = 0;     // launch size; sequences with q_len 0 or context_len 0 are padding (skipped)
  int max_context = 0;  // host-known bound on context_len (grid sizing; fixed for graph capture)
  int max_q_len = 0;    // host-known bound on q_len
};

// Programmatic dependent launch for the kernels below (except prefill attention and weight init):
// each may start while the previous kernel of the stream finishes, prefetching what does not
// depend on it (kernel_util.cuh). Process-wide; off by default, and only meaningful on compute
// capability 9.0 or newer (the engine turns it on there unless told not to).
void set_programmatic_launch(bool enabled);
bool programmatic_launch();
// On the current device, asks the shared-memory carveout of the GEMMs' (the largest) for the small
// elementwise kernels of a step (gather, RMSNorm, RoPE + KV store, SiLU * up, argmax), so that an SM
// need not change its L1 / shared-memory split between them and the GEMMs. The engine does so
// unless GPUSCOUT_SMALL_KERNEL_CARVEOUT=0: on an H100 its batch-32 steps were 1.0-1.2% shorter in
// four interleaved rounds with the configuration search on, and unchanged with it off
// (bench/NOTES.md, session 29; why is not established). Not measured on an H200.
void prefer_shared_carveout_in_small_kernels();
// While one is alive, this thread's launches are plain ones (for timing kernels in isolation).
class ProgrammaticLaunchPause {
 public:
  ProgrammaticLaunchPause();
  ~ProgrammaticLaunchPause();
  ProgrammaticLaunchPause(const ProgrammaticLaunchPause&) = delete;
  ProgrammaticLaunchPause& operator=(const ProgrammaticLaunchPause&) = delete;
};

// Empty string when the kernels support the shape, else why not ("head_dim 96 not supported: 64 or 128").
const char* check_attention_shape(const AttentionShape& shape);

// dst[r, c] = bf16(weight_value(tensor_stream(seed, kind, layer), kind, (row0 + r) * in_features + col0 + c,
// in_features)) for r < rows, c < cols: one tensor-parallel shard (or all) of a full [*, in_features] tensor. Norm
// vectors: rows = 1, in_features = their width.
void launch_init_weights(bf16* dst, std::uint64_t seed, gpuscout::infer::WeightKind kind, std::uint32_t layer,
                         int in_features, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols,
                         cudaStream_t stream);

// out[t] = table[tokens[t]] (rows of width `hidden`). A token -1 - j is previous_sampled[j]: the
// token the step before sampled in its row j, read on the GPU (pipelined stepping).
void launch_embedding(const std::int32_t* tokens, int rows, const bf16* table, int hidden, bf16* out,
                      cudaStream_t stream, const std::int32_t* previous_sampled = nullptr);

// out = x / sqrt(mean(x^2) + eps) * weight, per row. out may not alias x.
void launch_rmsnorm(const bf16* x, const bf16* weight, int rows, int width, float eps, bf16* out, cudaStream_t stream);

// Rotates Q and K of each token in place in the fused QKV buffer by its position, then stores the
// rotated K and the V of token t at slot_mapping[t] of the layer's cache. With `qkv_bias` (one BF16
// value per QKV column of this rank, Qwen2.5) the bias is added first: to Q and K in FP32 before
// the rotation rounds them, to V on its way into the cache (the buffer's V columns stay unbiased;
// attention reads V from the cache only).
void launch_rope_store_kv(bf16* qkv, int qkv_stride, const std::int32_t* positions, const std::int32_t* slot_mapping,
                          int rows, const AttentionShape& shape, float rope_theta, bf16* k_cache, bf16* v_cache,
                          cudaStream_t stream, const bf16* qkv_bias = nullptr);

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, ffn + i] (gate columns first, then up).
void launch_silu_mul(const bf16* gate_up, int rows, int ffn, bf16* out, cudaStream_t stream);

// Decode attention (every sequence has q_len 1), one of two kernels: streaming, a fixed grid (by
// default the SMs times the blocks resident per SM) sharing the K/V tiles of all pairs evenly
// between its blocks, a pair spread over several blocks being merged by the last of them; or split,
// flash-decoding splits sized from max_context and a merge kernel. The plan names the kernel and
// grid; `automatic` chooses by the number of (sequence, KV head) pairs, which the host knows (graph
// capture keeps the choice): streaming from 64 pairs, split below. `workspace`:
// decode_attention_workspace_bytes() (enough for any smaller batch or max_context), zero-filled
// once before the first launch; each launch leaves the merge counters in it at zero.
struct DecodeAttentionPlan {
  enum class Kernel { automatic, split, streaming, pairs };
  Kernel kernel = Kernel::automatic;
  int grid_blocks = 0;  // streaming: blocks of the grid; 0: the SMs times the blocks resident per SM
  int stages = 3;       // pairs: each warp's ring of 16-token tiles (2 or 3); the split kernel runs where it cannot
};
std::size_t decode_attention_workspace_bytes(int num_seqs, int heads, int head_dim, int max_context);
void launch_decode_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                             const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                             int out_stride, cudaStream_t stream, const DecodeAttentionPlan& plan = {});
// The plans worth timing on the current GPU for this head size (the engine times them per decode
// bucket and context class at start-up): split, streaming on 1, 2, ... blocks per SM up to the
// blocks that fit one SM, and the pair kernel with 3 and 2 stages where it runs (head size 64 or 128;
// GPUSCOUT_DECODE_PAIR_KERNEL=0 leaves it out). describe(): "split", "streaming 264 blocks (2/SM)",
// "pairs (3 stages)", "automatic".
std::vector<DecodeAttentionPlan> decode_attention_candidates(int head_dim);
// The most sequences one streaming launch fits this GPU's shared memory for (0: none); beyond them
// launch_decode_attention runs the split kernel, whatever the plan asked for.
int decode_attention_streaming_max_seqs(int head_dim);
std::string describe(const DecodeAttentionPlan& plan);

// Prefill attention (chunks of q_len >= 1, causal over the cached context) on tensor cores.
void launch_prefill_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                              const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                              cudaStream_t stream);

// out[i] = x[rows_index[i]] for i < count (the last token of each sampling chunk before the LM head).
void launch_gather_rows(const bf16* x, const std::int32_t* rows_index, int count, int width, bf16* out,
                        cudaStream_t stream);

// Greedy sampling: per row, the index of the largest logit (lowest index on ties) plus
// `index_offset` (a vocabulary shard's first id), and the logit itself when `max_value` is set.
// `host_index` (mapped host memory, or null): the indices written there too, so that the host has
// them when the step's event completes, with no copy after the kernel.
void launch_argmax(const bf16* logits, int rows, int vocab, int index_offset, std::int32_t* max_index, float* max_value,
                   cudaStream_t stream, std::int32_t* host_index = nullptr);
// Tensor-parallel sampling: per row, the shard with the largest value (lowest id on ties) from
// `ranks` candidates laid out [ranks, rows] (after an all-gather); `host_out` as launch_argmax's.
void launch_argmax_merge(const std::int32_t* candidate_index, const float* candidate_value, int ranks, int rows,
                         std::int32_t* out, cudaStream_t stream, std::int32_t* host_out = nullptr);

// y[r, n] = sum_k x[r, k] * w[n, k] (+ residual[r, n] when not null) for rows <= kSkinnyMaxRows:
// the bandwidth-bound decode GEMM (weights streamed once with 16-byte loads). y may alias residual.
inline constexpr int kSkinnyMaxRows = 8;
void launch_skinny_gemm(const bf16* x, int rows, const bf16* w, int n, int k, const bf16* residual, bf16* y,
                        cudaStream_t stream);

// ---- FP8 (E4M3, compute capability 8.9+) --------------------------------------------------
// Projection weights as E4M3 codes of value / scale (weights.hpp: fp8_weight_code), generated in
// place like launch_init_weights.
void launch_init_weights_fp8(std::uint8_t* dst, std::uint64_t seed, gpuscout::infer::WeightKind kind,
                             std::uint32_t layer, int in_features, std::int64_t row0, std::int64_t rows,
                             std::int64_t col0, std::int64_t cols, float scale, cudaStream_t stream);

// Device words of one dynamic per-tensor quantization: the running maximum (float bits), a block
// counter and the resulting scale (amax / 448), which cuBLASLt reads as the B scale. Zero-initialize
// once; each call leaves the first two at zero again.
struct Fp8Scratch {
  unsigned* amax_bits = nullptr;
  unsigned* blocks_done = nullptr;
  float* scale = nullptr;
};

// Only the scale: *scratch.scale = max|x| / format_max over `count` elements (1 if all are zero);
// format_max is 448 for E4M3, 57344 for E5M2. x 16-byte aligned. The train step's FP8 GEMMs.
void launch_fp8_scale(const bf16* x, std::int64_t count, const Fp8Scratch& scratch, float format_max,
                      cudaStream_t stream);

// out[i] = E4M3(x[i] / scale) with scale = max|x| / 448 over all `count` elements (two kernels:
// the maximum, then the conversion). x 16-byte and out 8-byte aligned.
void launch_quantize_fp8(const bf16* x, std::int64_t count, const Fp8Scratch& scratch, std::uint8_t* out,
                         cudaStream_t stream);

// launch_skinny_gemm with FP8 weights: y[r, n] = w_scale * sum_k x[r, k] * code[n, k] (+ residual),
// BF16 activations (weight-only FP8: a decode step is bound by the weight bytes, which halve).
void launch_skinny_gemm_fp8(const bf16* x, int rows, const std::uint8_t* w, float w_scale, int n, int k,
                            const bf16* residual, bf16* y, cudaStream_t stream);

}  // namespace gpuscout::cuda::infer
