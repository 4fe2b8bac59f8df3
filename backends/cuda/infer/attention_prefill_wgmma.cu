// Prefill attention on Hopper's warpgroup MMA (wgmma, sm_90a): the same work as attention_prefill.cu's
// flash-attention-2 kernel (causal over the paged cache, online softmax in the log2 domain), with the
// two GEMMs of every key tile issued by a warpgroup instead of a warp. A block takes 128 queries of
// one head: two warpgroups of 64 rows, 256 threads. Q and the 64-key K/V tiles (double-buffered,
// cp.async by every thread) sit in shared memory in the 128-byte-swizzled layout wgmma reads: each
// head-dim half (64 BF16 = 128 bytes) of a row is one swizzle row, 16-byte chunk c of row r at
// c ^ (r % 8), eight rows a 1024-byte atom. S = Q K^T reads both from shared memory (K-major); P
// stays in registers (the S accumulators of 16 keys are exactly the A fragment of a k16 step) and
// O += P V reads V as an N-major operand, so nothing is transposed. Only head size 128 on compute
// capability 9.0 (the sm_90a code in this file runs nowhere else); launch_prefill_attention keeps
// the mma.sync kernel for everything else. Layouts and descriptor fields are PTX's ("Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate", shared memory matrix layout and descriptor).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "flash_forward.cuh"
#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"
#include "wgmma_util.cuh"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kD = 128;
constexpr int kBq = 128;  // queries per block: two warpgroups of 64 rows
constexpr int kBk = 64;   // keys per tile
constexpr int kThreads = 256;
constexpr int kChunks = kD / 8;  // 16-byte chunks per row
constexpr int kRowBytes = 128;   // one swizzle row: half of a row's head dimension
constexpr int kQHalf = kBq * kRowBytes;
constexpr int kKvHalf = kBk * kRowBytes;
constexpr int kQBytes = 2 * kQHalf;
constexpr int kKvBytes = 2 * kKvHalf;  // one K or V tile
constexpr int kStages = 2;             // K/V tiles in shared memory: the one computed and the next
// Q, K and V of each stage, and room to align the start to a 1024-byte swizzle atom.
constexpr int kSmemBytes = kQBytes + 2 * kStages * kKvBytes + 1024;

// Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a tile whose halves are half_bytes apart.
__device__ __forceinline__ std::uint32_t swizzled(int row, int chunk, int half_bytes) {
  return (chunk >> 3) * half_bytes + row * kRowBytes + (((chunk & 7) ^ (row & 7)) << 4);
}

