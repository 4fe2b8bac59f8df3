// Prefill attention on tensor cores, flash-attention-2 style. A block takes kM * 64 queries of one
// head (4 warps, each 16 * kM rows: with kM = 2 every K/V fragment read from shared memory feeds
// twice the MMAs, and a K/V tile in shared memory serves 128 queries), loops over 64-key tiles of
// the paged cache (cp.async double buffering into padded shared memory), S = Q K^T and O += P V
// with mma.sync m16n8k16 BF16 -> FP32 (P stays in registers as the A operand), online softmax in
// FP32 in the log2 domain (one FMA and one ex2 per score; O is rescaled only when a row's maximum
// moved), causal mask by absolute position (query i of a chunk sits at context_len - q_len + i),
// applied only on the tiles that reach past a warp's first query; a warp skips the tiles wholly
// past its last query. Chunks of at most 64 queries (max_q_len) take kM = 1. The fragment layouts
// are PTX's (ISA, "Matrix fragments for mma.m16n8k16").
#include <cstdint>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kBk = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int D, int kM>
struct Tile {
  static constexpr int kBq = 16 * kM * kWarps;  // queries per block
  static constexpr int kLd = D + 8;             // padded row (elements): 8 rows of an ldmatrix hit distinct banks
  static constexpr int kQ = kBq * kLd;
  static constexpr int kKv = kBk * kLd;
  static constexpr int kSmemBytes = (kQ + 4 * kKv) * 2;  // Q, K[2], V[2]
  // Q as A fragments in registers when they fit next to O and S (kM * D / 4 registers); otherwise
  // (D 128 with kM 2) re-read from shared memory for every tile.
  static constexpr bool kQInRegs = kM * D <= 128;
};

