// Prefill attention on tensor cores, flash-attention-2 style: a block takes 64 queries of one head
// (4 warps x 16 rows), loops over 64-key tiles of the paged cache (cp.async double buffering into
// padded shared memory), S = Q K^T and O += P V with mma.sync m16n8k16 BF16 -> FP32, online
// softmax in FP32 registers, causal mask by absolute position (query i of a chunk sits at
// context_len - q_len + i). The fragment layouts are PTX's (ISA, "Matrix fragments for mma.m16n8k16").
#include <cstdint>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kBq = 64;  // queries per block
constexpr int kBk = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct Tile {
  static constexpr int kLd = D + 8;  // padded row (elements): 8 rows of an ldmatrix hit distinct banks
  static constexpr int kQ = kBq * kLd;
  static constexpr int kKv = kBk * kLd;
  static constexpr int kSmemBytes = (kQ + 4 * kKv) * 2;  // Q, K[2], V[2]
};

template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_kernel(const bf16* __restrict__ q, int q_stride, const bf16* __restrict__ k_cache,
                   const bf16* __restrict__ v_cache, AttentionBatch batch, AttentionShape shape, bf16* out,
                   int out_stride, float scale_log2) {
  using T = Tile<D>;
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* ks = qs + T::kQ;       // [2][kBk][kLd]
  bf16* vs = ks + 2 * T::kKv;  // [2][kBk][kLd]

  const int seq = blockIdx.z, h = blockIdx.y;
  const int q_len = batch.q_len[seq];
  const int ctx = batch.context_len[seq];
  if (q_len <= 0 || ctx <= 0) return;
  // The longest causal rows first: the last query tile has the most keys.
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int q0 = qt * kBq;
  if (q0 >= q_len) return;
  const int kvh = h / (shape.heads / shape.kv_heads);
  const int pos0 = ctx - q_len;  // absolute position of the chunk's query 0
  const int kv_end = pos0 + min(q0 + kBq, q_len);
  const int tiles = (kv_end + kBk - 1) / kBk;
  const std::int32_t* table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
  const std::int64_t q_row0 = batch.q_start[seq];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // Q tile (rows past the chunk are zeros and never written back).
  for (int c = tid; c < kBq * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool ok = q0 + r < q_len;
    const bf16* src = q + (q_row0 + (ok ? q0 + r : 0)) * q_stride + h * D + cc * 8;
    cp_async16(qs + r * T::kLd + cc * 8, src, ok ? 16 : 0);
  }
  auto load_kv = [&](int tile, int buf) {
    for (int c = tid; c < kBk * kChunks; c += kThreads) {
      const int r = c / kChunks, cc = c % kChunks;
      const int key = tile * kBk + r;
      const bool ok = key < kv_end;
      std::int64_t row = 0;
      if (ok) {
        row = (static_cast<std::int64_t>(table[key / shape.block_size]) * shape.kv_heads + kvh) * shape.block_size +
              key % shape.block_size;
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

  // This warp's 16 query rows as A fragments, one per 16 columns of D.
  std::uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    ldmatrix_x4(qa[kk], qs + (warp * 16 + lane % 16) * T::kLd + kk * 16 + (lane / 16) * 8);
  }

  const int g = lane / 4, tig = lane % 4;
  // Absolute positions of this thread's two rows (g and g + 8 of the warp's 16).
  const int pos_a = pos0 + q0 + warp * 16 + g;
  const int pos_b = pos_a + 8;
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) load_kv(tile + 1, buf ^ 1);
    cp_async_commit();
    const bf16* kt = ks + buf * T::kKv;
    const bf16* vt = vs + buf * T::kKv;

    float s[kBk / 8][4];
#pragma unroll
    for (int i = 0; i < kBk / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int p = 0; p < kBk / 16; ++p) {
        std::uint32_t b[4];
        ldmatrix_x4(b, kt + (p * 16 + lane % 8 + (lane / 16) * 8) * T::kLd + kk * 16 + ((lane / 8) % 2) * 8);
        mma_bf16(s[2 * p], qa[kk], b[0], b[1]);
        mma_bf16(s[2 * p + 1], qa[kk], b[2], b[3]);
      }
    }

    // Scale, causal mask (only tiles reaching past the block's first query need it), row max.
    const int key0 = tile * kBk;
    const bool mask = key0 + kBk - 1 > pos0 + q0;
    float mx_a = m_a, mx_b = m_b;
#pragma unroll
    for (int i = 0; i < kBk / 8; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = key0 + i * 8 + tig * 2 + j;
        float sa = s[i][j] * scale_log2, sb = s[i][2 + j] * scale_log2;
        if (mask) {
          if (key > pos_a) sa = -INFINITY;
          if (key > pos_b) sb = -INFINITY;
        }
        s[i][j] = sa;
        s[i][2 + j] = sb;
        mx_a = fmaxf(mx_a, sa);
        mx_b = fmaxf(mx_b, sb);
      }
    }
