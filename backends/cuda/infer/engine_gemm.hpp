#pragma once
// The serving engine's GEMMs: y[rows, out] = x[rows, in] W^T (+ y) with W [out, in] row-major,
// BF16 in and out, FP32 accumulation, through cuBLASLt, or through launch_skinny_gemm where that
// was faster when timed. One runner per GPU; not thread-safe (each rank's thread owns its own).
//
// cuBLASLt is column-major: the row-major y[rows, out] is the column-major D[out, rows] (ld out),
// W row-major [out, in] is column-major [in, out] (ld in) used transposed, x row-major [rows, in]
// is column-major [in, rows] (ld in): D = op(A = W)^T B(= x), the "TN" layout of gemm.cu. The
// residual add is beta = 1 with C = D (in place, same layout).
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

  // A weight shape the engine multiplies by; `weights` are its instances (one per layer), which
  // timing rotates through so that the weights stream from HBM as they do in a step, not from L2.
  int add_class(std::string name, int out, int in, std::vector<const bf16*> weights);

  // y = x W^T, plus the old y when `accumulate`. Enqueues on `stream` (capturable).
  void run(int cls, int rows, const bf16* x, const bf16* w, bf16* y, bool accumulate, cudaStream_t stream);

  // Times cuBLASLt's heuristic candidates (and the skinny kernel for rows <= kSkinnyMaxRows) for
  // this class and row count, keeps the fastest for later run() calls and says what it chose.
  // x_scratch holds >= rows * in random BF16 values, y_scratch room for rows * out.
  std::string tune(int cls, int rows, const bf16* x_scratch, bf16* y_scratch, cudaStream_t stream);

 private:
  struct Class;
  struct Plan;
  Plan& plan(int cls, int rows);
  void launch(const Class& c, const Plan& p, int algo_index, bool skinny, int rows, const bf16* x, const bf16* w,
              bf16* y, bool accumulate, cudaStream_t stream);

  lt::Handle lt_;
  lt::MatmulDesc desc_;
  lt::Preference pref_;
  void* workspace_;
  std::size_t workspace_bytes_;
  std::vector<std::unique_ptr<Class>> classes_;
  std::unordered_map<std::int64_t, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpuscout::cuda::infer
