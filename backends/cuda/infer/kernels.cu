// The engine's elementwise kernels, greedy sampling and the skinny (decode) GEMM. Attention lives in
// attention_decode.cu and attention_prefill.cu. Every kernel is one pass over its data with 16-byte
// accesses where the widths allow (multiples of 8 BF16) and a scalar path otherwise, so the tiny
// test configurations run the same code shapes as the real ones.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

using gpuscout::infer::WeightKind;

// ---------------------------------------------------------------------------------------------
// Weights: weights.hpp's functions (per-operation rounding on the GPU, so the bits match the
// host): BF16 values (T = bf16), or E4M3 codes of value / fp8_scale (T = std::uint8_t).
template <typename T>
__global__ void init_weights_kernel(T* dst, std::uint64_t stream, WeightKind kind, int in_features, std::int64_t row0,
                                    std::int64_t rows, std::int64_t col0, std::int64_t cols, float fp8_scale) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    const auto index = static_cast<std::uint64_t>((row0 + r) * in_features + col0 + c);
    if constexpr (std::is_same_v<T, bf16>) {
      dst[i] = __ushort_as_bfloat16(
          gpuscout::infer::float_to_bf16_bits(gpuscout::infer::weight_value(stream, kind, index, in_features)));
    } else {
      dst[i] = gpuscout::infer::fp8_weight_code(stream, kind, index, in_features, fp8_scale);
    }
  }
}

template <typename T>
void init_weights(T* dst, std::uint64_t seed, WeightKind kind, std::uint32_t layer, int in_features, std::int64_t row0,
                  std::int64_t rows, std::int64_t col0, std::int64_t cols, float fp8_scale, cudaStream_t stream) {
  const std::int64_t total = rows * cols;
  if (total <= 0) return;
  const std::int64_t blocks = std::min<std::int64_t>((total + 255) / 256, 132 * 16);
  init_weights_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      dst, gpuscout::infer::tensor_stream(seed, kind, layer), kind, in_features, row0, rows, col0, cols, fp8_scale);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------------
// out[i] = src[index[i]]: the embedding lookup and the gather before the LM head. A negative index
// -1 - j stands for pending[j] (a token the previous step sampled: pipelined stepping).
__global__ void gather_rows_kernel(const bf16* src, const std::int32_t* index, const std::int32_t* pending, int width,
                                   bf16* out) {
  pdl_wait();
  pdl_trigger();
  std::int32_t at = index[blockIdx.x];
  if (at < 0 && pending != nullptr) at = pending[-1 - at];
  const bf16* from = src + static_cast<std::int64_t>(at) * width;
  bf16* to = out + static_cast<std::int64_t>(blockIdx.x) * width;
  if (width % 8 == 0) {
    const auto* from4 = reinterpret_cast<const uint4*>(from);
    auto* to4 = reinterpret_cast<uint4*>(to);
    for (int v = threadIdx.x; v < width / 8; v += blockDim.x) to4[v] = from4[v];
  } else {
    for (int c = threadIdx.x; c < width; c += blockDim.x) to[c] = from[c];
  }
}

void gather(const bf16* src, const std::int32_t* index, const std::int32_t* pending, int count, int width, bf16* out,
            cudaStream_t stream) {
  if (count <= 0) return;
  launch_kernel(gather_rows_kernel, count, 256, 0, stream, src, index, pending, width, out);
}

