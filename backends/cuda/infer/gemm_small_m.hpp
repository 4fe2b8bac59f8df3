#pragma once
// The decode GEMM for 1..64 rows (batches the skinny kernel's 8 rows no longer cover):
// y[r, n] = sum_k x[r, k] * w[n, k] (+ residual[r, n]), BF16 in and out, FP32 accumulation, W
// [n, k] row-major. At these row counts the GEMM is bound by streaming W from HBM; the kernel
// (gemm_small_m.cu) reads x from shared memory, comes in variants that move W differently (the
// fastest is measured: GemmRunner::tune), and splits k across blocks when there are too few output
// tiles to fill the GPU, reducing the FP32 partials in a fixed order (deterministic) in the block
// that finishes a tile last.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels.hpp"

namespace gpuscout::cuda::infer {

inline constexpr int kSmallMMaxRows = 64;
// Output columns (W rows) per block: the unit of the split-k counters.
inline constexpr int kSmallMTileCols = 128;
// The k-splits worth timing (GemmRunner::tune): which one fills the GPU best depends on the output
// tiles (lm_head 1002, gate_up 224, qkv 48, o and down 32) against 132 SMs x 2 blocks.
inline constexpr int kSmallMSplits[] = {1, 2, 3, 4, 5, 6, 8, 11, 16};
// How W reaches the tensor cores: 0 registers, 1 registers with an L2 256-byte fetch hint, 2 a
// cp.async shared-memory ring, 3 a bulk-copy (cp.async.bulk + mbarrier) ring, 4 the bulk ring with
// twice the batch and one block per SM. Each computes the same sums in the same order.
inline constexpr int kSmallMVariants = 5;
const char* small_m_variant_name(int variant);
// Blocks of the variant's kernel for `rows` that fit one SM (occupancy API; a diagnostic).
int small_m_gemm_blocks_per_sm(int rows, int variant);

// Split-k scratch: one counter per output tile (zero before the first launch; every launch leaves
// them zero) and FP32 partials [split][rows][n], 16-byte aligned. The partials may share memory with other
// stream-ordered work (cuBLASLt's workspace); the counters must not.
struct SmallMWorkspace {
  unsigned* counters = nullptr;
  int counter_count = 0;
  float* partials = nullptr;
  std::size_t partial_floats = 0;
};

// The number of k-splits a launch with `split` asks for really uses (k steps are grouped, so a
// request can come out smaller); 0 when the shape cannot run at all.
int small_m_gemm_effective_split(int k, int split);

// nullptr when launch_small_m_gemm runs this call, else why not ("k % 32 != 0", ...).
const char* check_small_m_gemm(const bf16* x, int rows, const bf16* w, int n, int k, int split,
                               const SmallMWorkspace& ws);

// Enqueues the GEMM with k split `split` ways (1: no partials, no counters) and returns true, or
// returns false and launches nothing when check_small_m_gemm refuses (or the variant is unknown). y may alias residual.
// Programmatic dependent launch: W is loaded before waiting on the previous kernel, x after.
bool launch_small_m_gemm(const bf16* x, int rows, const bf16* w, int n, int k, int split, const bf16* residual, bf16* y,
                         const SmallMWorkspace& ws, cudaStream_t stream, int variant = 0);

}  // namespace gpuscout::cuda::infer
