// The train step's kernels; see train_kernels.hpp.
#include <algorithm>
#include <stdexcept>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "train_kernels.hpp"

namespace gpuscout::cuda::train {

using infer::block_sum;
using infer::unpack8;
using infer::warp_max;
using infer::warp_sum;

namespace {

constexpr int kThreads = 256;

// Grid of a grid-stride loop over `work` items: enough blocks to fill the GPU, no more.
unsigned grid_for(std::int64_t work) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, 132 * 16));
}

// Largest value of a block of kThreads; every thread gets it.
__device__ float block_max(float v, float* partial) {
  v = warp_max(v);
  __syncthreads();  // partial may still be read by a previous reduction
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float m = partial[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, partial[w]);
  return m;
}

__device__ float block_total(float v, float* partial) {
  __syncthreads();
  return block_sum<kThreads>(v, partial);
}

__global__ void rope_kernel(bf16* x, std::int64_t rows, int stride, int col0, int heads, int head_dim, int seq,
                            float log2_theta, float direction) {
  const int half = head_dim / 2;
  const std::int64_t total = rows * heads * half;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const std::int64_t rh = idx / half;
    const int h = static_cast<int>(rh % heads);
    const std::int64_t row = rh / heads;
    const float inv_freq = exp2f(-2.0f * static_cast<float>(i) / static_cast<float>(head_dim) * log2_theta);
    const float angle = static_cast<float>(row % seq) * inv_freq;
    float s, c;
    sincosf(angle, &s, &c);
    s *= direction;
    bf16* v = x + row * stride + col0 + static_cast<std::int64_t>(h) * head_dim;
    const float x1 = __bfloat162float(v[i]), x2 = __bfloat162float(v[i + half]);
    v[i] = __float2bfloat16_rn(x1 * c - x2 * s);
    v[i + half] = __float2bfloat16_rn(x2 * c + x1 * s);
  }
}

__global__ void rmsnorm_backward_kernel(const bf16* x, const bf16* g, const bf16* dn, const bf16* dres, int width,
                                        float eps, bf16* dx, float* inv_rms) {
  __shared__ float partial[kThreads / 32];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * width;
  float sum_sq = 0.0f, dot = 0.0f;
  for (int c = threadIdx.x; c < width; c += kThreads) {
    const float xv = __bfloat162float(x[off + c]);
    sum_sq += xv * xv;
    dot += __bfloat162float(dn[off + c]) * __bfloat162float(g[c]) * xv;
  }
  sum_sq = block_total(sum_sq, partial);
  dot = block_total(dot, partial);
  const float r = rsqrtf(sum_sq / static_cast<float>(width) + eps);
  const float coef = r * r * r * dot / static_cast<float>(width);
  for (int c = threadIdx.x; c < width; c += kThreads) {
    const float v = __bfloat162float(dn[off + c]) * __bfloat162float(g[c]);
    const float xv = __bfloat162float(x[off + c]);
    dx[off + c] = __float2bfloat16_rn(__bfloat162float(dres[off + c]) + r * v - xv * coef);
  }
  if (threadIdx.x == 0) inv_rms[blockIdx.x] = r;
}

// Block (32 columns x 8 row lanes) sums a chunk of rows per column, then one atomic per column.
constexpr int kGradRowsPerBlock = 256;
__global__ void rmsnorm_weight_grad_kernel(const bf16* x, const bf16* dn, const float* inv_rms, int rows, int width,
                                           float* dg) {
  __shared__ float partial[8][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  const int row0 = blockIdx.y * kGradRowsPerBlock;
  const int row_end = min(rows, row0 + kGradRowsPerBlock);
  float sum = 0.0f;
  if (col < width) {
    for (int r = row0 + threadIdx.y; r < row_end; r += 8) {
      const std::int64_t at = static_cast<std::int64_t>(r) * width + col;
      sum += __bfloat162float(dn[at]) * __bfloat162float(x[at]) * inv_rms[r];
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < width) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < 8; ++y) total += partial[y][threadIdx.x];
    atomicAdd(dg + col, total);
  }
}

__global__ void swiglu_backward_kernel(const bf16* gate_up, const bf16* dact, std::int64_t rows, int ffn,
                                       bf16* dgate_up) {
  const std::int64_t total = rows * ffn;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = idx / ffn, c = idx - r * ffn;
    const std::int64_t at = r * 2 * ffn + c;
    const float g = __bfloat162float(gate_up[at]), u = __bfloat162float(gate_up[at + ffn]);
    const float da = __bfloat162float(dact[idx]);
    const float sig = 1.0f / (1.0f + __expf(-g));
    dgate_up[at] = __float2bfloat16_rn(da * u * sig * (1.0f + g * (1.0f - sig)));
    dgate_up[at + ffn] = __float2bfloat16_rn(da * g * sig);
  }
}

