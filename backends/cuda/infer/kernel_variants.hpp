#pragma once
// Variants of the engine's kernels that kernels.hpp hides behind one automatic choice, reachable
// here for the kernel tests and timings (tests/gpu/infer_kernels_test.cu), which check each one and
// measured the choices the automatic paths make.
#include <cstddef>

#include "kernels.hpp"

namespace gpuscout::cuda::infer {

enum class SkinnyPath {
  automatic,    // tensor cores for 5-8 rows when k % 32 == 0 and the pointers are 16-byte aligned
  cuda_core,    // a warp per 1-4 rows of W, FP32 FMAs (any k; scalar when k % 8 != 0)
  tensor_core,  // mma.sync with the x rows as n = 8 (falls back to CUDA cores when k % 32 != 0)
};

void launch_skinny_gemm_path(SkinnyPath path, const bf16* x, int rows, const bf16* w, int n, int k,
                             const bf16* residual, bf16* y, cudaStream_t stream);

// The two decode attention kernels launch_decode_attention chooses between (attention_decode.cu):
// the tile-streaming one on a grid of `grid_blocks` blocks (0: the SMs times the blocks resident
// per SM, its default; at most 1024), and the split (flash-decoding) one with its merge kernel.
void launch_decode_attention_split(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                   const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                                   int out_stride, cudaStream_t stream);
void launch_decode_attention_grid(int grid_blocks, const bf16* q, int q_stride, const bf16* k_cache,
                                  const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                  void* workspace, bf16* out, int out_stride, cudaStream_t stream);

}  // namespace gpuscout::cuda::infer
