#pragma once
// The serving engine's GEMMs: y[rows, out] = x[rows, in] W^T (+ y) with W [out, in] row-major,
// BF16 in and out, FP32 accumulation, through cuBLASLt, or through launch_skinny_gemm where that
// was faster when timed. One runner per GPU; not thread-safe (each rank's thread owns its own).
//
// cuBLASLt is column-major: the row-major y[rows, out] is the column-major D[out, rows] (ld out),
// W row-major [out, in] is column-major [in, out] (ld in) used transposed, x row-major [rows, in]
// is column-major [in, rows] (ld in): D = op(A = W)^T B(= x), the "TN" layout of gemm.cu. The
// residual add is beta = 1 with C = D (in place, same layout).
//
// FP8 classes (weights as E4M3 codes with one scale per class): cuBLASLt multiplies FP8 by FP8, so
// x is first quantized per tensor (scale = max|x| / 448, computed on the GPU each call: two small
// kernels, timed as part of the candidate); the skinny alternative reads BF16 x and FP8 weights.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "gpuscout/cuda/cublaslt.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

class GemmRunner {
 public:
  GemmRunner(void* workspace, std::size_t workspace_bytes);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // FP8 classes need the quantized-activation buffer (rows * in bytes for the widest class and
  // largest step) and one Fp8Scratch (zeroed); a BF16-only runner needs neither.
  void set_fp8_buffers(std::uint8_t* x_fp8, std::size_t x_fp8_bytes, Fp8Scratch scratch);

  // A weight shape the engine multiplies by; `weights` are its instances (one per layer), which
  // timing rotates through so that the weights stream from HBM as they do in a step, not from L2.
  // BF16 weights, or (fp8_scale_device set) E4M3 codes whose per-class scale is `fp8_scale` on the
  // host and *fp8_scale_device on the GPU (cuBLASLt reads it there).
  int add_class(std::string name, int out, int in, std::vector<const void*> weights, float fp8_scale = 0.0f,
                const float* fp8_scale_device = nullptr);

  // y = x W^T, plus the old y when `accumulate`. Enqueues on `stream` (capturable).
  void run(int cls, int rows, const bf16* x, const void* w, bf16* y, bool accumulate, cudaStream_t stream);

  // Times cuBLASLt's heuristic candidates (and the skinny kernel for rows <= kSkinnyMaxRows) for
  // this class and row count, keeps the fastest for later run() calls and says what it chose.
  // x_scratch holds >= rows * in random BF16 values, y_scratch room for rows * out.
  std::string tune(int cls, int rows, const bf16* x_scratch, bf16* y_scratch, cudaStream_t stream);

 private:
  struct Class;
  struct Plan;
  Plan& plan(int cls, int rows);
  void launch(const Class& c, const Plan& p, int algo_index, bool skinny, int rows, const bf16* x, const void* w,
              bf16* y, bool accumulate, cudaStream_t stream);

  lt::Handle lt_;
  lt::MatmulDesc desc_;
  lt::MatmulDesc desc_fp8_;  // A (W) scale set per class before each call, B (x) scale from fp8_
  std::uint8_t* x_fp8_ = nullptr;
  std::size_t x_fp8_bytes_ = 0;
  Fp8Scratch fp8_;
  lt::Preference pref_;
  void* workspace_;
  std::size_t workspace_bytes_;
  std::vector<std::unique_ptr<Class>> classes_;
  std::unordered_map<std::int64_t, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpuscout::cuda::infer