// ---------------------------------------------------------------------------------------------
constexpr int kRowThreads = 256;
// Rows up to kNormVectors * 8 * kThreads (8192 wide at 256 threads) stay in registers between the
// reduction and the scaling, and the weights are loaded before the wait: no load after the reduction.
constexpr int kNormVectors = 4;
// Prefill-sized batches (at least kNarrowNormRows rows) of rows that fit 128 threads' registers take
// blocks of 128: twice the rows in flight per SM. At 256 threads a 8192 x 4096 norm ran at 0.70 of
// the copy rate (bench/NOTES.md, session 12); decode batches keep 256 (a row's latency matters more).
constexpr int kNarrowNormThreads = 128;
constexpr int kNarrowNormRows = 512;

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_kernel(const bf16* x, const bf16* weight, int width, float eps, bf16* out) {
  __shared__ float partial[kThreads / 32];
  const bf16* row = x + static_cast<std::int64_t>(blockIdx.x) * width;
  bf16* dst = out + static_cast<std::int64_t>(blockIdx.x) * width;
  const bool vec = width % 8 == 0;
  if (vec && width / 8 <= kNormVectors * kThreads) {
    const int vectors = width / 8;
    const auto* row4 = reinterpret_cast<const uint4*>(row);
    const auto* weight4 = reinterpret_cast<const uint4*>(weight);
    uint4 raw[kNormVectors], scale[kNormVectors];
#pragma unroll
    for (int i = 0; i < kNormVectors; ++i) {
      const int v = threadIdx.x + i * kThreads;
      if (v < vectors) scale[i] = weight4[v];  // weights: no earlier kernel writes them
    }
    pdl_wait();
    pdl_trigger();
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormVectors; ++i) {
      const int v = threadIdx.x + i * kThreads;
      if (v >= vectors) continue;
      raw[i] = row4[v];
      float f[8];
      unpack8(raw[i], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += f[j] * f[j];
    }
    sum = block_sum<kThreads>(sum, partial);
    const float inv = rsqrtf(sum / static_cast<float>(width) + eps);
#pragma unroll
    for (int i = 0; i < kNormVectors; ++i) {
      const int v = threadIdx.x + i * kThreads;
      if (v >= vectors) continue;
      float f[8], w[8];
      unpack8(raw[i], f);
      unpack8(scale[i], w);
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = f[j] * inv * w[j];
      store8(dst + 8 * v, f);
    }
    return;
  }
  pdl_wait();
  pdl_trigger();
  float sum = 0.0f;
  if (vec) {
    for (int v = threadIdx.x; v < width / 8; v += kThreads) {
      float f[8];
      load8(row + 8 * v, f);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += f[j] * f[j];
    }
  } else {
    for (int c = threadIdx.x; c < width; c += kThreads) {
      const float f = __bfloat162float(row[c]);
      sum += f * f;
    }
  }
  sum = block_sum<kThreads>(sum, partial);
  const float inv = rsqrtf(sum / static_cast<float>(width) + eps);
  if (vec) {
    for (int v = threadIdx.x; v < width / 8; v += kThreads) {
      float f[8], w[8];
      load8(row + 8 * v, f);
      load8(weight + 8 * v, w);
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = f[j] * inv * w[j];
      store8(dst + 8 * v, f);
    }
  } else {
    for (int c = threadIdx.x; c < width; c += kThreads) {
      dst[c] = __float2bfloat16_rn(__bfloat162float(row[c]) * inv * __bfloat162float(weight[c]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
constexpr int kRopeHeadsPerBlock = 8;
// How the RoPE kernel touches qkv, the bias and the caches: 16-byte vectors where everything is
// 16-byte aligned (the engine's layouts), else BF16 pairs, else single values.
enum class RopeAccess { scalar, paired, vec8 };
constexpr int kRopeMaxTokens = 16;  // tokens per block at prefill sizes

// Block (up to kRopeMaxTokens tokens, group of kRopeHeadsPerBlock Q/K heads): rotates the pairs
// (i, i + D/2) of its heads, stores its K heads into the cache slots and copies its share of the
// tokens' V there. Decode steps get one token per block, so a batch of 32 tokens still spreads
// over 32 x groups blocks (by knock-out one block per token cost 0.26 ms of a batch-32 step);
// prefill steps get up to 16, so that the per-block set-up (FP64 pow, sincosf, a barrier) is paid
// once per 16 tokens: at one token per block a 16 x 512 prefill ran 40,960 blocks at 0.27 of the
// copy rate (bench/NOTES.md, session 6). The cos/sin are computed before pdl_wait (position and
// slot are step metadata, copied before the step's first kernel), overlapping the QKV GEMM's
// tail. `access`: 16-byte vectors (8 i at once) where qkv, the caches and the bias allow them,
// 4-byte BF16 pairs (i even, D/2 even) where only those, else single values.
__global__ void rope_store_kv_kernel(bf16* qkv, int qkv_stride, const std::int32_t* positions,
                                     const std::int32_t* slot_mapping, int rows, int tokens_per_block,
                                     AttentionShape shape, float theta, bf16* k_cache, bf16* v_cache, const bf16* bias,
                                     RopeAccess access) {
  __shared__ std::int64_t slot_block[kRopeMaxTokens];
  __shared__ int slot_offset[kRopeMaxTokens];
  const int t0 = blockIdx.x * tokens_per_block;
  const int tokens = min(tokens_per_block, rows - t0);
  const int d = shape.head_dim;
  const int half = d / 2;
  // Dynamic, sized by launch_rope_store_kv: a decode block asks for < 1 KB, so under programmatic
  // launch it still fits beside the QKV GEMM's blocks and its set-up overlaps their tail (with
  // 17 KB of static arrays batch-1 steps were 0.05-0.075 ms slower).
  extern __shared__ float rope_smem[];
  float* cos_base = rope_smem;                           // [tokens_per_block][half]
  float* sin_base = cos_base + tokens_per_block * half;  // [tokens_per_block][half]
  float* inv_freq = sin_base + tokens_per_block * half;  // [half]
  auto cos_t = [&](int t) { return cos_base + t * half; };
  auto sin_t = [&](int t) { return sin_base + t * half; };
  // theta^(-2i/D) in double, rounded once to FP32: the FP32 angle position * inv_freq then matches
  // a CPU computing the same FP32 product (powf's 2-ulp error would be multiplied by the position).
  auto inverse_frequency = [&](int i) { return static_cast<float>(pow(static_cast<double>(theta), -2.0 * i / d)); };
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
    const int slot = slot_mapping[t0 + t];
    slot_block[t] = slot >= 0 ? slot / shape.block_size : -1;
    slot_offset[t] = slot >= 0 ? slot % shape.block_size : 0;
  }
  if (tokens_per_block == 1) {
    // Decode: no shared inv_freq and no barrier in between (the chain before pdl_wait).
    const float position = static_cast<float>(positions[t0]);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      sincosf(position * inverse_frequency(i), &sin_t(0)[i], &cos_t(0)[i]);
    }
  } else {
    for (int i = threadIdx.x; i < half; i += blockDim.x) inv_freq[i] = inverse_frequency(i);
    __syncthreads();
    for (int p = threadIdx.x; p < tokens * half; p += blockDim.x) {
      const int t = p / half, i = p - t * half;
      sincosf(static_cast<float>(positions[t0 + t]) * inv_freq[i], &sin_t(t)[i], &cos_t(t)[i]);
    }
  }
  __syncthreads();
  pdl_wait();
  pdl_trigger();
  const int rotated_heads = shape.heads + shape.kv_heads;
  const int head0 = blockIdx.y * kRopeHeadsPerBlock;
  const int heads_here = min(kRopeHeadsPerBlock, rotated_heads - head0);
  auto k_dst = [&](int t, int kvh) {
    return k_cache + ((slot_block[t] * shape.kv_heads + kvh) * shape.block_size + slot_offset[t]) * d;
  };
  if (access == RopeAccess::vec8) {
    // Work item: (token, head, 8 consecutive i): 16-byte loads and stores of i..i+7 and their partners.
    const int groups8 = half / 8;
    const int per_token = heads_here * groups8;
    for (int p = threadIdx.x; p < tokens * per_token; p += blockDim.x) {
      const int t = p / per_token, rem = p - t * per_token;
      const int head = head0 + rem / groups8;
      const int i = 8 * (rem % groups8);
      bf16* h = qkv + static_cast<std::int64_t>(t0 + t) * qkv_stride + head * d;
      float a[8], b[8];
      load8(h + i, a);
      load8(h + i + half, b);
      if (bias != nullptr) {
        float ba[8], bb[8];
        load8(bias + head * d + i, ba);
        load8(bias + head * d + i + half, bb);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] += ba[j], b[j] += bb[j];
      }
      float ra[8], rb[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float c = cos_t(t)[i + j], sn = sin_t(t)[i + j];
        ra[j] = a[j] * c - b[j] * sn;
        rb[j] = b[j] * c + a[j] * sn;
      }
      store8(h + i, ra);
      store8(h + i + half, rb);
      if (head >= shape.heads && slot_block[t] >= 0) {
        bf16* dst = k_dst(t, head - shape.heads);
        store8(dst + i, ra);
        store8(dst + i + half, rb);
      }
    }
  } else if (access == RopeAccess::paired) {
    // Work item: (token, head, pair of i): 4-byte loads and stores of (i, i + 1) and their partners.
    const int words = half / 2;
    const int per_token = heads_here * words;
#pragma unroll 4
    for (int p = threadIdx.x; p < tokens * per_token; p += blockDim.x) {
      const int t = p / per_token, rem = p - t * per_token;
      const int head = head0 + rem / words;
      const int i = 2 * (rem % words);
      bf16* h = qkv + static_cast<std::int64_t>(t0 + t) * qkv_stride + head * d;
      float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(h + i));
      float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(h + i + half));
      if (bias != nullptr) {
        const float2 ba = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + head * d + i));
        const float2 bb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + head * d + i + half));
        a.x += ba.x, a.y += ba.y, b.x += bb.x, b.y += bb.y;
      }
      const float c0 = cos_t(t)[i], c1 = cos_t(t)[i + 1], s0 = sin_t(t)[i], s1 = sin_t(t)[i + 1];
      const __nv_bfloat162 ra = __floats2bfloat162_rn(a.x * c0 - b.x * s0, a.y * c1 - b.y * s1);
      const __nv_bfloat162 rb = __floats2bfloat162_rn(b.x * c0 + a.x * s0, b.y * c1 + a.y * s1);
      *reinterpret_cast<__nv_bfloat162*>(h + i) = ra;
      *reinterpret_cast<__nv_bfloat162*>(h + i + half) = rb;
      if (head >= shape.heads && slot_block[t] >= 0) {
        bf16* dst = k_dst(t, head - shape.heads);
        *reinterpret_cast<__nv_bfloat162*>(dst + i) = ra;
        *reinterpret_cast<__nv_bfloat162*>(dst + i + half) = rb;
      }
    }
  } else {
    const int per_token = heads_here * half;
    for (int p = threadIdx.x; p < tokens * per_token; p += blockDim.x) {
      const int t = p / per_token, rem = p - t * per_token;
      const int head = head0 + rem / half;
      const int i = rem % half;
      bf16* h = qkv + static_cast<std::int64_t>(t0 + t) * qkv_stride + head * d;
      float a = __bfloat162float(h[i]);
      float b = __bfloat162float(h[i + half]);
      if (bias != nullptr) {
        a += __bfloat162float(bias[head * d + i]);
        b += __bfloat162float(bias[head * d + i + half]);
      }
      const float c = cos_t(t)[i], sn = sin_t(t)[i];
      const bf16 ra = __float2bfloat16_rn(a * c - b * sn);
      const bf16 rb = __float2bfloat16_rn(b * c + a * sn);
      h[i] = ra;
      h[i + half] = rb;
      if (head >= shape.heads && slot_block[t] >= 0) {
        bf16* dst = k_dst(t, head - shape.heads);
        dst[i] = ra;
        dst[i + half] = rb;
      }
    }
  }
  // V: the groups (blockIdx.y) share each token's kv_heads x D values.
  const int v_width = shape.kv_heads * d;
  if (access == RopeAccess::vec8) {
    const int per_token = v_width / 8;
    for (int p = blockIdx.y * blockDim.x + threadIdx.x; p < tokens * per_token; p += gridDim.y * blockDim.x) {
      const int t = p / per_token, e = 8 * (p - t * per_token);
      if (slot_block[t] < 0) continue;
      const bf16* v = qkv + static_cast<std::int64_t>(t0 + t) * qkv_stride + rotated_heads * d;
      bf16* dst = v_cache + (slot_block[t] * shape.kv_heads * shape.block_size + slot_offset[t]) * d;
      const int kvh = e / d, j = e - kvh * d;
      bf16* out = dst + static_cast<std::int64_t>(kvh) * shape.block_size * d + j;
      if (bias == nullptr) {
        *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(v + e);
      } else {
        float f[8], bv[8];
        load8(v + e, f);
        load8(bias + rotated_heads * d + e, bv);
#pragma unroll
        for (int q = 0; q < 8; ++q) f[q] += bv[q];
        store8(out, f);
      }
    }
    return;
  }
  for (int t = 0; t < tokens; ++t) {
    if (slot_block[t] < 0) continue;
    const bf16* v = qkv + static_cast<std::int64_t>(t0 + t) * qkv_stride + rotated_heads * d;
    bf16* dst = v_cache + (slot_block[t] * shape.kv_heads * shape.block_size + slot_offset[t]) * d;
    for (int e = blockIdx.y * blockDim.x + threadIdx.x; e < v_width; e += gridDim.y * blockDim.x) {
      const int kvh = e / d;
      const int j = e - kvh * d;
      dst[static_cast<std::int64_t>(kvh) * shape.block_size * d + j] =
          bias == nullptr ? v[e]
                          : __float2bfloat16_rn(__bfloat162float(v[e]) + __bfloat162float(bias[rotated_heads * d + e]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
__global__ void silu_mul_kernel(const bf16* gate_up, int rows, int ffn, bf16* out) {
  pdl_wait();
  pdl_trigger();
  const std::int64_t total = static_cast<std::int64_t>(rows) * ffn;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  if (ffn % 8 == 0) {
    for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < total / 8;
         v += stride) {
      const std::int64_t r = (8 * v) / ffn;
      const std::int64_t c = 8 * v - r * ffn;
      float g[8], u[8];
      load8(gate_up + r * 2 * ffn + c, g);
      load8(gate_up + r * 2 * ffn + ffn + c, u);
#pragma unroll
      for (int j = 0; j < 8; ++j) g[j] = silu(g[j]) * u[j];
      store8(out + 8 * v, g);
    }
  } else {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
      const std::int64_t r = i / ffn;
      const std::int64_t c = i - r * ffn;
      const float g = __bfloat162float(gate_up[r * 2 * ffn + c]);
      const float u = __bfloat162float(gate_up[r * 2 * ffn + ffn + c]);
      out[i] = __float2bfloat16_rn(silu(g) * u);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Argmax: (value, index) pairs ordered by value, then by the lower index.
struct Best {
  float value;
  int index;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

// One block per row. The row (256 KB at a 128k vocabulary, mostly still in L2 from the LM head)
// is read with kArgmaxUnroll independent 16-byte loads per thread in flight: with one load per
// thread (256 threads) the kernel was a chain of ~63 L2 round trips, 33 us at batch 32 on an H200
// (bench/results/h200-kernel-trace-s27-20261207.txt); now ~9 us on an H100 (bench/NOTES.md, session 29).
constexpr int kArgmaxThreads = 1024;
constexpr int kArgmaxUnroll = 4;

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const bf16* logits, int vocab, int index_offset, std::int32_t* max_index, float* max_value,
                  std::int32_t* host_index) {
  __shared__ Best partial[kArgmaxThreads / 32];
  pdl_wait();
  pdl_trigger();
  const bf16* row = logits + static_cast<std::int64_t>(blockIdx.x) * vocab;
  Best best{-INFINITY, INT_MAX};
  if (vocab % 8 == 0) {
    const int chunks = vocab / 8;
    int v = threadIdx.x;
    for (; v + (kArgmaxUnroll - 1) * kArgmaxThreads < chunks; v += kArgmaxUnroll * kArgmaxThreads) {
      float f[kArgmaxUnroll][8];
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u) load8(row + 8 * (v + u * kArgmaxThreads), f[u]);
#pragma unroll
      for (int u = 0; u < kArgmaxUnroll; ++u)
#pragma unroll
        for (int j = 0; j < 8; ++j) best = better(best, Best{f[u][j], 8 * (v + u * kArgmaxThreads) + j});
    }
    for (; v < chunks; v += kArgmaxThreads) {
      float f[8];
      load8(row + 8 * v, f);
#pragma unroll
      for (int j = 0; j < 8; ++j) best = better(best, Best{f[j], 8 * v + j});
    }
  } else {
    for (int c = threadIdx.x; c < vocab; c += kArgmaxThreads) best = better(best, Best{__bfloat162float(row[c]), c});
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    best = better(best, Best{__shfl_xor_sync(0xffffffffu, best.value, o), __shfl_xor_sync(0xffffffffu, best.index, o)});
  }
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) best = better(best, partial[w]);
    // A row of NaN or -inf only: index 0, so the token is still valid.
    if (best.index == INT_MAX) best.index = 0;
    max_index[blockIdx.x] = best.index + index_offset;
    if (host_index != nullptr) host_index[blockIdx.x] = best.index + index_offset;
    if (max_value != nullptr) max_value[blockIdx.x] = best.value;
  }
}

__global__ void argmax_merge_kernel(const std::int32_t* candidate_index, const float* candidate_value, int ranks,
                                    int rows, std::int32_t* out, std::int32_t* host_out) {
  pdl_wait();
  pdl_trigger();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  Best best{candidate_value[r], candidate_index[r]};
  for (int k = 1; k < ranks; ++k)
    best = better(best, Best{candidate_value[k * rows + r], candidate_index[k * rows + r]});
  out[r] = best.index;
  if (host_out != nullptr) host_out[r] = best.index;
}

// ---------------------------------------------------------------------------------------------
// Skinny GEMM. Each warp owns kCols consecutive rows of W (output columns) and streams them with
// 16-byte loads, kLoads chunks per lane in flight; x chunks come through L1 (every warp of the
// block reads the same x) and are reused across the kCols rows. A row of W is read exactly once.
// The first kLoads chunks of W are loaded before pdl_wait(): weights do not depend on the previous
// kernel, so with programmatic launch their latency overlaps that kernel's tail.
constexpr int kSkinnyThreads = 256;

template <int R, int kCols, int kLoads>
__global__ void __launch_bounds__(kSkinnyThreads)
    skinny_gemm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, int n, int k, const bf16* residual,
                       bf16* y) {
  const int lane = threadIdx.x % 32;
  const int col0 = (blockIdx.x * (kSkinnyThreads / 32) + threadIdx.x / 32) * kCols;
  if (col0 >= n) {
    pdl_wait();
    pdl_trigger();
    return;
  }
  const int chunks = k / 8;
  float acc[R][kCols];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.0f;
  const uint4* wrow[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    wrow[c] = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(col0 + c, n - 1)) * k);
  }
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  uint4 wv[kLoads][kCols];
  auto load_w = [&](int base) {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int ch = base + l * 32 + lane;
#pragma unroll
      for (int c = 0; c < kCols; ++c) wv[l][c] = ch < chunks ? ldg_stream(wrow[c] + ch) : make_uint4(0, 0, 0, 0);
    }
  };
  load_w(0);
  pdl_wait();
  pdl_trigger();
  for (int base = 0; base < chunks; base += 32 * kLoads) {
    if (base > 0) load_w(base);
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int ch = base + l * 32 + lane;
      if (ch >= chunks) break;
      float wf[kCols][8];
#pragma unroll
      for (int c = 0; c < kCols; ++c) unpack8(wv[l][c], wf[c]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float xf[8];
        unpack8(__ldg(x4 + static_cast<std::int64_t>(r) * chunks + ch), xf);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r][c] = fmaf(xf[j], wf[c][j], acc[r][c]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = warp_sum(acc[r][c]);
      // Lane (r * kCols + c) % 32 writes output (r, col0 + c): spreads the stores over the lanes.
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (lane == (r * kCols + c) % 32 && col0 + c < n) {
        const std::int64_t o = static_cast<std::int64_t>(r) * n + col0 + c;
        float v = acc[r][c];
        if (residual != nullptr) v += __bfloat162float(residual[o]);
        y[o] = __float2bfloat16_rn(v);
      }
    }
  }
}