template <int D, int kM>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_kernel(const bf16* __restrict__ q, int q_stride, const bf16* __restrict__ k_cache,
                   const bf16* __restrict__ v_cache, AttentionBatch batch, AttentionShape shape, bf16* out,
                   int out_stride, float scale_log2) {
  using T = Tile<D, kM>;
  constexpr int kBq = T::kBq;
  constexpr int kRows = 16 * kM;  // query rows per warp
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks = qs + T::kQ;       // [2][kBk][kLd]
  bf16* vs = ks + 2 * T::kKv;  // [2][kBk][kLd]

  const int seq = blockIdx.z, h = blockIdx.x;
  const int q_len = batch.q_len[seq];
  const int ctx = batch.context_len[seq];
  if (q_len <= 0 || ctx <= 0) return;
  // The longest causal rows first (the last query tile has the most keys), over all heads: blocks
  // start in x-then-y order, so the heads are x and the query tiles, last first, y. (Head-major
  // order started the last head's longest tiles near the end: a tail of up to one longest block.)
  const int qt = gridDim.y - 1 - blockIdx.y;
  const int q0 = qt * kBq;
  if (q0 >= q_len) return;
  const int kvh = h / (shape.heads / shape.kv_heads);
  const int pos0 = ctx - q_len;  // absolute position of the chunk's query 0
  const int kv_end = pos0 + min(q0 + kBq, q_len);
  const int tiles = (kv_end + kBk - 1) / kBk;
  const std::int32_t* table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
  const std::int64_t q_row0 = batch.q_start[seq];
  const int bs = shape.block_size;
  const bool bs_pow2 = (bs & (bs - 1)) == 0;
  const int bs_shift = __ffs(bs) - 1;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // Q tile (rows past the chunk are zeros and never written back).
  for (int c = tid; c < kBq * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool ok = q0 + r < q_len;
    const bf16* src = q + (q_row0 + (ok ? q0 + r : 0)) * q_stride + h * D + cc * 8;
    cp_async16(qs + r * T::kLd + cc * 8, src, ok ? 16 : 0);
  }
  // K/V: each thread one 16-byte column chunk of kBk / (kThreads / kChunks) rows.
  auto load_kv = [&](int tile, int buf) {
    constexpr int kRowsPerPass = kThreads / kChunks;
    const int cc = tid % kChunks;
#pragma unroll
    for (int i = 0; i < kBk / kRowsPerPass; ++i) {
      const int r = tid / kChunks + i * kRowsPerPass;
      const int key = tile * kBk + r;
      const bool ok = key < kv_end;
      std::int64_t row = 0;
      if (ok) {
        const int blk = bs_pow2 ? key >> bs_shift : key / bs;
        const int in_blk = key - blk * bs;
        row = (static_cast<std::int64_t>(table[blk]) * shape.kv_heads + kvh) * bs + in_blk;
      }
      const std::int64_t off = row * D + cc * 8;
      cp_async16(ks + buf * T::kKv + r * T::kLd + cc * 8, k_cache + off, ok ? 16 : 0);
      cp_async16(vs + buf * T::kKv + r * T::kLd + cc * 8, v_cache + off, ok ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp_row0 = warp * kRows;  // first query row of this warp within the block's tile
  const bf16* q_warp = qs + (warp_row0 + lane % 16) * T::kLd + (lane / 16) * 8;
  std::uint32_t qa[T::kQInRegs ? kM : 1][T::kQInRegs ? D / 16 : 1][4];
  if constexpr (T::kQInRegs) {
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qa[m][kk], q_warp + m * 16 * T::kLd + kk * 16);
    }
  }

  const int g = lane / 4, tig = lane % 4;
  // Absolute position of this warp's first and last rows; of this thread's rows: g and g + 8 of
  // each 16-row m tile.
  const int warp_pos_first = pos0 + q0 + warp_row0;
  const int warp_pos_last = warp_pos_first + kRows - 1;
  // Warps whose rows all lie past the chunk do no work (they still take part in the barriers).
  const bool warp_live = q0 + warp_row0 < q_len;
  float o[kM][D / 8][4];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[m][i][0] = o[m][i][1] = o[m][i][2] = o[m][i][3] = 0.0f;
  }
  // Running row maxima (raw scores) and partial row sums (this thread's columns), rows g, g + 8.
  float row_max[kM][2], row_sum[kM][2];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
  }

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) load_kv(tile + 1, buf ^ 1);
    cp_async_commit();
    const int key0 = tile * kBk;
    // Tiles run in key order, so a live warp's tiles are a prefix and tile 0 (key 0, which every
    // row sees) comes first: the running maxima are finite after it.
    if (warp_live && key0 <= warp_pos_last) {
      const bf16* kt = ks + buf * T::kKv;
      const bf16* vt = vs + buf * T::kKv;

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
      if (key0 + kBk - 1 > warp_pos_first) {
#pragma unroll
        for (int m = 0; m < kM; ++m) {
          const int pos_a = warp_pos_first + m * 16 + g, pos_b = pos_a + 8;
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
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!warp_live) return;

#pragma unroll
  for (int m = 0; m < kM; ++m) {
    float l_a = row_sum[m][0], l_b = row_sum[m][1];
#pragma unroll
    for (int x = 1; x < 4; x *= 2) {
      l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
      l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
    }
    const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
    const int row_a = q0 + warp_row0 + m * 16 + g, row_b = row_a + 8;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + tig * 2;
      if (row_a < q_len) {
        *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_a) * out_stride + h * D + d) =
            __floats2bfloat162_rn(o[m][i][0] * inv_a, o[m][i][1] * inv_a);
      }
      if (row_b < q_len) {
        *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_b) * out_stride + h * D + d) =
            __floats2bfloat162_rn(o[m][i][2] * inv_b, o[m][i][3] * inv_b);
      }
    }
  }
}

template <int D, int kM>
void launch_prefill(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, const AttentionBatch& batch,
                    const AttentionShape& shape, bf16* out, int out_stride, cudaStream_t stream) {
  using T = Tile<D, kM>;
  constexpr int kSmem = T::kSmemBytes;
  // Above 48 KiB of dynamic shared memory needs the opt-in, which belongs to the current device's
  // context (tensor parallelism: several): set at every launch, a host-side call that is also
  // allowed while a graph is being captured.
  GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D, kM>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(shape.heads, (batch.max_q_len + T::kBq - 1) / T::kBq, batch.num_seqs);
  prefill_kernel<D, kM><<<grid, kThreads, kSmem, stream>>>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride,
                                                           kLog2e / sqrtf(static_cast<float>(D)));
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_prefill_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                              const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                              cudaStream_t stream) {
  if (batch.num_seqs <= 0 || batch.max_q_len <= 0) return;
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    // Short chunks (at most 64 queries) waste less of a 64-row tile than of a 128-row one.
    if (batch.max_q_len <= Tile<D, 1>::kBq) {
      launch_prefill<D, 1>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
    } else {
      launch_prefill<D, 2>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
    }
  });
}

}  // namespace gpuscout::cuda::infer
