#pragma once
// The batch-1 decode GEMV that starts streaming its weights before the kernel ahead of it ends:
// y[n] = sum_k x[k] * w[n, k] (+ residual[n]), BF16 in and out, FP32 accumulation, W [n, k]
// row-major (gemv_stream.cu).
//
// Why a kernel of its own: at batch 1 a decode step is a chain of GEMVs that stream weights and
// small kernels (RMSNorm, RoPE, attention, SiLU) that do not, so HBM idles while the small ones run
// (bench/NOTES.md: ~20 us per layer on Llama-3.1-8B). cuBLASLt's kernel waits for the previous
// kernel before it loads anything. This one gives each SM one block that owns a contiguous run of W
// rows (one contiguous span of memory) and fills a ring of shared-memory stages with bulk copies
// before griddepcontrol.wait, since no step writes weights: under programmatic dependent launch up
// to ~190 KB per SM (~25 MB on an H200) arrive while the kernel before it still runs.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels.hpp"

namespace gpuscout::cuda::infer {

// Largest k: one W row must fit one 32 KiB stage.
inline constexpr int kStreamGemvMaxK = 16384;

// nullptr when launch_stream_gemv runs this call, else why not ("rows != 1", ...).
const char* check_stream_gemv(const bf16* x, int rows, const void* w, int n, int k);

// Enqueues y = x W^T (+ residual; y may alias it) and returns true, or returns false and launches
// nothing when check_stream_gemv refuses. `stages` caps the shared-memory ring (0: as many 32 KiB
// stages as fit, up to 6); a diagnostic for the benchmark.
bool launch_stream_gemv(const bf16* x, int rows, const bf16* w, int n, int k, const bf16* residual, bf16* y,
                        cudaStream_t stream, int stages = 0);

}  // namespace gpuscout::cuda::infer
