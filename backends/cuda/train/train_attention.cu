// Flash attention for the train step (see train_attention.hpp). The forward runs the serving
// engine's prefill core (infer/flash_forward.cuh: 4 warps of 16 kM query rows, 64-key tiles
// double-buffered with cp.async into padded shared memory, mma.sync m16n8k16 BF16 -> FP32 with P
// kept in registers as the next MMA's A operand, online softmax in the log2 domain, causal mask only
// on the diagonal tiles) on strided reads of the fused QKV rows instead of the paged cache, and
// writes each row's log-sum-exp for the backward. The backward follows
// flash-attention-2, with dQ in a second kernel instead of FP32 atomics (deterministic):
//  - dK/dV: a block per (sequence, KV head, 64-key tile), warp w owning keys 16w..16w+15, loops
//    over the group's query heads and the query tiles at or after its keys (causal), with the next
//    Q, dO, lse and delta tile prefetched. Per tile, transposed so that keys are the MMA rows:
//    S^T = K Q^T, P^T = 2^(S^T scale log2(e) - lse), dV += P^T dO, dP^T = V dO^T,
//    dS^T = P^T (dP^T - delta), dK += dS^T Q (scaled once at the end).
//  - dQ: a block per (sequence, head, 64-query tile), the forward's loop over key tiles:
//    S = Q K^T, P, dP = dO V^T, dS = P (dP - delta), dQ += dS K.
// Fragment layouts are PTX's (ISA, "Matrix fragments for mma.m16n8k16").
#include "train_attention.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "flash_forward.cuh"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/train/train_cost.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"

namespace gpuscout::cuda::train {

namespace {

using infer::cp_async16;
using infer::cp_async_commit;
using infer::cp_async_wait;
using infer::ldmatrix_x4;
using infer::ldmatrix_x4_trans;
using infer::mma_bf16;
using infer::pack_bf16;

using infer::flash::fast_exp2;
using infer::flash::kBk;  // keys per tile (forward, dQ); keys per block (dK/dV)
using infer::flash::kLog2e;
using infer::flash::kThreads;
using infer::flash::kWarps;
constexpr int kBm = 64;  // query rows per tile of the backward kernels (4 warps x 16)
// The executed-FLOPs count of the train-step records (train_cost.hpp) assumes these tiles.
static_assert(kBk == gpuscout::train::kFlashKeyTile && kBm == gpuscout::train::kFlashBackwardQueryTile);
static_assert(infer::flash::ForwardTile<128, 1>::kBq == gpuscout::train::flash_forward_query_tile(64) &&
              infer::flash::ForwardTile<128, 2>::kBq == gpuscout::train::flash_forward_query_tile(65));

// R rows of D columns starting at src (row stride `stride` elements) into padded shared memory
// (row stride D + 8); rows from `valid` on are zero-filled.
template <int D, int R>
__device__ __forceinline__ void load_rows(bf16* dst, const bf16* src, std::int64_t stride, int valid, int tid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int c = tid; c < R * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool ok = r < valid;
    cp_async16(dst + r * (D + 8) + cc * 8, src + (ok ? r : 0) * stride + cc * 8, ok ? 16 : 0);
  }
}

// A fragment (16 rows x 16 columns kk*16..) of a row-major padded tile, rows row0..row0+15.
template <int kLd>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const bf16* tile, int row0, int kk, int lane) {
  ldmatrix_x4(a, tile + (row0 + lane % 16) * kLd + (lane / 16) * 8 + kk * 16);
}
// B fragments of n tiles 2p, 2p+1 where the tile's rows are n and its columns k (K in Q K^T).
template <int kLd>
__device__ __forceinline__ void load_b(std::uint32_t (&b)[4], const bf16* tile, int p, int kk, int lane) {
  ldmatrix_x4(b, tile + (p * 16 + lane % 8 + (lane / 16) * 8) * kLd + kk * 16 + ((lane / 8) % 2) * 8);
}
// B fragments of n tiles 2db, 2db+1 where the tile's rows are k and its columns n (V in P V).
template <int kLd>
__device__ __forceinline__ void load_b_trans(std::uint32_t (&b)[4], const bf16* tile, int p, int db, int lane) {
  ldmatrix_x4_trans(b, tile + (p * 16 + lane % 8 + ((lane / 8) % 2) * 8) * kLd + db * 16 + (lane / 16) * 8);
}