// One block per (head, row i): softmax over j <= i, zeros after.
__global__ void causal_softmax_kernel(const float* scores, int seq, bf16* probs, std::int64_t probs_head_stride) {
  __shared__ float partial[kThreads / 32];
  const int head = blockIdx.y;
  const int i = blockIdx.x;
  const float* row = scores + (static_cast<std::int64_t>(head) * seq + i) * seq;
  bf16* out = probs + head * probs_head_stride + static_cast<std::int64_t>(i) * seq;
  float m = -INFINITY;
  for (int j = threadIdx.x; j <= i; j += kThreads) m = fmaxf(m, row[j]);
  m = block_max(m, partial);
  float sum = 0.0f;
  for (int j = threadIdx.x; j <= i; j += kThreads) sum += __expf(row[j] - m);
  sum = block_total(sum, partial);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < seq; j += kThreads) {
    out[j] = __float2bfloat16_rn(j <= i ? __expf(row[j] - m) * inv : 0.0f);
  }
}

__global__ void causal_softmax_backward_kernel(const bf16* probs, std::int64_t probs_head_stride, const float* dprobs,
                                               const float* delta, std::int64_t delta_head_stride, int seq,
                                               bf16* dscores) {
  const int head = blockIdx.y;
  const int i = blockIdx.x;
  const bf16* p = probs + head * probs_head_stride + static_cast<std::int64_t>(i) * seq;
  const std::int64_t row = (static_cast<std::int64_t>(head) * seq + i) * seq;
  const float d = delta[head * delta_head_stride + i];
  for (int j = threadIdx.x; j < seq; j += kThreads) {
    dscores[row + j] = __float2bfloat16_rn(j <= i ? __bfloat162float(p[j]) * (dprobs[row + j] - d) : 0.0f);
  }
}

// One warp per (row, head).
__global__ void attention_delta_kernel(const bf16* dout, const bf16* out, std::int64_t rows, int heads, int head_dim,
                                       int seq, float* delta) {
  const std::int64_t warp = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;
  const std::int64_t row = warp / heads;
  const int h = static_cast<int>(warp % heads);
  const std::int64_t off = row * heads * head_dim + static_cast<std::int64_t>(h) * head_dim;
  float sum = 0.0f;
  for (int e = lane; e < head_dim; e += 32) sum += __bfloat162float(dout[off + e]) * __bfloat162float(out[off + e]);
  sum = warp_sum(sum);
  if (lane == 0) {
    const std::int64_t b = row / seq, i = row % seq;
    delta[(b * heads + h) * seq + i] = sum;
  }
}

__global__ void dot_loss_kernel(const bf16* y, const bf16* p, std::int64_t n, float* loss) {
  __shared__ float partial[kThreads / 32];
  float sum = 0.0f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    sum += __bfloat162float(y[i]) * __bfloat162float(p[i]);
  }
  sum = block_total(sum, partial);
  if (threadIdx.x == 0) atomicAdd(loss, sum);
}

// A kFp8Tile x kFp8Tile tile per block: each thread converts 8-element vectors (16-byte loads, 8-byte
// row-major stores), the codes go through shared memory, and each thread stores 16 codes of one
// column of the tile as one 16-byte row segment of the transpose.
constexpr int kFp8Tile = 64;

template <__nv_fp8_interpretation_t kFormat>
__global__ void __launch_bounds__(kThreads)
    quantize_fp8_transpose_kernel(const bf16* x, int rows, int cols, const float* scale, std::uint8_t* out,
                                  std::uint8_t* out_t) {
  __shared__ __align__(16) std::uint8_t tile[kFp8Tile][kFp8Tile + 8];
  const float inv = 1.0f / *scale;
  const int r0 = blockIdx.y * kFp8Tile, c0 = blockIdx.x * kFp8Tile;
  for (int v = threadIdx.x; v < kFp8Tile * kFp8Tile / 8; v += kThreads) {
    const int tr = v / (kFp8Tile / 8), tc = (v % (kFp8Tile / 8)) * 8;
    const int r = r0 + tr, c = c0 + tc;
    uint2 codes = make_uint2(0, 0);
    if (r < rows && c < cols) {  // cols % 16 == 0: a vector is wholly inside or outside
      const std::int64_t at = static_cast<std::int64_t>(r) * cols + c;
      float f[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(x + at)), f);
      codes = infer::pack8_fp8<kFormat>(f, inv);
      if (out != nullptr) *reinterpret_cast<uint2*>(out + at) = codes;
    }
    *reinterpret_cast<uint2*>(&tile[tr][tc]) = codes;
  }
  if (out_t == nullptr) return;
  __syncthreads();
  const int tc = threadIdx.x / 4, tr = (threadIdx.x % 4) * 16;  // 64 columns x 4 segments of 16 rows
  const int c = c0 + tc, r = r0 + tr;
  if (c >= cols || r >= rows) return;  // rows % 16 == 0: a segment is wholly inside or outside
  std::uint32_t words[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    words[w] = static_cast<std::uint32_t>(tile[tr + 4 * w][tc]) |
               (static_cast<std::uint32_t>(tile[tr + 4 * w + 1][tc]) << 8) |
               (static_cast<std::uint32_t>(tile[tr + 4 * w + 2][tc]) << 16) |
               (static_cast<std::uint32_t>(tile[tr + 4 * w + 3][tc]) << 24);
  }
  *reinterpret_cast<uint4*>(out_t + static_cast<std::int64_t>(c) * rows + r) =
      make_uint4(words[0], words[1], words[2], words[3]);
}

}  // namespace