// The weight formats of the skinny GEMM's tensor-core and scalar paths: BF16, or FP8 E4M3 codes
// (a per-tensor scale multiplies the FP32 sum once). A 16-byte load of a W row holds kPerLoad k
// values; decode() turns them into BF16 pairs, the mma.sync operand format, exactly (every E4M3
// value is a BF16 value).
struct Bf16Weights {
  using T = bf16;
  static constexpr int kPerLoad = 8;
  __device__ static void decode(const uint4& v, std::uint32_t (&pairs)[4]) {
    pairs[0] = v.x, pairs[1] = v.y, pairs[2] = v.z, pairs[3] = v.w;
  }
  __device__ static float value(T w) { return __bfloat162float(w); }
};

struct E4m3Weights {
  using T = std::uint8_t;
  static constexpr int kPerLoad = 16;
  // Two codes -> FP16 (one cvt on sm_89+) -> FP32 -> BF16.
  __device__ static std::uint32_t pair(std::uint32_t codes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const std::uint32_t*>(&b);
  }
  __device__ static void decode(const uint4& v, std::uint32_t (&pairs)[8]) {
    const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      pairs[2 * i] = pair(words[i] & 0xFFFFu);
      pairs[2 * i + 1] = pair(words[i] >> 16);
    }
  }
  __device__ static float value(T w) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(w, __NV_E4M3)));
  }
};