// c[n tiles][4] = A (16 rows of `a_tile` from row0, D wide) B^T (the N rows of `b_tile`).
template <int D, int N>
__device__ __forceinline__ void mma_abt(float (&c)[N / 8][4], const bf16* a_tile, int row0, const bf16* b_tile,
                                        int lane) {
  constexpr int kLd = D + 8;
#pragma unroll
  for (int i = 0; i < N / 8; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    std::uint32_t a[4];
    load_a<kLd>(a, a_tile, row0, kk, lane);
#pragma unroll
    for (int p = 0; p < N / 16; ++p) {
      std::uint32_t b[4];
      load_b<kLd>(b, b_tile, p, kk, lane);
      mma_bf16(c[2 * p], a, b[0], b[1]);
      mma_bf16(c[2 * p + 1], a, b[2], b[3]);
    }
  }
}

// acc[D / 8][4] += A (registers: 16 rows x K, as K / 16 fragments) B (the K rows of `b_tile`, D wide).
template <int D, int K>
__device__ __forceinline__ void mma_ab(float (&acc)[D / 8][4], const std::uint32_t (&a)[K / 16][4], const bf16* b_tile,
                                       int lane) {
  constexpr int kLd = D + 8;
#pragma unroll
  for (int p = 0; p < K / 16; ++p) {
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      std::uint32_t b[4];
      load_b_trans<kLd>(b, b_tile, p, db, lane);
      mma_bf16(acc[2 * db], a[p], b[0], b[1]);
      mma_bf16(acc[2 * db + 1], a[p], b[2], b[3]);
    }
  }
}

template <int D, int kM>
using ForwardTile = infer::flash::ForwardTile<D, kM>;

template <int D, int kM>
__global__ void __launch_bounds__(kThreads, 2)
    flash_forward_kernel(const bf16* __restrict__ qkv, FlashShape shape, bf16* __restrict__ out,
                         float* __restrict__ lse, float scale_log2) {
  using T = ForwardTile<D, kM>;
  constexpr int kBq = T::kBq;
  constexpr int kRows = 16 * kM;  // query rows per warp
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks = qs + T::kQ;       // [2][kBk][kLd]
  bf16* vs = ks + 2 * T::kKv;  // [2][kBk][kLd]

  const int h = blockIdx.x, b = blockIdx.z, seq = shape.seq;
  // The longest causal rows first (the last query tile has the most keys), over all heads.
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBq;
  const int kvh = h / (shape.heads / shape.kv_heads);
  const std::int64_t stride = shape.qkv_dim();
  const std::int64_t row_base = static_cast<std::int64_t>(b) * seq;
  const bf16* k = qkv + row_base * stride + shape.q_dim() + kvh * D;
  const bf16* v = k + shape.kv_dim();
  const int kv_end = min(q0 + kBq, seq);
  const int tiles = (kv_end + kBk - 1) / kBk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  load_rows<D, kBq>(qs, qkv + (row_base + q0) * stride + h * D, stride, seq - q0, tid);
  auto load_kv = [&](int tile, int buf) {
    const std::int64_t off = static_cast<std::int64_t>(tile) * kBk * stride;
    load_rows<D, kBk>(ks + buf * T::kKv, k + off, stride, kv_end - tile * kBk, tid);
    load_rows<D, kBk>(vs + buf * T::kKv, v + off, stride, kv_end - tile * kBk, tid);
  };
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp_row0 = warp * kRows;
  infer::flash::WarpRows<D, kM> rows;
  rows.start(qs, warp_row0, lane);
  const int g = lane / 4, tig = lane % 4;
  const int warp_pos_first = q0 + warp_row0;
  const int warp_pos_last = warp_pos_first + kRows - 1;
  const bool warp_live = warp_pos_first < seq;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) load_kv(tile + 1, buf ^ 1);
    cp_async_commit();
    const int key0 = tile * kBk;
    if (warp_live && key0 <= warp_pos_last) {
      rows.tile(ks + buf * T::kKv, vs + buf * T::kKv, key0, warp_pos_first, scale_log2, lane);
    }
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!warp_live) return;

  const std::int64_t q_dim = shape.q_dim();
  float* lse_h = lse + (static_cast<std::int64_t>(b) * shape.heads + h) * seq;
  float l[kM][2];
  rows.sums(l);
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const float inv_a = 1.0f / l[m][0], inv_b = 1.0f / l[m][1];
    const int row_a = q0 + warp_row0 + m * 16 + g, row_b = row_a + 8;
    if (tig == 0) {
      if (row_a < seq) lse_h[row_a] = rows.row_max[m][0] * scale_log2 + __log2f(l[m][0]);
      if (row_b < seq) lse_h[row_b] = rows.row_max[m][1] * scale_log2 + __log2f(l[m][1]);
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + tig * 2;
      if (row_a < seq) {
        *reinterpret_cast<__nv_bfloat162*>(out + (row_base + row_a) * q_dim + h * D + d) =
            __floats2bfloat162_rn(rows.o[m][i][0] * inv_a, rows.o[m][i][1] * inv_a);
      }
      if (row_b < seq) {
        *reinterpret_cast<__nv_bfloat162*>(out + (row_base + row_b) * q_dim + h * D + d) =
            __floats2bfloat162_rn(rows.o[m][i][2] * inv_b, rows.o[m][i][3] * inv_b);
      }
    }
  }
}