// Two K/V stages and two blocks per SM (128 registers); a warpgroup waits for its S before the softmax
// and for its O += P V before the next tile (bench/NOTES.md, session 14: a version that overlapped the
// two, one block per SM, was slower and not correct). kTma: thread 0 brings each K/V tile as tensor
// copies of whole cache blocks (k_map, v_map: rows of the paged cache) onto an mbarrier, instead of
// every thread issuing 16-byte cp.async copies with their addresses (session 18).
template <bool kTma>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_wgmma_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                         const bf16* __restrict__ q, int q_stride, const bf16* __restrict__ k_cache,
                         const bf16* __restrict__ v_cache, AttentionBatch batch, AttentionShape shape, bf16* out,
                         int out_stride, float scale_log2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ std::uint64_t kv_full[kStages];  // kTma: tile t's K and V landed (phase t / kStages)
  unsigned char* qs = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char* ks = qs + kQBytes;             // [kStages][kKvBytes]
  unsigned char* vs = ks + kStages * kKvBytes;  // [kStages][kKvBytes]

  PrefillChunk chunk;
  if (!chunk.init(batch, shape, kBq)) return;
  const int h = blockIdx.x, q_len = chunk.q_len, q0 = chunk.q0, kv_end = chunk.kv_end;
  const std::int64_t q_row0 = chunk.q_row0;
  const int tiles = (kv_end + kBk - 1) / kBk;
  const int tid = threadIdx.x;
  const int bs = chunk.block_size;
  // kTma: tile `tile`'s cache blocks (those holding a key below kv_end), both head-dim halves of K and V.
  auto issue_kv_tma = [&](int tile) {
    const int stage = tile % kStages, key0 = tile * kBk;
    const int blocks = (min(kBk, kv_end - key0) + bs - 1) / bs;
    mbar_arrive_expect_tx(&kv_full[stage], static_cast<unsigned>(blocks * bs * kD * 2 * 2));
    for (int b = 0; b < blocks; ++b) {
      // Tensor-copy coordinates are 32-bit: 2^31 rows of 256 bytes (512 GiB) exceed any GPU's cache.
      const int row = static_cast<int>(chunk.cache_row(key0 + b * bs));
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int dst = stage * kKvBytes + half * kKvHalf + b * bs * kRowBytes;
        tma_load_2d(ks + dst, &k_map, half * (kD / 2), row, &kv_full[stage]);
        tma_load_2d(vs + dst, &v_map, half * (kD / 2), row, &kv_full[stage]);
      }
    }
  };
  if constexpr (kTma) {
    if (tid == 0) {
      for (int i = 0; i < kStages; ++i) mbar_init(&kv_full[i], 1);
      mbar_init_fence();
    }
    __syncthreads();
    if (tid == 0 && tiles > 0) issue_kv_tma(0);
  }

  // Q (rows past the chunk are zeros and never written back), then K/V of tile 0.
  for (int c = tid; c < kBq * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool ok = q0 + r < q_len;
    const bf16* src = q + (q_row0 + (ok ? q0 + r : 0)) * q_stride + h * kD + cc * 8;
    cp_async16(qs + swizzled(r, cc, kQHalf), src, ok ? 16 : 0);
  }
  auto load_kv = [&](int tile) {
    const int stage = tile % kStages;
#pragma unroll 1  // unrolled, its addresses push the tile loop past 128 registers (spills)
    for (int i = 0; i < kBk * kChunks / kThreads; ++i) {
      const int c = tid + i * kThreads;
      const int r = c / kChunks, cc = c % kChunks;
      const int key = tile * kBk + r;
      const bool ok = key < kv_end;
      const std::int64_t off = (ok ? chunk.cache_row(key) : 0) * kD + cc * 8;
      const std::uint32_t dst = stage * kKvBytes + swizzled(r, cc, kKvHalf);
      cp_async16(ks + dst, k_cache + off, ok ? 16 : 0);
      cp_async16(vs + dst, v_cache + off, ok ? 16 : 0);
    }
  };
  if constexpr (!kTma) load_kv(0);
  cp_async_commit();

  // This thread's rows of its warpgroup's 64: g and g + 8 of its warp's 16 (the accumulator layout).
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int g = lane / 4, tig = lane % 4;
  const int wg_row0 = wg * 64;
  const bool wg_live = q0 + wg_row0 < q_len;  // a warpgroup wholly past the chunk does no work
  const int wg_pos_first = chunk.pos0 + q0 + wg_row0;
  // The warpgroup's tiles: a prefix in key order from key 0 (which every row sees), up to its last row.
  const int wg_tiles = wg_live ? min(tiles, (wg_pos_first + 63) / kBk + 1) : 0;
  const int pos_a = wg_pos_first + warp * 16 + g, pos_b = pos_a + 8;

  const std::uint32_t q_addr = smem_addr(qs) + wg_row0 * kRowBytes;
  const std::uint32_t k_addr = smem_addr(ks), v_addr = smem_addr(vs);

  float o[kD / 2];  // O: rows g / g + 8, columns 8i + 2 tig (+1): o[4i + 0..1] / o[4i + 2..3]
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // raw-score maxima of rows g and g + 8
  float row_sum[2] = {0.0f, 0.0f};            // this thread's share of the rows' sums

  // S = Q K^T of `tile` into s (the accumulator layout, 8 keys a chunk; declared by the caller inside
  // the tile loop, so that it is not live across tiles): 8 k16 steps, each 32 bytes further into the
  // swizzle row and the other head-dim half after 4, issued as one group.
  auto issue_s = [&](int tile, float(&s)[kBk / 2]) {
    const std::uint32_t k_stage = k_addr + (tile % kStages) * kKvBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const std::uint32_t step = (kk & 3) * 32;
      wgmma_m64n64k16_ss(s, smem_desc(q_addr + (kk >> 2) * kQHalf + step, 16, 1024),
                         smem_desc(k_stage + (kk >> 2) * kKvHalf + step, 16, 1024), kk > 0);
    }
    wgmma_commit();
  };
  // O += P V of `tile`: V's 16 keys of step j are two 8-row groups (1024 bytes apart), its head-dim
  // halves the N-major operand's two 64-column atoms (kKvHalf apart); one group.
  auto issue_pv = [&](int tile, const std::uint32_t(&pa)[kBk / 16][4]) {
    const std::uint32_t v_stage = v_addr + (tile % kStages) * kKvBytes;
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kBk / 16; ++j) wgmma_m64n128k16_rs(o, pa[j], smem_desc(v_stage + j * 2048, kKvHalf, 1024));
    wgmma_commit();
  };
  // The online softmax of the S of `tile` (complete): the causal mask where a row's position is
  // inside the tile, the new maxima, P (BF16 A fragments: keys 16j..16j+15 are accumulator chunks 2j
  // and 2j + 1) into p, and the rows' rescale factors into alpha (row_sum already rescaled).
  auto softmax = [&](int tile, float(&s)[kBk / 2], std::uint32_t(&p)[kBk / 16][4], float(&alpha)[2]) {
    const int key0 = tile * kBk;
    if (key0 + kBk - 1 > wg_pos_first) {
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int key = key0 + i * 8 + tig * 2 + j;
          if (key > pos_a) s[4 * i + j] = -INFINITY;
          if (key > pos_b) s[4 * i + 2 + j] = -INFINITY;
        }
      }
    }
    float neg_max[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_max[r];
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      alpha[r] = flash::fast_exp2((row_max[r] - mx) * scale_log2);  // 0 on tile 0 (-inf - finite)
      row_max[r] = mx;
      neg_max[r] = -mx * scale_log2;
      row_sum[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < kBk / 8; ++i) {
      const float p0 = flash::fast_exp2(fmaf(s[4 * i], scale_log2, neg_max[0]));
      const float p1 = flash::fast_exp2(fmaf(s[4 * i + 1], scale_log2, neg_max[0]));
      const float p2 = flash::fast_exp2(fmaf(s[4 * i + 2], scale_log2, neg_max[1]));
      const float p3 = flash::fast_exp2(fmaf(s[4 * i + 3], scale_log2, neg_max[1]));
      row_sum[0] += p0 + p1;
      row_sum[1] += p2 + p3;
      p[i / 2][(i % 2) * 2] = pack_bf16(p0, p1);
      p[i / 2][(i % 2) * 2 + 1] = pack_bf16(p2, p3);
    }
  };
  auto rescale_o = [&](const float(&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] < 1.0f || alpha[1] < 1.0f)) {
#pragma unroll
      for (int i = 0; i < kD / 8; ++i) {
        o[4 * i] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
      }
    }
  };

  for (int tile = 0; tile < tiles; ++tile) {
    if constexpr (kTma) {
      const int stage = tile % kStages;
      if (tile == 0) cp_async_wait<0>();  // Q
      mbar_wait_parity(&kv_full[stage], (tile / kStages) & 1);
      // Keys from kv_end on are masked (P = 0), but a V row no step ever wrote may hold NaN and
      // 0 x NaN is NaN: the last tile's V rows from kv_end on (copied whole blocks, or stale) are zeroed.
      const int live = kv_end - tile * kBk;
      for (int c = tid; live < kBk && c < (kBk - live) * kChunks; c += kThreads) {
        *reinterpret_cast<uint4*>(vs + stage * kKvBytes + swizzled(live + c / kChunks, c % kChunks, kKvHalf)) =
            make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();
      __syncthreads();  // every warpgroup is done with tile - 1: its stage takes tile + 1
      if (tid == 0 && tile + 1 < tiles) issue_kv_tma(tile + 1);
    } else {
      cp_async_wait<0>();
      fence_proxy_async();
      // Tile `tile` (and Q) is in shared memory for every warpgroup, and every warpgroup is done with
      // tile - 1, whose stage now takes tile + 1 while this one is computed.
      __syncthreads();
      if (tile + 1 < tiles) load_kv(tile + 1);
      cp_async_commit();
    }
    if (tile < wg_tiles) {
      float s[kBk / 2], alpha[2];
      std::uint32_t pa[kBk / 16][4];  // P of the tile (BF16 A fragments)
      issue_s(tile, s);
      wgmma_wait<0>();
      fence_registers(s);
      softmax(tile, s, pa, alpha);
      rescale_o(alpha);
      fence_registers(o);
      issue_pv(tile, pa);
      wgmma_wait<0>();
      fence_registers(o);
      fence_registers(pa);
    }
  }
  if (!wg_live) return;

  float l[2] = {row_sum[0], row_sum[1]};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv_a = 1.0f / l[0], inv_b = 1.0f / l[1];
  const int row_a = q0 + wg_row0 + warp * 16 + g, row_b = row_a + 8;
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) {
    const int d = i * 8 + tig * 2;
    if (row_a < q_len) {
      *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_a) * out_stride + h * kD + d) =
          __floats2bfloat162_rn(o[4 * i] * inv_a, o[4 * i + 1] * inv_a);
    }
    if (row_b < q_len) {
      *reinterpret_cast<__nv_bfloat162*>(out + (q_row0 + row_b) * out_stride + h * kD + d) =
          __floats2bfloat162_rn(o[4 * i + 2] * inv_b, o[4 * i + 3] * inv_b);
    }
  }
