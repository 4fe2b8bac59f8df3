#pragma once
// The train step's own kernels: the backward passes of RMSNorm, SwiGLU and RoPE, the causal softmax
// of the materialized attention scores and its backward, and the loss. The forward RMSNorm and
// SwiGLU are the serving engine's (infer/kernels.hpp). Layouts follow the serving engine:
// activations row-major [tokens, width] BF16, QKV fused [tokens, q | k | v], every kernel
// accumulates in FP32. Every launch_* enqueues on `stream` and returns.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace gpuscout::cuda::train {

using bf16 = __nv_bfloat16;

// Rotates pairs (i, i + D/2) of `heads` heads starting at column col0 of every row in place by
// angle position * theta^(-2i/D), position = row % seq; direction -1 rotates back (the gradient).
void launch_rope(bf16* x, std::int64_t rows, int stride, int col0, int heads, int head_dim, int seq, float theta,
                 int direction, cudaStream_t stream);

// With r = 1/sqrt(mean(x^2) + eps) per row and v = dn * g:
// dx = dres + r v - x r^3 mean(v x) (dx may alias dres); inv_rms[row] = r for the weight gradient.
void launch_rmsnorm_backward(const bf16* x, const bf16* g, const bf16* dn, const bf16* dres, int rows, int width,
                             float eps, bf16* dx, float* inv_rms, cudaStream_t stream);
// dg[i] += sum over rows of dn[r, i] x[r, i] inv_rms[r] (FP32; zero dg first).
void launch_rmsnorm_weight_grad(const bf16* x, const bf16* dn, const float* inv_rms, int rows, int width, float* dg,
                                cudaStream_t stream);

// gate_up = [gate | up] per row (width 2 ffn); act = silu(gate) up. From dact:
// dgate = dact up silu'(gate), dup = dact silu(gate), into dgate_up laid out as gate_up.
void launch_swiglu_backward(const bf16* gate_up, const bf16* dact, std::int64_t rows, int ffn, bf16* dgate_up,
                            cudaStream_t stream);

// Softmax of `heads` slices of causal scores, [heads, seq, seq] FP32 (already scaled), row i over
// columns j <= i; the probabilities go to probs + head * probs_head_stride ([seq, seq] BF16 each),
// zero above the diagonal.
void launch_causal_softmax(const float* scores, int heads, int seq, bf16* probs, std::int64_t probs_head_stride,
                           cudaStream_t stream);

// dS = P (dP - delta) for j <= i, 0 above the diagonal, over `heads` slices: P as stored by
// launch_causal_softmax, dP [heads, seq, seq] FP32, delta[head * delta_head_stride + i],
// dS [heads, seq, seq] BF16.
void launch_causal_softmax_backward(const bf16* probs, std::int64_t probs_head_stride, const float* dprobs,
                                    const float* delta, std::int64_t delta_head_stride, int heads, int seq,
                                    bf16* dscores, cudaStream_t stream);

// delta[(b heads + h) seq + i] = dO . O of row (b seq + i), head h: the softmax backward's row sums.
void launch_attention_delta(const bf16* dout, const bf16* out, std::int64_t rows, int heads, int head_dim, int seq,
                            float* delta, cudaStream_t stream);

// FP8 codes of x [rows, cols] row-major divided by *scale (launch_fp8_scale, infer/kernels.hpp),
// E4M3 or E5M2, saturating: `out` [rows, cols] as x, `out_t` [cols, rows] (its transpose, for the
// FP8 GEMMs' only layout), either may be null; one read of x. rows and cols multiples of 16, x
// 16-byte aligned, out 8-byte and out_t 16-byte aligned.
enum class Fp8Format { e4m3, e5m2 };
void launch_quantize_fp8_transpose(const bf16* x, int rows, int cols, const float* scale, Fp8Format format,
                                   std::uint8_t* out, std::uint8_t* out_t, cudaStream_t stream);

// loss += sum of y * p over n elements (FP32; zero it first).
void launch_dot_loss(const bf16* y, const bf16* p, std::int64_t n, float* loss, cudaStream_t stream);

}  // namespace gpuscout::cuda::train