template <int D>
struct BackwardTile {
  static constexpr int kLd = D + 8;
  static constexpr int kTile = 64 * kLd;  // kBk == kBm == 64 rows
  // dK/dV: K, V, Q[2], dO[2] and lse[2], delta[2]; dQ: Q, dO, K[2], V[2].
  static constexpr int kSmemBytes = 6 * kTile * 2 + 4 * kBm * 4;
};
static_assert(kBk == kBm, "the backward's diagonal tile is one key tile and one query tile");

template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    flash_dkdv_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout, const float* __restrict__ lse,
                      const float* __restrict__ delta, FlashShape shape, bf16* __restrict__ dqkv, float scale_log2,
                      float scale) {
  using T = BackwardTile<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);
  bf16* vs = ks + T::kTile;
  bf16* qs = vs + T::kTile;                                     // [2][64][kLd]
  bf16* dos = qs + 2 * T::kTile;                                // [2][64][kLd]
  float* lse_s = reinterpret_cast<float*>(dos + 2 * T::kTile);  // [2][64]
  float* delta_s = lse_s + 2 * kBm;                             // [2][64]

  const int kvh = blockIdx.x, kt = blockIdx.y, b = blockIdx.z, seq = shape.seq;  // key tile 0 (most work) first
  const int group = shape.heads / shape.kv_heads;
  const int key0 = kt * kBk;
  const std::int64_t stride = shape.qkv_dim(), q_dim = shape.q_dim();
  const std::int64_t row_base = static_cast<std::int64_t>(b) * seq;
  const int q_tiles = (seq + kBm - 1) / kBm;
  const int per_head = q_tiles - kt;  // query tiles kt.. see these keys
  const int items = group * per_head;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const std::int64_t k_col = q_dim + static_cast<std::int64_t>(kvh) * D;
  load_rows<D, kBk>(ks, qkv + (row_base + key0) * stride + k_col, stride, seq - key0, tid);
  load_rows<D, kBk>(vs, qkv + (row_base + key0) * stride + k_col + shape.kv_dim(), stride, seq - key0, tid);
  auto load_item = [&](int item, int buf) {
    const int h = kvh * group + item / per_head;
    const int q0 = (kt + item % per_head) * kBm;
    load_rows<D, kBm>(qs + buf * T::kTile, qkv + (row_base + q0) * stride + h * D, stride, seq - q0, tid);
    load_rows<D, kBm>(dos + buf * T::kTile, dout + (row_base + q0) * q_dim + h * D, q_dim, seq - q0, tid);
    if (tid < kBm) {
      const std::int64_t at = (static_cast<std::int64_t>(b) * shape.heads + h) * seq + q0 + tid;
      const bool ok = q0 + tid < seq;
      lse_s[buf * kBm + tid] = ok ? lse[at] : INFINITY;  // P = 0 on rows past the sequence
      delta_s[buf * kBm + tid] = ok ? delta[at] : 0.0f;
    }
  };
  load_item(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int g = lane / 4, tig = lane % 4;
  const int warp_key0 = warp * 16;  // within the tile
  const int key_a = key0 + warp_key0 + g, key_b = key_a + 8;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) dk[i][j] = dv[i][j] = 0.0f;
  }

  for (int item = 0; item < items; ++item) {
    const int buf = item & 1;
    if (item + 1 < items) load_item(item + 1, buf ^ 1);
    cp_async_commit();
    const int q0 = (kt + item % per_head) * kBm;
    const bf16* qt = qs + buf * T::kTile;
    const bf16* dot = dos + buf * T::kTile;
    const float* lse_t = lse_s + buf * kBm;
    const float* delta_t = delta_s + buf * kBm;

    // S^T = K Q^T (keys are rows), then P^T.
    float s[kBm / 8][4];
    mma_abt<D, kBm>(s, ks, warp_key0, qt, lane);
    const bool diagonal = q0 < key0 + kBk;
#pragma unroll
    for (int i = 0; i < kBm / 8; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = i * 8 + tig * 2 + j;
        const float l = lse_t[col];
        const int query = q0 + col;
        float pa_ = fast_exp2(fmaf(s[i][j], scale_log2, -l));
        float pb_ = fast_exp2(fmaf(s[i][2 + j], scale_log2, -l));
        if (diagonal && key_a > query) pa_ = 0.0f;
        if (diagonal && key_b > query) pb_ = 0.0f;
        s[i][j] = pa_;
        s[i][2 + j] = pb_;
      }
    }
    {
      std::uint32_t pa[kBm / 16][4];
#pragma unroll
      for (int i = 0; i < kBm / 8; ++i) {
        pa[i / 2][(i % 2) * 2] = pack_bf16(s[i][0], s[i][1]);
        pa[i / 2][(i % 2) * 2 + 1] = pack_bf16(s[i][2], s[i][3]);
      }
      mma_ab<D, kBm>(dv, pa, dot, lane);  // dV += P^T dO
    }
    // dP^T = V dO^T; dS^T = P^T (dP^T - delta); dK += dS^T Q.
    float dp[kBm / 8][4];
    mma_abt<D, kBm>(dp, vs, warp_key0, dot, lane);
    std::uint32_t dsa[kBm / 16][4];