// Any k (not a multiple of the vector width, or unaligned pointers): one warp per output column,
// scalar loads.
template <typename W>
__global__ void skinny_gemm_scalar_kernel(const bf16* x, int rows, const typename W::T* w, float w_scale, int n, int k,
                                          const bf16* residual, bf16* y) {
  pdl_wait();
  pdl_trigger();
  const int lane = threadIdx.x % 32;
  const int col = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (col >= n) return;
  for (int r = 0; r < rows; ++r) {
    float acc = 0.0f;
    for (int i = lane; i < k; i += 32) {
      acc = fmaf(__bfloat162float(x[static_cast<std::int64_t>(r) * k + i]),
                 W::value(w[static_cast<std::int64_t>(col) * k + i]), acc);
    }
    acc = warp_sum(acc) * w_scale;
    if (lane == 0) {
      const std::int64_t o = static_cast<std::int64_t>(r) * n + col;
      if (residual != nullptr) acc += __bfloat162float(residual[o]);
      y[o] = __float2bfloat16_rn(acc);
    }
  }
}

// Tensor-core path (k a multiple of 4 x kPerLoad): a block owns 16 rows of W (16 output columns),
// its 8 warps split k, and each mma.sync m16n8k16 multiplies 16 W rows by the x rows as its n = 8
// columns (rows past `rows` are zeros), so 1 to 8 rows cost the same: W streams at memory speed
// whatever the batch. The sum over k is order-free, so each lane loads 16 contiguous bytes
// (kPerLoad k values) of W rows g and g + 8 and the same k values of x row g, and feeds them to
// the fragment slots it owns (k slots {2t, 2t+1, 2t+8, 2t+9} of kPerLoad / 4 mmas); A and B use
// the same slot-to-k map, so the product is exact.
constexpr int kMmaWarps = 8;