#else
  __trap();  // built for sm_90a only; the host side launches it nowhere else
#endif
}

}  // namespace

bool prefill_attention_wgmma_supported(int head_dim, int cc_major, int cc_minor) {
  return head_dim == kD && cc_major == 9 && cc_minor == 0;
}

bool prefill_attention_wgmma_supported(int head_dim) {
  if (head_dim != kD) return false;
  int device = 0, major = 0, minor = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return prefill_attention_wgmma_supported(head_dim, major, minor) && prefill_attention_wgmma_fits(device);
}

bool prefill_attention_wgmma_fits(int device) {
  return kSmemBytes <= shared_memory_optin_bytes(device);
}

bool prefill_attention_wgmma_by_default() {
  static const bool on = env_switch_on("GPUSCOUT_PREFILL_WGMMA");
  return on;
}

namespace {

// Cache blocks the tensor copies take whole: a power of two of at least one swizzle atom (8 rows) that
// divides the 64-key tile, so each block lands 1024-byte aligned.
bool tma_block_size(int block_size) {
  return block_size == 8 || block_size == 16 || block_size == 32 || block_size == 64;
}

// A tensor map over a paged cache seen as rows of kD BF16 values (256 bytes), boxes of one cache block
// by a head-dim half (64 values: one 128-byte swizzle row). Its row count is the largest an int
// coordinate reaches: copies read only the blocks the kernel names.
CUtensorMap cache_tensor_map(const bf16* cache, int block_size) {
  return bf16_tensor_map(cache, kD, 0x7fffffffull, kD / 2, static_cast<std::uint32_t>(block_size), "the KV cache");
}

template <bool kTma>
void launch(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, const AttentionBatch& batch,
            const AttentionShape& shape, bf16* out, int out_stride, cudaStream_t stream) {
  // Set at every launch: the opt-in belongs to the current device's context (see attention_prefill.cu).
  GPUSCOUT_CUDA_CHECK(
      cudaFuncSetAttribute(prefill_wgmma_kernel<kTma>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  CUtensorMap k_map{}, v_map{};
  if constexpr (kTma) {
    k_map = cache_tensor_map(k_cache, shape.block_size);
    v_map = cache_tensor_map(v_cache, shape.block_size);
  }
  const dim3 grid(shape.heads, (batch.max_q_len + kBq - 1) / kBq, batch.num_seqs);
  prefill_wgmma_kernel<kTma><<<grid, kThreads, kSmemBytes, stream>>>(k_map, v_map, q, q_stride, k_cache, v_cache, batch,
                                                                     shape, out, out_stride,
                                                                     flash::kLog2e / sqrtf(static_cast<float>(kD)));
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool prefill_attention_tma_by_default() {
  static const bool on = env_switch_on("GPUSCOUT_PREFILL_TMA");
  return on;
}

bool launch_prefill_attention_wgmma(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                    const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                                    cudaStream_t stream, WgmmaLoads loads) {
  if (!prefill_attention_wgmma_supported(shape.head_dim)) return false;
  if (loads == WgmmaLoads::tensor_copies && !tma_block_size(shape.block_size)) return false;
  if (batch.num_seqs <= 0 || batch.max_q_len <= 0) return true;
  const bool tma =
      loads == WgmmaLoads::tensor_copies ||
      (loads == WgmmaLoads::automatic && tma_block_size(shape.block_size) && prefill_attention_tma_by_default());
  if (tma) {
    launch<true>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
  } else {
    launch<false>(q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream);
  }
  return true;
}

}  // namespace gpuscout::cuda::infer