#pragma unroll
    for (int x = 1; x < 4; x *= 2) {
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, x));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, x));
    }
    // Key 0 is in tile 0 and unmasked for every row, so the running max is finite from then on.
    const float alpha_a = exp2f(m_a - mx_a), alpha_b = exp2f(m_b - mx_b);
    m_a = mx_a;
    m_b = mx_b;
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int i = 0; i < kBk / 8; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        s[i][j] = exp2f(s[i][j] - m_a);
        s[i][2 + j] = exp2f(s[i][2 + j] - m_b);
        sum_a += s[i][j];
        sum_b += s[i][2 + j];
      }
    }
    l_a = l_a * alpha_a + sum_a;
    l_b = l_b * alpha_b + sum_b;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha_a;
      o[i][1] *= alpha_a;
      o[i][2] *= alpha_b;
      o[i][3] *= alpha_b;
    }

    // O += P V: the S accumulators of keys 16p..16p+15 are exactly the A fragment of P.
#pragma unroll
    for (int p = 0; p < kBk / 16; ++p) {
      const std::uint32_t pa[4] = {pack_bf16(s[2 * p][0], s[2 * p][1]), pack_bf16(s[2 * p][2], s[2 * p][3]),
                                   pack_bf16(s[2 * p + 1][0], s[2 * p + 1][1]),
                                   pack_bf16(s[2 * p + 1][2], s[2 * p + 1][3])};
#pragma unroll
      for (int db = 0; db < D / 16; ++db) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vt + (p * 16 + lane % 8 + ((lane / 8) % 2) * 8) * T::kLd + db * 16 + (lane / 16) * 8);
        mma_bf16(o[2 * db], pa, b[0], b[1]);
        mma_bf16(o[2 * db + 1], pa, b[2], b[3]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();
  }

#pragma unroll
  for (int x = 1; x < 4; x *= 2) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
  const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int d = i * 8 + tig * 2;
    if (row_a < q_len) {
      *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_a) * out_stride + h * D + d) =
          __floats2bfloat162_rn(o[i][0] * inv_a, o[i][1] * inv_a);
    }
    if (row_b < q_len) {
      *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_b) * out_stride + h * D + d) =
          __floats2bfloat162_rn(o[i][2] * inv_b, o[i][3] * inv_b);
    }
  }
}

template <int D>
void launch_prefill(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, const AttentionBatch& batch,
                    const AttentionShape& shape, bf16* out, int out_stride, cudaStream_t stream) {
  constexpr int kSmem = Tile<D>::kSmemBytes;
  // Above 48 KiB of dynamic shared memory needs the opt-in, which belongs to the current device's
  // context (tensor parallelism: several): set at every launch, a host-side call that is also
  // allowed while a graph is being captured.
  GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid((batch.max_q_len + kBq - 1) / kBq, shape.heads, batch.num_seqs);
  prefill_kernel<D><<<grid, kThreads, kSmem, stream>>>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride,
                                                       kLog2e / sqrtf(static_cast<float>(D)));
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_prefill_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                              const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                              cudaStream_t stream) {
  if (batch.num_seqs <= 0 || batch.max_q_len <= 0) return;
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    launch_prefill<decltype(d)::value>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
  });
}

}  // namespace gpuscout::cuda::infer
