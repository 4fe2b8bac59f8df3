#pragma once
// The serving engine's GEMMs: y[rows, out] = x[rows, in] W^T (+ y) with W [out, in] row-major,
// BF16 in and out, FP32 accumulation, through cuBLASLt, or through launch_skinny_gemm (rows <= 8)
// or launch_small_m_gemm (BF16, 9..64 rows) where that was faster when timed. One runner per GPU;
// not thread-safe (each rank's thread owns its own).
//
// cuBLASLt is column-major: the row-major y[rows, out] is the column-major D[out, rows] (ld out),
// W row-major [out, in] is column-major [in, out] (ld in) used transposed, x row-major [rows, in]
// is column-major [in, rows] (ld in): D = op(A = W)^T B(= x), the "TN" layout of gemm.cu. The
// residual add is beta = 1 with C = D (in place, same layout).
//
// The workspace: cuBLASLt gets all of it but the last kSmallMCounterBytes, which hold the small-m
// kernel's split-k counters (they must stay zero between launches, and cuBLASLt would write over
// them); its FP32 partials use the front of cuBLASLt's part (stream order keeps the two apart).
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

#include "gemm_small_m.hpp"
#include "gpuscout/cuda/cublaslt.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

struct RingInput;  // kernel_variants.hpp

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
  // y = RMSNorm(h) W^T (RMSNorm with norm_weight and eps, as launch_rmsnorm). Where the plan is the
  // ring GEMV (one BF16 row) the norm is computed inside it and xn is not written; otherwise the
  // RMSNorm kernel writes xn (rows x in) and run() follows.
  void run_normed(int cls, int rows, const bf16* h, const bf16* norm_weight, float eps, bf16* xn, const void* w,
                  bf16* y, cudaStream_t stream);
  // y = (silu(gate) * up) W^T (+ y when `accumulate`), gate_up holding [gate | up] per row (2 in
  // values), as launch_silu_mul: inside the ring GEMV at one BF16 row, else that kernel writes act
  // (rows x in) and run() follows.
  void run_silu_mul(int cls, int rows, const bf16* gate_up, bf16* act, const void* w, bf16* y, bool accumulate,
                    cudaStream_t stream);

  // Times cuBLASLt's heuristic candidates and, for 2..64 rows, the configurations of its kernels
  // that a search around them finds (search_configurations in engine_gemm.cpp; not with
  // GPUSCOUT_GEMM_SEARCH=0 in the environment, read at construction; set_config_search), the skinny
  // kernel for rows <= kSkinnyMaxRows and the small-m kernel's variants at each split it accepts for
  // BF16 classes with kSkinnyMaxRows < rows <= kSmallMMaxRows, for this class and row count; keeps
  // the fastest for later run() calls and says what it chose. x_scratch holds >= rows * in random
  // BF16 values, y_scratch room for rows * out. The small-m kernel is a candidate only with
  // GPUSCOUT_SMALL_M_GEMM=1 in the environment (read at construction): on the H200 it lost to
  // cuBLASLt at every shape (bench/NOTES.md, session 5) and timing its variants doubled the
  // engine's start-up.
  std::string tune(int cls, int rows, const bf16* x_scratch, bf16* y_scratch, cudaStream_t stream);

  // The per-call times (us) the last tune() measured; < 0 where a kernel was not a candidate.
  struct TuneTimes {
    double cublaslt_us = -1;        // the best cuBLASLt candidate (the heuristic's or the search's)
    double cublaslt_first_us = -1;  // the heuristic's first candidate (what an untuned row count runs)
    int cublaslt_best = 0;          // the best candidate's index: the heuristic's first, then the search's
    int cublaslt_candidates = 0;    // the heuristic's
    int searched_candidates = 0;    // the configuration search's
    double skinny_us = -1;
    double small_m_us = -1;  // the best variant and split
    int small_m_split = 0;
    int small_m_variant = 0;
    std::string chosen;  // "cublaslt", "skinny" or "small_m"
  };
  const TuneTimes& last_tune_times() const { return last_tune_; }

  // After tune(): how much slower per call, as a fraction, the kernel that came second was
  // (infinity when only one kernel was timed). Timed alone, a near tie can go either way, and the
  // two can differ by more inside a step than alone (bench/NOTES.md, session 9), so the engine
  // times such pairs in whole decode steps and may swap_choice() to the second.
  double tie_margin(int cls, int rows);
  void swap_choice(int cls, int rows);
  // "cublaslt", "skinny", "ring" or "small_m"; "cublaslt#N" (candidate N, from 1) where the second
  // kernel is another cuBLASLt candidate.
  std::string choice_name(int cls, int rows);
  const std::string& class_name(int cls) const;

  // Tests only: up to kSkinnyMaxRows rows tune() keeps our kernel (skinny/ring) whatever the times,
  // so that the engine's checks run its paths (the ring with its input transforms) end to end.
  void prefer_own_kernels(bool prefer) { prefer_own_ = prefer; }

  // The configuration search for the tune() calls that follow, whatever GPUSCOUT_GEMM_SEARCH says.
  void set_config_search(bool on);
  // cuBLASLt's runner-up as the second kernel above kSkinnyMaxRows, whatever GPUSCOUT_GEMM_LT_TIES says.
  void set_lt_ties(bool on);
  // Tests only: the cuBLASLt candidates of this class and row count (the heuristic's, then after
  // tune() the search's), and run() through candidate `index` of them, so each can be checked.
  int cublaslt_candidate_count(int cls, int rows);
  void run_cublaslt_candidate(int cls, int rows, int index, const bf16* x, const void* w, bf16* y, bool accumulate,
                              cudaStream_t stream);
  static constexpr std::size_t kSmallMCounterBytes = 64 * 1024;

 private:
  struct Class;
  struct Plan;
  Plan& plan(int cls, int rows);
  // Where the plan is the skinny path and that is the ring GEMV: launches it with `input` and says so.
  bool run_on_ring(int cls, int rows, const bf16* x, const void* w, const bf16* residual, bf16* y,
                   const RingInput& input, cudaStream_t stream);
  // small_m_split > 0: launch_small_m_gemm with that split and variant (cuBLASLt if it refuses).
  void launch(const Class& c, const Plan& p, int algo_index, bool skinny, int small_m_split, int small_m_variant,
              int rows, const bf16* x, const void* w, bf16* y, bool accumulate, cudaStream_t stream);

  lt::Handle lt_;
  lt::MatmulDesc desc_;
  lt::MatmulDesc desc_fp8_;  // A (W) scale set per class before each call, B (x) scale from fp8_
  std::uint8_t* x_fp8_ = nullptr;
  std::size_t x_fp8_bytes_ = 0;
  Fp8Scratch fp8_;
  lt::Preference pref_;
  void* workspace_;
  std::size_t workspace_bytes_;  // cuBLASLt's part
  SmallMWorkspace small_m_ws_;
  bool small_m_enabled_ = false;
  bool search_enabled_ = true;  // unless GPUSCOUT_GEMM_SEARCH=0
  // Above kSkinnyMaxRows rows, where only cuBLASLt is timed, its runner-up candidate is the second
  // kernel the engine may time in whole steps (a pick can start ~4 us late in a step, after a small
  // kernel, which per-call timing does not show: bench/NOTES.md, session 26). On one H200 batch-32
  // steps 0.5-0.7% faster, start-up +4.7 s (session 27). With the configuration search on, a searched
  // pick's second kernel is the heuristic's best instead. GPUSCOUT_GEMM_LT_TIES=0 turns it off.
  bool lt_ties_enabled_ = true;
  bool prefer_own_ = false;
  TuneTimes last_tune_;
  std::vector<std::unique_ptr<Class>> classes_;
  std::unordered_map<std::int64_t, std::unique_ptr<Plan>> plans_;
};

}  // namespace gpuscout::cuda::infer
