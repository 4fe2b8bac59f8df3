#pragma once
// The train step's matrix products through cuBLASLt: any row-major C[M, N] = alpha op(A) op(B) +
// beta C_in with BF16 A and B, FP32 accumulation, BF16 or FP32 C, strided-batched. The serving
// engine's GemmRunner (infer/engine_gemm.hpp) covers only y = x W^T; training also needs the input
// gradient (dY W), the weight gradient (dY^T X) and the attention products on strided head slices.
//
// Row-major C[M, N] is column-major C^T[N, M]: cuBLASLt computes C^T = op(B)^T op(A)^T, so B is its
// first operand and A its second, each with the transpose flag it has here.
//
// FP8 operands (E4M3 x E4M3, E4M3 x E5M2 or E5M2 x E4M3; cuBLASLt has no E5M2 x E5M2) have a
// per-tensor scale on the GPU (value = code * scale) and, on Hopper, only cuBLASLt's "TN" layout:
// here C = A B^T with both A [M, K] and B [N, K] row-major (trans_b, not trans_a).
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "gpuscout/cuda/cublaslt.hpp"

namespace gpuscout::cuda::train {

using bf16 = __nv_bfloat16;

enum class Operand : std::uint8_t { bf16, e4m3, e5m2 };

struct GemmArgs {
  int m = 0, n = 0, k = 0;
  // A is [M, K] row-major with row stride lda, or [K, M] when trans_a; B is [K, N], or [N, K] when trans_b.
  bool trans_a = false, trans_b = false;
  const void* a = nullptr;  // BF16 or FP8 codes (a_type)
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;  // [M, N] row-major, row stride ldc, BF16 or FP32 (c_fp32)
  std::int64_t ldc = 0;
  bool c_fp32 = false;
  const void* c_in = nullptr;  // beta's operand, laid out as c; null: c itself
  float alpha = 1.0f, beta = 0.0f;
  int batch = 1;  // strided batch: matrix i starts stride_* elements after matrix i - 1
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  Operand a_type = Operand::bf16, b_type = Operand::bf16;
  const float* a_scale = nullptr;  // FP8 only: device scales, each 256-byte aligned (cuBLASLt refuses less)
  const float* b_scale = nullptr;
};

class Gemm {
 public:
  Gemm(void* workspace, std::size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues on `stream`. The algorithm is cuBLASLt's first heuristic choice for the shape, layout
  // and pointer alignment, found once and cached.
  void run(const GemmArgs& args, cudaStream_t stream);

 private:
  struct Plan;
  using Key = std::array<std::int64_t, 20>;
  Plan& plan(const GemmArgs& args);

  lt::Handle lt_;
  void* workspace_;
  std::size_t workspace_bytes_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpuscout::cuda::train