#pragma unroll
    for (int i = 0; i < kBm / 8; ++i) {
      const int col = i * 8 + tig * 2;
      const float d0 = delta_t[col], d1 = delta_t[col + 1];
      dsa[i / 2][(i % 2) * 2] = pack_bf16(s[i][0] * (dp[i][0] - d0), s[i][1] * (dp[i][1] - d1));
      dsa[i / 2][(i % 2) * 2 + 1] = pack_bf16(s[i][2] * (dp[i][2] - d0), s[i][3] * (dp[i][3] - d1));
    }
    mma_ab<D, kBm>(dk, dsa, qt, lane);
    cp_async_wait<0>();
    __syncthreads();
  }

  bf16* dk_out = dqkv + row_base * stride + k_col;
  bf16* dv_out = dk_out + shape.kv_dim();
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int d = i * 8 + tig * 2;
    if (key_a < seq) {
      *reinterpret_cast<__nv_bfloat162*>(dk_out + key_a * stride + d) =
          __floats2bfloat162_rn(dk[i][0] * scale, dk[i][1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv_out + key_a * stride + d) = __floats2bfloat162_rn(dv[i][0], dv[i][1]);
    }
    if (key_b < seq) {
      *reinterpret_cast<__nv_bfloat162*>(dk_out + key_b * stride + d) =
          __floats2bfloat162_rn(dk[i][2] * scale, dk[i][3] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv_out + key_b * stride + d) = __floats2bfloat162_rn(dv[i][2], dv[i][3]);
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    flash_dq_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout, const float* __restrict__ lse,
                    const float* __restrict__ delta, FlashShape shape, bf16* __restrict__ dqkv, float scale_log2,
                    float scale) {
  using T = BackwardTile<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* dos = qs + T::kTile;
  bf16* ks = dos + T::kTile;     // [2][64][kLd]
  bf16* vs = ks + 2 * T::kTile;  // [2][64][kLd]

  const int h = blockIdx.x, b = blockIdx.z, seq = shape.seq;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBm;  // the longest rows first
  const int kvh = h / (shape.heads / shape.kv_heads);
  const std::int64_t stride = shape.qkv_dim(), q_dim = shape.q_dim();
  const std::int64_t row_base = static_cast<std::int64_t>(b) * seq;
  const bf16* k = qkv + row_base * stride + q_dim + kvh * D;
  const bf16* v = k + shape.kv_dim();
  const int kv_end = min(q0 + kBm, seq);
  const int tiles = (kv_end + kBk - 1) / kBk;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  load_rows<D, kBm>(qs, qkv + (row_base + q0) * stride + h * D, stride, seq - q0, tid);
  load_rows<D, kBm>(dos, dout + (row_base + q0) * q_dim + h * D, q_dim, seq - q0, tid);
  auto load_kv = [&](int tile, int buf) {
    const std::int64_t off = static_cast<std::int64_t>(tile) * kBk * stride;
    load_rows<D, kBk>(ks + buf * T::kTile, k + off, stride, kv_end - tile * kBk, tid);
    load_rows<D, kBk>(vs + buf * T::kTile, v + off, stride, kv_end - tile * kBk, tid);
  };
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int g = lane / 4, tig = lane % 4;
  const int warp_row0 = warp * 16;
  const int row_a = q0 + warp_row0 + g, row_b = row_a + 8;
  const bool warp_live = q0 + warp_row0 < seq;
  const std::int64_t lse_at = (static_cast<std::int64_t>(b) * shape.heads + h) * seq;
  const float lse_a = row_a < seq ? lse[lse_at + row_a] : INFINITY,
              lse_b = row_b < seq ? lse[lse_at + row_b] : INFINITY;
  const float delta_a = row_a < seq ? delta[lse_at + row_a] : 0.0f;
  const float delta_b = row_b < seq ? delta[lse_at + row_b] : 0.0f;
  float dq[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) load_kv(tile + 1, buf ^ 1);
    cp_async_commit();
    const int key0 = tile * kBk;
    if (warp_live && key0 <= q0 + warp_row0 + 15) {
      const bf16* kt = ks + buf * T::kTile;
      const bf16* vt = vs + buf * T::kTile;
      float s[kBk / 8][4], dp[kBk / 8][4];
      mma_abt<D, kBk>(s, qs, warp_row0, kt, lane);
      mma_abt<D, kBk>(dp, dos, warp_row0, vt, lane);
      const bool diagonal = key0 + kBk - 1 > q0 + warp_row0;
      std::uint32_t dsa[kBk / 16][4];
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) {
        float ds[4];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int key = key0 + i * 8 + tig * 2 + j;
          float pa_ = fast_exp2(fmaf(s[i][j], scale_log2, -lse_a));
          float pb_ = fast_exp2(fmaf(s[i][2 + j], scale_log2, -lse_b));
          if (diagonal && key > row_a) pa_ = 0.0f;
          if (diagonal && key > row_b) pb_ = 0.0f;
          ds[j] = pa_ * (dp[i][j] - delta_a);
          ds[2 + j] = pb_ * (dp[i][2 + j] - delta_b);
        }
        dsa[i / 2][(i % 2) * 2] = pack_bf16(ds[0], ds[1]);
        dsa[i / 2][(i % 2) * 2 + 1] = pack_bf16(ds[2], ds[3]);
      }
      mma_ab<D, kBk>(dq, dsa, kt, lane);  // dQ += dS K
    }
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!warp_live) return;
  bf16* dq_out = dqkv + row_base * stride + h * D;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int d = i * 8 + tig * 2;
    if (row_a < seq) {
      *reinterpret_cast<__nv_bfloat162*>(dq_out + row_a * stride + d) =
          __floats2bfloat162_rn(dq[i][0] * scale, dq[i][1] * scale);
    }
    if (row_b < seq) {
      *reinterpret_cast<__nv_bfloat162*>(dq_out + row_b * stride + d) =
          __floats2bfloat162_rn(dq[i][2] * scale, dq[i][3] * scale);
    }
  }
}

