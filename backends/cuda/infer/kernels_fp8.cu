// FP8 (E4M3) activation quantization of the serving engine: the per-tensor dynamic scale and the
// conversion before each cuBLASLt FP8 GEMM. The FP8 weight generation and the decode GEMM over FP8
// weights are variants of the BF16 kernels in kernels.cu.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/infer/weights.hpp"
#include "kernel_util.cuh"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 8;

// Non-negative floats order like their bit patterns, so atomicMax on the bits is a float max.
// The last block to finish turns the maximum into the scale and resets the slots for the next call
// (graph replays included), so no memset is needed between calls.
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const bf16* x, std::int64_t count, Fp8Scratch scratch, float format_max) {
  pdl_wait();
  pdl_trigger();
  float m = 0.0f;
  const std::int64_t vectors = count / 8;
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < vectors; i += stride) {
    float f[8];
    unpack8(__ldg(x4 + i), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(f[j]));
  }
  for (std::int64_t i = vectors * 8 + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    m = fmaxf(m, fabsf(__bfloat162float(x[i])));
  }
  m = warp_max(m);
  __shared__ float partial[kThreads / 32];
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, partial[w]);
  atomicMax(scratch.amax_bits, __float_as_uint(m));
  __threadfence();
  if (atomicAdd(scratch.blocks_done, 1u) == gridDim.x - 1) {
    const float amax = __uint_as_float(atomicExch(scratch.amax_bits, 0u));
    // All zeros (or no elements): any positive scale quantizes them to zero.
    *scratch.scale = amax > 0.0f ? amax / format_max : 1.0f;
    *scratch.blocks_done = 0;
  }
}

__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const bf16* x, std::int64_t count, const float* scale, std::uint8_t* out) {
  pdl_wait();
  pdl_trigger();
  const float inv = 1.0f / *scale;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t vectors = count / 8;
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  auto* out2 = reinterpret_cast<uint2*>(out);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < vectors; i += stride) {
    float f[8];
    unpack8(__ldg(x4 + i), f);
    out2[i] = pack8_fp8<__NV_E4M3>(f, inv);
  }
  for (std::int64_t i = vectors * 8 + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    out[i] = __nv_cvt_float_to_fp8(__bfloat162float(x[i]) * inv, __NV_SATFINITE, __NV_E4M3);
  }
}

unsigned grid_for(std::int64_t items, int per_thread) {
  const std::int64_t blocks = (items / per_thread + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace

void launch_fp8_scale(const bf16* x, std::int64_t count, const Fp8Scratch& scratch, float format_max,
                      cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0)
    throw std::invalid_argument("launch_fp8_scale: x not 16-byte aligned");
  launch_kernel(amax_kernel, grid_for(count, 8), kThreads, 0, stream, x, count, scratch, format_max);
}

void launch_quantize_fp8(const bf16* x, std::int64_t count, const Fp8Scratch& scratch, std::uint8_t* out,
                         cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0 || reinterpret_cast<std::uintptr_t>(out) % 8 != 0) {
    throw std::invalid_argument("launch_quantize_fp8: x must be 16-byte and out 8-byte aligned");
  }
  launch_fp8_scale(x, count, scratch, gpuscout::infer::kE4m3Max, stream);
  launch_kernel(quantize_kernel, grid_for(count, 8), kThreads, 0, stream, x, count,
                static_cast<const float*>(scratch.scale), out);
}

}  // namespace gpuscout::cuda::infer