template <int kUnroll, typename W>
__global__ void __launch_bounds__(kMmaWarps * 32)
    skinny_gemm_mma_kernel(const bf16* __restrict__ x, int rows, const typename W::T* __restrict__ w, float w_scale,
                           int n, int k, const bf16* residual, bf16* y) {
  constexpr int kXLoads = W::kPerLoad / 8;  // 16-byte BF16 vectors of x per W load
  constexpr int kPairs = W::kPerLoad / 2;
  __shared__ float red[kMmaWarps][32 * 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, tig = lane % 4;
  const int col0 = blockIdx.x * 16;
  const auto* wa = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(col0 + g, n - 1)) * k);
  const auto* wb = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(col0 + g + 8, n - 1)) * k);
  const auto* xr = reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(min(g, rows - 1)) * k);
  const bool x_live = g < rows;
  const int kblocks = k / (4 * W::kPerLoad);  // k per warp step: 4 lanes x kPerLoad values
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 va[kUnroll], vb[kUnroll], vx[kUnroll][kXLoads];
  auto load_w = [&](int kb0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * kMmaWarps;
      const bool live = kb < kblocks;
      const int v = kb * 4 + tig;  // 16-byte vector index within the row
      va[u] = live ? ldg_stream(wa + v) : make_uint4(0, 0, 0, 0);
      vb[u] = live ? ldg_stream(wb + v) : make_uint4(0, 0, 0, 0);
    }
  };
  load_w(warp);  // weights first (see the vector kernel), then wait for x
  pdl_wait();
  pdl_trigger();
  for (int kb0 = warp; kb0 < kblocks; kb0 += kMmaWarps * kUnroll) {
    if (kb0 != warp) load_w(kb0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int kb = kb0 + u * kMmaWarps;
      const bool live = kb < kblocks && x_live;
#pragma unroll
      for (int j = 0; j < kXLoads; ++j) {
        vx[u][j] = live ? __ldg(xr + (4 * kb + tig) * kXLoads + j) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      std::uint32_t a[kPairs], b[kPairs];
      W::decode(va[u], a);
      W::decode(vb[u], b);
      std::uint32_t xp[kPairs];
#pragma unroll
      for (int j = 0; j < kXLoads; ++j) {
        xp[4 * j] = vx[u][j].x, xp[4 * j + 1] = vx[u][j].y, xp[4 * j + 2] = vx[u][j].z, xp[4 * j + 3] = vx[u][j].w;
      }
#pragma unroll
      for (int m = 0; m < kPairs / 2; ++m) {
        const std::uint32_t frag[4] = {a[2 * m], b[2 * m], a[2 * m + 1], b[2 * m + 1]};
        mma_bf16(c, frag, xp[2 * m], xp[2 * m + 1]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) red[warp][lane * 4 + i] = c[i];
  __syncthreads();
  if (threadIdx.x < 32 * 4) {
    float total = 0.0f;
#pragma unroll
    for (int v = 0; v < kMmaWarps; ++v) total += red[v][threadIdx.x];
    total *= w_scale;
    // Element i of lane l: W row g + 8 (i >= 2), x row 2 tig + (i & 1).
    const int l = threadIdx.x / 4, i = threadIdx.x % 4;
    const int col = col0 + l / 4 + (i >= 2 ? 8 : 0);
    const int r = (l % 4) * 2 + (i & 1);
    if (r < rows && col < n) {
      const std::int64_t o = static_cast<std::int64_t>(r) * n + col;
      if (residual != nullptr) total += __bfloat162float(residual[o]);
      y[o] = __float2bfloat16_rn(total);
    }
  }
}

template <int R>
void skinny_launch(const bf16* x, const bf16* w, int n, int k, const bf16* residual, bf16* y, cudaStream_t stream) {
  // More rows of x: more W rows per warp, so each x chunk read from L1 serves several of them;
  // loads in flight per lane stay at 8 (kCols * kLoads).
  constexpr int kCols = R <= 2 ? 1 : (R <= 4 ? 2 : 4);
  constexpr int kLoads = 8 / kCols;
  const int per_block = (kSkinnyThreads / 32) * kCols;
  launch_kernel(skinny_gemm_kernel<R, kCols, kLoads>, (n + per_block - 1) / per_block, kSkinnyThreads, 0, stream, x, w,
                n, k, residual, y);
}

std::atomic<bool> g_programmatic_launch{false};
thread_local int t_programmatic_pauses = 0;

}  // namespace

bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

int shared_memory_optin_bytes(int device) {
  int bytes = 0;
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  static const long long limit = [] {
    const char* v = std::getenv("GPUSCOUT_SMEM_OPTIN_LIMIT");
    return v != nullptr && *v != 0 ? std::atoll(v) : 0LL;
  }();
  return limit > 0 && limit < bytes ? static_cast<int>(limit) : bytes;
}

bool sm90_features_on(int device) {
  int major = 0;
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

void set_programmatic_launch(bool enabled) {
  g_programmatic_launch = enabled;
}

bool programmatic_launch() {
  return t_programmatic_pauses == 0 && g_programmatic_launch.load(std::memory_order_relaxed);
}

void prefer_shared_carveout_in_small_kernels() {
  const auto prefer = [](const void* kernel) {
    GPUSCOUT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  };
  prefer(reinterpret_cast<const void*>(gather_rows_kernel));
  prefer(reinterpret_cast<const void*>(rmsnorm_kernel<kRowThreads>));
  prefer(reinterpret_cast<const void*>(rope_store_kv_kernel));
  prefer(reinterpret_cast<const void*>(silu_mul_kernel));
  prefer(reinterpret_cast<const void*>(argmax_kernel));
  prefer(reinterpret_cast<const void*>(argmax_merge_kernel));
}

ProgrammaticLaunchPause::ProgrammaticLaunchPause() {
  ++t_programmatic_pauses;
}

ProgrammaticLaunchPause::~ProgrammaticLaunchPause() {
  --t_programmatic_pauses;
}

void launch_init_weights(bf16* dst, std::uint64_t seed, gpuscout::infer::WeightKind kind, std::uint32_t layer,
                         int in_features, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols,
                         cudaStream_t stream) {
  init_weights(dst, seed, kind, layer, in_features, row0, rows, col0, cols, 0.0f, stream);
}

void launch_init_weights_fp8(std::uint8_t* dst, std::uint64_t seed, gpuscout::infer::WeightKind kind,
                             std::uint32_t layer, int in_features, std::int64_t row0, std::int64_t rows,
                             std::int64_t col0, std::int64_t cols, float scale, cudaStream_t stream) {
  init_weights(dst, seed, kind, layer, in_features, row0, rows, col0, cols, scale, stream);
}

void launch_embedding(const std::int32_t* tokens, int rows, const bf16* table, int hidden, bf16* out,
                      cudaStream_t stream, const std::int32_t* previous_sampled) {
  gather(table, tokens, previous_sampled, rows, hidden, out, stream);
}

void launch_gather_rows(const bf16* x, const std::int32_t* rows_index, int count, int width, bf16* out,
                        cudaStream_t stream) {
  gather(x, rows_index, nullptr, count, width, out, stream);
}

void launch_rmsnorm(const bf16* x, const bf16* weight, int rows, int width, float eps, bf16* out, cudaStream_t stream) {
  if (rows <= 0) return;
  if (rows >= kNarrowNormRows && width % 8 == 0 && width / 8 <= kNormVectors * kNarrowNormThreads) {
    launch_kernel(rmsnorm_kernel<kNarrowNormThreads>, rows, kNarrowNormThreads, 0, stream, x, weight, width, eps, out);
    return;
  }
  launch_kernel(rmsnorm_kernel<kRowThreads>, rows, kRowThreads, 0, stream, x, weight, width, eps, out);
}

void launch_rope_store_kv(bf16* qkv, int qkv_stride, const std::int32_t* positions, const std::int32_t* slot_mapping,
                          int rows, const AttentionShape& shape, float rope_theta, bf16* k_cache, bf16* v_cache,
                          cudaStream_t stream, const bf16* qkv_bias) {
  if (rows <= 0) return;
  const int groups = (shape.heads + shape.kv_heads + kRopeHeadsPerBlock - 1) / kRopeHeadsPerBlock;
  // One token per block up to 1023 rows (decode, small chunks), then rows / 512 up to 16.
  const int tokens_per_block = std::clamp(rows / 512, 1, kRopeMaxTokens);
  const auto aligned = [](const void* p, std::uintptr_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
  };
  const bool paired = qkv_stride % 2 == 0 && shape.head_dim % 4 == 0 && aligned(qkv, 4) && aligned(k_cache, 4) &&
                      (qkv_bias == nullptr || aligned(qkv_bias, 4));
  // 16-byte vectors of 8 BF16: every head, row and cache slot starts on a 16-byte boundary.
  const bool vec8 = qkv_stride % 8 == 0 && shape.head_dim % 16 == 0 && aligned(qkv, 16) && aligned(k_cache, 16) &&
                    aligned(v_cache, 16) && (qkv_bias == nullptr || aligned(qkv_bias, 16));
  const RopeAccess access = vec8 ? RopeAccess::vec8 : paired ? RopeAccess::paired : RopeAccess::scalar;
  const std::size_t smem = (2 * static_cast<std::size_t>(tokens_per_block) + 1) * (shape.head_dim / 2) * sizeof(float);
  launch_kernel(rope_store_kv_kernel, dim3((rows + tokens_per_block - 1) / tokens_per_block, groups), 256, smem, stream,
                qkv, qkv_stride, positions, slot_mapping, rows, tokens_per_block, shape, rope_theta, k_cache, v_cache,
                qkv_bias, access);
}

void launch_silu_mul(const bf16* gate_up, int rows, int ffn, bf16* out, cudaStream_t stream) {
  const std::int64_t total = static_cast<std::int64_t>(rows) * ffn;
  if (total <= 0) return;
  const std::int64_t blocks = std::min<std::int64_t>((total / 8 + 255) / 256 + 1, 132 * 16);
  launch_kernel(silu_mul_kernel, static_cast<unsigned>(blocks), 256, 0, stream, gate_up, rows, ffn, out);
}

void launch_argmax(const bf16* logits, int rows, int vocab, int index_offset, std::int32_t* max_index, float* max_value,
                   cudaStream_t stream, std::int32_t* host_index) {
  if (rows <= 0) return;
  launch_kernel(argmax_kernel, rows, kArgmaxThreads, 0, stream, logits, vocab, index_offset, max_index, max_value,
                host_index);
}

void launch_argmax_merge(const std::int32_t* candidate_index, const float* candidate_value, int ranks, int rows,
                         std::int32_t* out, cudaStream_t stream, std::int32_t* host_out) {
  if (rows <= 0) return;
  launch_kernel(argmax_merge_kernel, (rows + 127) / 128, 128, 0, stream, candidate_index, candidate_value, ranks, rows,
                out, host_out);
}

void launch_skinny_gemm_path(SkinnyPath path, const bf16* x, int rows, const bf16* w, int n, int k,
                             const bf16* residual, bf16* y, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return;
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
  const bool vec = k % 8 == 0 && aligned && rows <= kSkinnyMaxRows;
  const bool mma = k % 32 == 0 && aligned && rows <= kSkinnyMaxRows;
  // Measured on the H200 (bench/NOTES.md): CUDA cores win up to 4 rows (o and down projections by
  // 10-25%), tensor cores from 8 rows (1.3-1.6x), where the FP32 FMAs of the other path bind.
  if (path == SkinnyPath::automatic && rows == 1 && ring_gemv_by_default()) path = SkinnyPath::ring;
  if (path == SkinnyPath::ring) {
    if (rows == 1 && launch_ring_gemv(x, w, n, k, residual, y, stream)) return;
    path = SkinnyPath::cuda_core;
  }
  if (path == SkinnyPath::automatic) path = mma && rows > 4 ? SkinnyPath::tensor_core : SkinnyPath::cuda_core;
  if (path == SkinnyPath::tensor_core && mma) {
    launch_kernel(skinny_gemm_mma_kernel<4, Bf16Weights>, (n + 15) / 16, kMmaWarps * 32, 0, stream, x, rows, w, 1.0f, n,
                  k, residual, y);
  } else if (vec) {
    dispatch_int<1, kSkinnyMaxRows>(
        rows, [&](auto r) { skinny_launch<decltype(r)::value>(x, w, n, k, residual, y, stream); });
  } else {
    launch_kernel(skinny_gemm_scalar_kernel<Bf16Weights>, (n + 7) / 8, 256, 0, stream, x, rows, w, 1.0f, n, k, residual,
                  y);
  }
}

void launch_skinny_gemm(const bf16* x, int rows, const bf16* w, int n, int k, const bf16* residual, bf16* y,
                        cudaStream_t stream) {
  launch_skinny_gemm_path(SkinnyPath::automatic, x, rows, w, n, k, residual, y, stream);
}

void launch_skinny_gemm_fp8(const bf16* x, int rows, const std::uint8_t* w, float w_scale, int n, int k,
                            const bf16* residual, bf16* y, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return;
  const bool aligned = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
  if (k % (4 * E4m3Weights::kPerLoad) == 0 && aligned && rows <= kSkinnyMaxRows) {
    launch_kernel(skinny_gemm_mma_kernel<4, E4m3Weights>, (n + 15) / 16, kMmaWarps * 32, 0, stream, x, rows, w, w_scale,
                  n, k, residual, y);
  } else {
    launch_kernel(skinny_gemm_scalar_kernel<E4m3Weights>, (n + 7) / 8, 256, 0, stream, x, rows, w, w_scale, n, k,
                  residual, y);
  }
}

}  // namespace gpuscout::cuda::infer
