#pragma once
// What the cuBLASLt probes share (standalone programs built by one nvcc command each, outside the
// project's build): error checks (a failed CUDA or cuBLASLt call prints where and why and ends the
// program) and a deterministic fill of BF16 buffers.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define LT(x)                                                                       \
  do {                                                                              \
    cublasStatus_t s_ = (x);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::printf("%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

// p[i] = scale x a uniform value in [-0.5, 0.5) hashed from i and seed.
__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, std::uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed * 97u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = static_cast<float>(h & 0xffffff) / 16777216.0f - 0.5f;
    p[i] = __float2bfloat16(u * scale);
  }
}

// Median microseconds per `per` of `rounds` replays of an instantiated graph on `stream`, after
// `warmups` untimed ones.
inline double median_graph_us(cudaGraphExec_t exec, cudaStream_t stream, int warmups, int rounds, double per) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  for (int i = 0; i < warmups; ++i) CK(cudaGraphLaunch(exec, stream));
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    CK(cudaEventRecord(start, stream));
    CK(cudaGraphLaunch(exec, stream));
    CK(cudaEventRecord(stop, stream));
    CK(cudaEventSynchronize(stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1000.0 / per);
  }
  CK(cudaEventDestroy(start));
  CK(cudaEventDestroy(stop));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