template <typename Kernel>
void set_smem(Kernel kernel, int bytes) {
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  const int optin = infer::shared_memory_optin_bytes(device);
  if (bytes > optin) {
    throw std::invalid_argument("flash attention (training): a block needs " + std::to_string(bytes) +
                                " bytes of shared memory; this GPU allows " + std::to_string(optin));
  }
  // Above 48 KiB of dynamic shared memory needs the opt-in (per device context: set at every launch).
  GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

void check_shape(const FlashShape& s) {
  if (s.head_dim != 32 && s.head_dim != 64 && s.head_dim != 128) {
    throw std::invalid_argument("flash attention: head_dim must be 32, 64 or 128");
  }
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0) throw std::invalid_argument("flash attention: heads % kv_heads");
}

}  // namespace

void launch_flash_attention_forward(const bf16* qkv, const FlashShape& shape, bf16* out, float* lse,
                                    cudaStream_t stream) {
  if (shape.batch <= 0 || shape.seq <= 0) return;
  check_shape(shape);
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  infer::dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    auto launch = [&](auto m) {
      constexpr int kM = decltype(m)::value;
      using T = ForwardTile<D, kM>;
      set_smem(flash_forward_kernel<D, kM>, T::kSmemBytes);
      const dim3 grid(shape.heads, (shape.seq + T::kBq - 1) / T::kBq, shape.batch);
      flash_forward_kernel<D, kM><<<grid, kThreads, T::kSmemBytes, stream>>>(qkv, shape, out, lse, scale_log2);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
    };
    if (gpuscout::train::flash_forward_query_tile(shape.seq) == ForwardTile<D, 1>::kBq) {
      launch(std::integral_constant<int, 1>{});
    } else {
      launch(std::integral_constant<int, 2>{});
    }
  });
}

void launch_flash_attention_backward(const bf16* qkv, const bf16* dout, const float* lse, const float* delta,
                                     const FlashShape& shape, bf16* dqkv, cudaStream_t stream) {
  if (shape.batch <= 0 || shape.seq <= 0) return;
  check_shape(shape);
  const float scale = 1.0f / sqrtf(static_cast<float>(shape.head_dim));
  const float scale_log2 = kLog2e * scale;
  const unsigned tiles = static_cast<unsigned>((shape.seq + kBm - 1) / kBm);
  infer::dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    constexpr int kSmem = BackwardTile<D>::kSmemBytes;
    set_smem(flash_dkdv_kernel<D>, kSmem);
    flash_dkdv_kernel<D><<<dim3(shape.kv_heads, tiles, shape.batch), kThreads, kSmem, stream>>>(
        qkv, dout, lse, delta, shape, dqkv, scale_log2, scale);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    set_smem(flash_dq_kernel<D>, kSmem);
    flash_dq_kernel<D><<<dim3(shape.heads, tiles, shape.batch), kThreads, kSmem, stream>>>(qkv, dout, lse, delta, shape,
                                                                                           dqkv, scale_log2, scale);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpuscout::cuda::train
