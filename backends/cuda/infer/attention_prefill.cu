// Prefill attention on tensor cores, flash-attention-2 style: the per-warp core is
// flash_forward.cuh's (S = Q K^T and O += P V on mma.sync, online softmax in the log2 domain, the
// causal mask only on the diagonal tiles). A block takes kM * 64 queries of one head (4 warps, each
// 16 * kM rows: with kM = 2 every K/V fragment read from shared memory feeds twice the MMAs, and a
// K/V tile in shared memory serves 128 queries) and loops over 64-key tiles of the paged cache
// (cp.async double buffering into padded shared memory); query i of a chunk sits at absolute
// position context_len - q_len + i, and a warp skips the tiles wholly past its last query. Chunks
// of at most 64 queries (max_q_len) take kM = 1.
#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "flash_forward.cuh"
#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

using flash::kBk;
using flash::kLog2e;
using flash::kThreads;
template <int D, int kM>
using Tile = flash::ForwardTile<D, kM>;

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

  PrefillChunk chunk;
  if (!chunk.init(batch, shape, kBq)) return;
  const int h = blockIdx.x, q_len = chunk.q_len, q0 = chunk.q0, pos0 = chunk.pos0, kv_end = chunk.kv_end;
  const std::int64_t q_row0 = chunk.q_row0;
  const int tiles = (kv_end + kBk - 1) / kBk;

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
      const std::int64_t off = (ok ? chunk.cache_row(key) : 0) * D + cc * 8;
      cp_async16(ks + buf * T::kKv + r * T::kLd + cc * 8, k_cache + off, ok ? 16 : 0);
      cp_async16(vs + buf * T::kKv + r * T::kLd + cc * 8, v_cache + off, ok ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int warp_row0 = warp * kRows;  // first query row of this warp within the block's tile
  flash::WarpRows<D, kM> rows;
  rows.start(qs, warp_row0, lane);
  const int g = lane / 4, tig = lane % 4;
  // Absolute position of this warp's first and last rows.
  const int warp_pos_first = pos0 + q0 + warp_row0;
  const int warp_pos_last = warp_pos_first + kRows - 1;
  // Warps whose rows all lie past the chunk do no work (they still take part in the barriers).
  const bool warp_live = q0 + warp_row0 < q_len;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) load_kv(tile + 1, buf ^ 1);
    cp_async_commit();
    const int key0 = tile * kBk;
    // A live warp's tiles are a prefix in key order, from key 0.
    if (warp_live && key0 <= warp_pos_last) {
      rows.tile(ks + buf * T::kKv, vs + buf * T::kKv, key0, warp_pos_first, scale_log2, lane);
    }
    cp_async_wait<0>();
    __syncthreads();
  }
  if (!warp_live) return;

  float l[kM][2];
  rows.sums(l);
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const float inv_a = 1.0f / l[m][0], inv_b = 1.0f / l[m][1];
    const int row_a = q0 + warp_row0 + m * 16 + g, row_b = row_a + 8;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + tig * 2;
      if (row_a < q_len) {
        *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_a) * out_stride + h * D + d) =
            __floats2bfloat162_rn(rows.o[m][i][0] * inv_a, rows.o[m][i][1] * inv_a);
      }
      if (row_b < q_len) {
        *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_b) * out_stride + h * D + d) =
            __floats2bfloat162_rn(rows.o[m][i][2] * inv_b, rows.o[m][i][3] * inv_b);
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

bool launch_prefill_attention_path(PrefillAttentionPath path, const bf16* q, int q_stride, const bf16* k_cache,
                                   const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                   bf16* out, int out_stride, cudaStream_t stream) {
  if (batch.num_seqs <= 0 || batch.max_q_len <= 0) return true;
  if (path == PrefillAttentionPath::wgmma || path == PrefillAttentionPath::wgmma_cp_async ||
      path == PrefillAttentionPath::wgmma_tma) {
    const WgmmaLoads loads = path == PrefillAttentionPath::wgmma_cp_async ? WgmmaLoads::cp_async
                             : path == PrefillAttentionPath::wgmma_tma    ? WgmmaLoads::tensor_copies
                                                                          : WgmmaLoads::automatic;
    return launch_prefill_attention_wgmma(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream, loads);
  }
  // Chunks of more than 64 queries on Hopper: the warpgroup-MMA kernel (bench/NOTES.md, session 14).
  if (path == PrefillAttentionPath::automatic && batch.max_q_len > 64 && prefill_attention_wgmma_by_default() &&
      launch_prefill_attention_wgmma(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream)) {
    return true;
  }
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  const int optin = shared_memory_optin_bytes(device);
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    // Short chunks (at most 64 queries) waste less of a 64-row tile than of a 128-row one; so do GPUs
    // whose blocks cannot have the 128-row tile's shared memory (102 KB at head size 128: Ampere and
    // Ada cards other than the A100 allow 99 KB).
    if (batch.max_q_len <= Tile<D, 1>::kBq || Tile<D, 2>::kSmemBytes > optin) {
      if (Tile<D, 1>::kSmemBytes > optin) {
        throw std::invalid_argument(fmt::format(
            "prefill attention at head size {} needs {} bytes of shared memory per block; this GPU allows {}", D,
            Tile<D, 1>::kSmemBytes, optin));
      }
      launch_prefill<D, 1>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
    } else {
      launch_prefill<D, 2>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
    }
  });
  return true;
}

void launch_prefill_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                              const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                              cudaStream_t stream) {
  launch_prefill_attention_path(PrefillAttentionPath::automatic, q, q_stride, k_cache, v_cache, batch, shape, out,
                                out_stride, stream);
}

}  // namespace gpuscout::cuda::infer
