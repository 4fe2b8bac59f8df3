#pragma once
// Device code shared by the copy benchmarks (transfer: host <-> device, p2p: GPU <-> GPU): a seeded
// word pattern to fill buffers and count wrong words after a copy, and the 16-byte copy loop with
// four vectors in flight per thread. Include from .cu files only.
#include <cstddef>
#include <cstdint>

namespace gpuscout::cuda {

// Word i of the pattern for `seed`: differs between neighbours and between seeds, so a copy that
// drops, repeats or shifts data is caught.
__host__ __device__ inline std::uint32_t pattern_word(std::size_t i, std::uint32_t seed) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u + seed;
  x ^= x >> 15;
  return x;
}

// Kernels are templates (on the word type, always std::uint32_t here) so that several .cu files can
// include them without defining the same kernel twice.
template <typename Word>
__global__ void fill_pattern_kernel(Word* out, std::size_t words, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = pattern_word(i, seed);
  }
}

template <typename Word>
__global__ void count_pattern_mismatches_kernel(const Word* in, std::size_t words, std::uint32_t seed,
                                                unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words;
       i += std::size_t{gridDim.x} * blockDim.x) {
    bad += in[i] != pattern_word(i, seed);
  }
  if (bad != 0) atomicAdd(wrong, bad);
}

// Copies n 16-byte vectors from `first` in steps of `stride`, four loads in flight before the
// stores; either side may be mapped host memory or a peer GPU's memory.
__device__ inline void copy_range(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n,
                                  std::size_t first, std::size_t stride) {
  std::size_t i = first;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v0 = in[i], v1 = in[i + stride], v2 = in[i + 2 * stride], v3 = in[i + 3 * stride];
    out[i] = v0;
    out[i + stride] = v1;
    out[i + 2 * stride] = v2;
    out[i + 3 * stride] = v3;
  }
  for (; i < n; i += stride) out[i] = in[i];
}

}  // namespace gpuscout::cuda