void launch_rope(bf16* x, std::int64_t rows, int stride, int col0, int heads, int head_dim, int seq, float theta,
                 int direction, cudaStream_t stream) {
  const std::int64_t work = rows * heads * (head_dim / 2);
  if (work <= 0) return;
  rope_kernel<<<grid_for(work), kThreads, 0, stream>>>(x, rows, stride, col0, heads, head_dim, seq, log2f(theta),
                                                       static_cast<float>(direction));
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_backward(const bf16* x, const bf16* g, const bf16* dn, const bf16* dres, int rows, int width,
                             float eps, bf16* dx, float* inv_rms, cudaStream_t stream) {
  if (rows <= 0) return;
  rmsnorm_backward_kernel<<<rows, kThreads, 0, stream>>>(x, g, dn, dres, width, eps, dx, inv_rms);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_weight_grad(const bf16* x, const bf16* dn, const float* inv_rms, int rows, int width, float* dg,
                                cudaStream_t stream) {
  if (rows <= 0) return;
  const dim3 grid((width + 31) / 32, (rows + kGradRowsPerBlock - 1) / kGradRowsPerBlock);
  rmsnorm_weight_grad_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, dn, inv_rms, rows, width, dg);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(const bf16* gate_up, const bf16* dact, std::int64_t rows, int ffn, bf16* dgate_up,
                            cudaStream_t stream) {
  const std::int64_t work = rows * ffn;
  if (work <= 0) return;
  swiglu_backward_kernel<<<grid_for(work), kThreads, 0, stream>>>(gate_up, dact, rows, ffn, dgate_up);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_causal_softmax(const float* scores, int heads, int seq, bf16* probs, std::int64_t probs_head_stride,
                           cudaStream_t stream) {
  if (heads <= 0 || seq <= 0) return;
  causal_softmax_kernel<<<dim3(seq, heads), kThreads, 0, stream>>>(scores, seq, probs, probs_head_stride);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_causal_softmax_backward(const bf16* probs, std::int64_t probs_head_stride, const float* dprobs,
                                    const float* delta, std::int64_t delta_head_stride, int heads, int seq,
                                    bf16* dscores, cudaStream_t stream) {
  if (heads <= 0 || seq <= 0) return;
  causal_softmax_backward_kernel<<<dim3(seq, heads), kThreads, 0, stream>>>(probs, probs_head_stride, dprobs, delta,
                                                                            delta_head_stride, seq, dscores);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_attention_delta(const bf16* dout, const bf16* out, std::int64_t rows, int heads, int head_dim, int seq,
                            float* delta, cudaStream_t stream) {
  const std::int64_t threads = rows * heads * 32;
  if (threads <= 0) return;
  attention_delta_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      dout, out, rows, heads, head_dim, seq, delta);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_dot_loss(const bf16* y, const bf16* p, std::int64_t n, float* loss, cudaStream_t stream) {
  if (n <= 0) return;
  dot_loss_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, p, n, loss);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void launch_quantize_fp8_transpose(const bf16* x, int rows, int cols, const float* scale, Fp8Format format,
                                   std::uint8_t* out, std::uint8_t* out_t, cudaStream_t stream) {
  if (rows % 16 != 0 || cols % 16 != 0 || reinterpret_cast<std::uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(out) % 8 != 0 || reinterpret_cast<std::uintptr_t>(out_t) % 16 != 0) {
    throw std::invalid_argument(
        "launch_quantize_fp8_transpose: rows and cols must be multiples of 16, x and out_t "
        "16-byte and out 8-byte aligned");
  }
  if (rows == 0 || cols == 0) return;
  const dim3 grid((cols + kFp8Tile - 1) / kFp8Tile, (rows + kFp8Tile - 1) / kFp8Tile);
  if (format == Fp8Format::e4m3) {
    quantize_fp8_transpose_kernel<__NV_E4M3><<<grid, kThreads, 0, stream>>>(x, rows, cols, scale, out, out_t);
  } else {
    quantize_fp8_transpose_kernel<__NV_E5M2><<<grid, kThreads, 0, stream>>>(x, rows, cols, scale, out, out_t);
  }
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpuscout::cuda::train
