#pragma once
// What the serving engine's GPU kernel tests share (infer_kernels_test, infer_gemm_test): BF16 bits
// to and from float exactly as the engine rounds, random BF16 inputs from one seeded generator, a
// device buffer whose every CUDA call is checked, and the pass/fail line each check prints (which
// counts the failures the test's exit code reports). One translation unit per test includes it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/infer/weights.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::test {

using u16 = std::uint16_t;

inline std::mt19937_64 rng(20261130);
inline int failures = 0;

inline float to_f(u16 b) {
  return gpuscout::infer::bf16_bits_to_float(b);
}
inline u16 to_b(float f) {
  return gpuscout::infer::float_to_bf16_bits(f);
}
inline constexpr u16 kPoison = 0x7FC1;  // a NaN: any element left unwritten fails the comparison

inline std::vector<u16> random_bf16(std::size_t n, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<u16> v(n);
  for (auto& x : v) x = to_b(u(rng));
  return v;
}

// Device buffer of T, filled from / copied back to host vectors.
template <typename T>
struct Dev {
  T* p = nullptr;
  std::size_t n = 0;
  Dev() = default;
  explicit Dev(std::size_t count) : n(count) { CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) { upload(v); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { CUDA_CHECK_NOTHROW(cudaFree(p)); }
  void upload(const std::vector<T>& v) {
    CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  template <typename U = T>
  U* as() const {
    return reinterpret_cast<U*>(p);
  }
};

inline void report(const std::string& name, bool ok, const std::string& detail) {
  std::printf("%-64s %s  %s\n", name.c_str(), ok ? "ok  " : "FAIL", detail.c_str());
  if (!ok) ++failures;
}

// The start of each test's main(): false without a GPU (after printing "no CUDA device: skipped";
// the test then exits 77, which CTest reports as skipped); else GPU 0's properties, with programmatic
// dependent launch on where the engine uses it (compute capability 9.0+).
inline bool start_gpu_test(cudaDeviceProp& prop) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return false;
  }
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  gpuscout::cuda::infer::set_programmatic_launch(prop.major >= 9);
  std::printf("programmatic dependent launch: %s\n", gpuscout::cuda::infer::programmatic_launch() ? "on" : "off");
  return true;
}

}  // namespace gpuscout::cuda::test
