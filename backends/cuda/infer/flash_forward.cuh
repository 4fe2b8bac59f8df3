#pragma once
// The per-warp core of the flash-attention-2 forward that the serving engine's prefill kernel
// (attention_prefill.cu, paged KV cache) and the train step's forward (train/train_attention.cu,
// fused QKV rows) share; each kernel keeps its own loads and output store. A block of kWarps warps
// holds kM * 16 query rows per warp and loops over 64-key tiles of K and V in padded shared memory
// (row stride D + 8 elements: 8 rows of an ldmatrix hit distinct banks): S = Q K^T and O += P V with
// mma.sync m16n8k16 BF16 -> FP32 (P stays in registers as the A operand), online softmax in FP32 in
// the log2 domain (one FMA and one ex2 per score; O is rescaled only when a row's maximum moved),
// causal mask by absolute position, applied only on tiles that reach past the warp's first query.
// Fragment layouts are PTX's (ISA, "Matrix fragments for mma.m16n8k16").
#include <cstdint>

#include "kernel_util.cuh"

namespace gpuscout::cuda::infer::flash {

constexpr int kBk = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Shared-memory layout of a block: Q, then K and V double-buffered.
template <int D, int kM>
struct ForwardTile {
  static constexpr int kBq = 16 * kM * kWarps;  // queries per block
  static constexpr int kLd = D + 8;             // padded row (elements)
  static constexpr int kQ = kBq * kLd;
  static constexpr int kKv = kBk * kLd;
  static constexpr int kSmemBytes = (kQ + 4 * kKv) * 2;  // Q, K[2], V[2]
  // Q as A fragments in registers when they fit next to O and S (kM * D / 4 registers); otherwise
  // (D 128 with kM 2) re-read from shared memory for every tile.
  static constexpr bool kQInRegs = kM * D <= 128;
};

// One warp's query rows: rows g and g + 8 (g = lane / 4) of each 16-row m tile are this thread's.
template <int D, int kM>
struct WarpRows {
  using T = ForwardTile<D, kM>;
  float o[kM][D / 8][4];
  float row_max[kM][2];  // running maxima of the raw scores
  float row_sum[kM][2];  // partial row sums (this thread's columns; sums() reduces them)
  std::uint32_t qa[T::kQInRegs ? kM : 1][T::kQInRegs ? D / 16 : 1][4];
  const bf16* q_warp = nullptr;

