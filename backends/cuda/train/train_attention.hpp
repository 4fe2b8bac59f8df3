#pragma once
// Fused causal attention of the train step (flash-attention-2 on mma.sync tensor cores), forward
// and backward, reading Q, K and V in place from the fused [tokens, q | k | v] rows: per token
// row, query head h at column h D, KV head g at q_dim + g D (K) and q_dim + kv_dim + g D (V);
// query head h uses KV head h / (heads / kv_heads). Rows are sequence-major: row b seq + i is
// position i of sequence b. Head dims 32, 64 and 128; BF16 in and out, FP32 softmax and
// accumulation. No [seq, seq] tensor is ever stored: the forward keeps one FP32 log-sum-exp per
// (sequence, head, row) and the backward recomputes the probabilities tile by tile from it.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace gpuscout::cuda::train {

using bf16 = __nv_bfloat16;

#ifdef __CUDACC__
#define GPUSCOUT_FLASH_HD __host__ __device__
#else
#define GPUSCOUT_FLASH_HD
#endif

struct FlashShape {
  int batch, seq, heads, kv_heads, head_dim;
  GPUSCOUT_FLASH_HD int q_dim() const { return heads * head_dim; }
  GPUSCOUT_FLASH_HD int kv_dim() const { return kv_heads * head_dim; }
  GPUSCOUT_FLASH_HD int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
};
#undef GPUSCOUT_FLASH_HD

// out [rows, q_dim] = softmax(scale Q K^T, causal) V with scale = 1/sqrt(head_dim);
// lse[(b heads + h) seq + i] = log2 of row i's softmax denominator in the log2 domain
// (max(s) scale log2(e) + log2(sum 2^(s scale log2(e) - max)), what the backward subtracts).
void launch_flash_attention_forward(const bf16* qkv, const FlashShape& shape, bf16* out, float* lse,
                                    cudaStream_t stream);

// From dO (dout, [rows, q_dim] as out), the forward's lse and delta[(b heads + h) seq + i] =
// dO . O of that row (launch_attention_delta): dQ, dK and dV into the Q, K and V columns of dqkv
// (same layout as qkv; every element written, nothing accumulated across calls). Two kernels, no
// atomics, so the result is deterministic: one block per (sequence, KV head, 64-key tile) sums
// dK and dV in registers over every query tile and every query head of the group; one block per
// (sequence, head, 64-query tile) sums dQ over its key tiles (P and dP recomputed there too).
void launch_flash_attention_backward(const bf16* qkv, const bf16* dout, const float* lse, const float* delta,
                                     const FlashShape& shape, bf16* dqkv, cudaStream_t stream);

}  // namespace gpuscout::cuda::train