  // qs: the block's Q tile in shared memory (complete); warp_row0: this warp's first row in it.
  __device__ __forceinline__ void start(const bf16* qs, int warp_row0, int lane) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int i = 0; i < D / 8; ++i) o[m][i][0] = o[m][i][1] = o[m][i][2] = o[m][i][3] = 0.0f;
      row_max[m][0] = row_max[m][1] = -INFINITY;
      row_sum[m][0] = row_sum[m][1] = 0.0f;
    }
    q_warp = qs + (warp_row0 + lane % 16) * T::kLd + (lane / 16) * 8;
    if constexpr (T::kQInRegs) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qa[m][kk], q_warp + m * 16 * T::kLd + kk * 16);
      }
    }
  }

  // The tile of keys key0..key0+63 (absolute positions) in kt and vt; first_pos: the absolute
  // position of the warp's first row. Tiles must come in key order, starting at key 0 (which every
  // row sees), so that the running maxima are finite after the first.
  __device__ __forceinline__ void tile(const bf16* kt, const bf16* vt, int key0, int first_pos, float scale_log2,
                                       int lane) {
    const int g = lane / 4, tig = lane % 4;
    float s[kM][kBk / 8][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) s[m][i][0] = s[m][i][1] = s[m][i][2] = s[m][i][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t a_smem[kM][4];
      if constexpr (!T::kQInRegs) {
#pragma unroll
        for (int m = 0; m < kM; ++m) ldmatrix_x4(a_smem[m], q_warp + m * 16 * T::kLd + kk * 16);
      }
#pragma unroll
      for (int p = 0; p < kBk / 16; ++p) {
        std::uint32_t b[4];
        ldmatrix_x4(b, kt + (p * 16 + lane % 8 + (lane / 16) * 8) * T::kLd + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          if constexpr (T::kQInRegs) {
            mma_bf16(s[m][2 * p], qa[m][kk], b[0], b[1]);
            mma_bf16(s[m][2 * p + 1], qa[m][kk], b[2], b[3]);
          } else {
            mma_bf16(s[m][2 * p], a_smem[m], b[0], b[1]);
            mma_bf16(s[m][2 * p + 1], a_smem[m], b[2], b[3]);
          }
        }
      }
    }

    // Causal mask, only on tiles reaching past the warp's first query.
    if (key0 + kBk - 1 > first_pos) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        const int pos_a = first_pos + m * 16 + g, pos_b = pos_a + 8;
#pragma unroll
        for (int i = 0; i < kBk / 8; ++i) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int key = key0 + i * 8 + tig * 2 + j;
            if (key > pos_a) s[m][i][j] = -INFINITY;
            if (key > pos_b) s[m][i][2 + j] = -INFINITY;
          }
        }
      }
    }

    // Online softmax in the log2 domain: p = 2^(s * scale_log2 - max * scale_log2).
    bool moved = false;
    float alpha[kM][2], neg_max[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_max[m][r];
#pragma unroll
        for (int i = 0; i < kBk / 8; ++i) mx = fmaxf(mx, fmaxf(s[m][i][2 * r], s[m][i][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        moved |= mx != row_max[m][r];
        alpha[m][r] = fast_exp2((row_max[m][r] - mx) * scale_log2);  // 0 on tile 0 (-inf - finite)
        row_max[m][r] = mx;
        neg_max[m][r] = -mx * scale_log2;
      }
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        row_sum[m][0] *= alpha[m][0];
        row_sum[m][1] *= alpha[m][1];
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          o[m][i][0] *= alpha[m][0];
          o[m][i][1] *= alpha[m][0];
          o[m][i][2] *= alpha[m][1];
          o[m][i][3] *= alpha[m][1];
        }
      }
    }
    // P as BF16 A fragments: the S accumulators of keys 16p..16p+15 are exactly that layout.
    std::uint32_t pa[kM][kBk / 16][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) {
        const float p0 = fast_exp2(fmaf(s[m][i][0], scale_log2, neg_max[m][0]));
        const float p1 = fast_exp2(fmaf(s[m][i][1], scale_log2, neg_max[m][0]));
        const float p2 = fast_exp2(fmaf(s[m][i][2], scale_log2, neg_max[m][1]));
        const float p3 = fast_exp2(fmaf(s[m][i][3], scale_log2, neg_max[m][1]));
        row_sum[m][0] += p0 + p1;
        row_sum[m][1] += p2 + p3;
        pa[m][i / 2][(i % 2) * 2] = pack_bf16(p0, p1);
        pa[m][i / 2][(i % 2) * 2 + 1] = pack_bf16(p2, p3);
      }
    }

    // O += P V.
#pragma unroll
    for (int p = 0; p < kBk / 16; ++p) {
#pragma unroll
      for (int db = 0; db < D / 16; ++db) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vt + (p * 16 + lane % 8 + ((lane / 8) % 2) * 8) * T::kLd + db * 16 + (lane / 16) * 8);
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          mma_bf16(o[m][2 * db], pa[m][p], b[0], b[1]);
          mma_bf16(o[m][2 * db + 1], pa[m][p], b[2], b[3]);
        }
      }
    }
  }

  // The full row sums of m tile m, rows g (l[m][0]) and g + 8 (l[m][1]): the 4 lanes of a row added.
  __device__ __forceinline__ void sums(float (&l)[kM][2]) const {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      l[m][0] = row_sum[m][0];
      l[m][1] = row_sum[m][1];
#pragma unroll
      for (int x = 1; x < 4; x *= 2) {
        l[m][0] += __shfl_xor_sync(0xffffffffu, l[m][0], x);
        l[m][1] += __shfl_xor_sync(0xffffffffu, l[m][1], x);
      }
    }
  }
};

}  // namespace gpuscout::cuda::infer::flash
