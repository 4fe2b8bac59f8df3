// Decode attention (one query per sequence) over the paged KV cache: two kernels, chosen by the
// number of (sequence, KV head) pairs, which the host knows (graph capture keeps the choice).
//
// streaming (>= kStreamMinPairs pairs): the pairs cut into tiles of 64 tokens, and every block of a
// fixed grid (the SMs times the blocks resident per SM) takes an equal contiguous run of tiles
// whatever the contexts, so the grid does not grow with max_context. A block streams its tiles
// through a kStages-deep cp.async pipeline into shared memory (16-byte chunks XOR-swizzled by row,
// so ldmatrix is conflict-free); each of its 4 warps takes 16 tokens of a tile: S = Q K^T on tensor
// cores with the GQA group's query heads as the rows of an m16n8k16 A operand (rows past the group
// are zero), online softmax in FP32 registers, O += P V with P straight from the S accumulators (as
// in attention_prefill.cu). The warps are combined once per pair segment; a pair spread over
// several blocks is merged by the block that finishes last (a counter per pair in the workspace,
// reset by that block), so there is no second kernel. A first version on CUDA cores (per-row dot
// products, shuffles and a per-thread online softmax) was instruction-bound at ~2.4 TB/s.
//
// split (fewer pairs: batch 1): flash-decoding, block per (split, KV head, sequence) over a grid
// sized from max_context, the split's exact softmax with the scores in shared memory, then a merge
// kernel. Measured on the H200 (bench/NOTES.md), it stays ahead at batch 1 (Llama-3.1-8B: 8 pairs;
// kernel 9.3 against 12.0 us at 512 tokens, 20 against 38 us at 8k): the streaming kernel's merge
// of many parts is a chain of dependent loads, while at batch 8 (64 pairs) and 32 the streaming
// kernel is faster (engine step -0.2 and -0.55 ms, 4.0 against 3.3 TB/s at batch 32 and 8k).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kMaxGroup = 8;  // query heads per KV head (Llama 3 70B: 8)
constexpr float kLog2e = 1.4426950408889634f;
// The streaming kernel's merge counters, one per (sequence, KV head), open the workspace; they are
// zero before the first launch and every launch leaves them zero.
constexpr int kMaxPairs = 16384;
// Pairs from which the streaming kernel is used: measured faster at 64 (batch 8 x 8 KV heads) and
// above, slower at 8 (batch 1); the counts in between were not measured and keep the split kernel.
constexpr int kStreamMinPairs = 64;

__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// The current device and its SM count (the streaming grid is sized in SMs).
struct CurrentDevice {
  int device = 0, sms = 0;
};
CurrentDevice current_device() {
  CurrentDevice d;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&d.device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, d.device));
  return d;
}

// The tensor-core work of the streaming and pair kernels for one warp's 16 tokens of a K/V tile in
// shared memory. Layout::offset(row, chunk) is where 16-byte chunk `chunk` of tile row `row` lies;
// the warp's tokens are the tile rows row0 .. row0 + 15. The GQA group's query heads are the A
// fragment rows g = lane / 4 (rows g + 8 are zero); tig = lane % 4 picks the column pairs.

// S (query heads x the warp's 16 tokens) = Q K^T.
template <int D, typename Layout>
__device__ __forceinline__ void tile_scores(const std::uint32_t (&qa)[D / 16][2], const bf16* kt, int row0, int lane,
                                            float (&s)[2][4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    std::uint32_t b[4];
    ldmatrix_x4(b, kt + Layout::offset(row0 + lane % 8 + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
    const std::uint32_t a[4] = {qa[kk][0], 0u, qa[kk][1], 0u};
    mma_bf16(s[0], a, b[0], b[1]);
    mma_bf16(s[1], a, b[2], b[3]);
  }
}

// Online softmax of row g over the 16 scores (log2 domain; tokens from ctx on count as -inf), the
// lane's first token being token0: s becomes P, m and l move on, and the factor the O accumulators
// must be scaled by is returned.
__device__ __forceinline__ float tile_softmax(float (&s)[2][4], int token0, int ctx, float scale_log2, float& m,
                                              float& l) {
  float mx = m;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[n][j] = token0 + n * 8 + j < ctx ? s[n][j] * scale_log2 : -INFINITY;
      mx = fmaxf(mx, s[n][j]);
    }
#pragma unroll
  for (int x = 1; x < 4; x *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
  const float base = mx == -INFINITY ? 0.0f : mx;  // no token yet: everything stays 0
  const float alpha = exp2f(m - base);
  m = mx;
  float sum = 0.0f;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      s[n][j] = exp2f(s[n][j] - base);
      sum += s[n][j];
    }
  l = fmaf(l, alpha, sum);
  return alpha;
}

// The B fragments of V for output columns 16 db .. 16 db + 15 (two n-tiles of 8).
template <typename Layout>
__device__ __forceinline__ void tile_values(std::uint32_t (&b)[4], const bf16* vt, int row0, int lane, int db) {
  ldmatrix_x4_trans(b, vt + Layout::offset(row0 + lane % 8 + ((lane / 8) % 2) * 8, db * 2 + lane / 16));
}

// The block's warps combined: each warp's O rows g (o[i][0..1], columns 8i + 2 tig) scaled to the
// block's maximum into partial[warp][g][D] (shared, kWarps x kMaxGroup x D floats) and their sums
// into warp_sum[warp][g]; warp_max[w][g] holds each warp's maximum. Every thread of the block calls
// it; it ends with a barrier, after which both arrays may be read.
template <int D, int kWarps, int N>
__device__ __forceinline__ void combine_warps(const float (&o)[D / 8][N], float m, float l, float* partial,
                                              float (&warp_max)[kWarps][kMaxGroup],
                                              float (&warp_sum)[kWarps][kMaxGroup]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tig = lane % 4;
#pragma unroll
  for (int x = 1; x < 4; x *= 2) l += __shfl_xor_sync(0xffffffffu, l, x);
  if (tig == 0) warp_max[warp][g] = m;
  __syncthreads();
  float block_max = warp_max[0][g];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) block_max = fmaxf(block_max, warp_max[w][g]);
  const float f = m == -INFINITY ? 0.0f : exp2f(m - block_max);  // a warp without tokens adds nothing
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    *reinterpret_cast<float2*>(partial + (warp * kMaxGroup + g) * D + i * 8 + tig * 2) =
        make_float2(o[i][0] * f, o[i][1] * f);
  }
  if (tig == 0) warp_sum[warp][g] = l * f;
  __syncthreads();
}

// Element e (query head e / D of the group, column e % D) after combine_warps: the warps' O sum (x)
// and their weight sum (y), so that x / y is the attention output.
template <int D, int kWarps>
__device__ __forceinline__ float2 combined_element(const float* partial, const float (&warp_sum)[kWarps][kMaxGroup],
                                                   int e) {
  const int h = e / D;
  float acc = 0.0f, total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    acc += partial[(w * kMaxGroup + h) * D + e - h * D];
    total += warp_sum[w][h];
  }
  return make_float2(acc, total);
}

namespace streaming {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = kWarps * 16;  // tokens per tile: 16 per warp
// Tiles in flight per block: the one being computed and kStages - 1 ahead. Little's law on the
// H200: ~4 TB/s x ~1 us = 4 MB in flight, 30 KB per SM; 2 resident blocks x 2 tiles ahead x 32 KB
// of K+V (D 128) give 128 KB.
constexpr int kStages = 3;
constexpr int kMaxGridBlocks = 1024;  // workspace bound (132 SMs x 2 resident blocks = 264)
constexpr std::uint32_t kNoRow = 0xffffffffu;

template <int D>
struct Tile {
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  // D 64/128: rows of 8+ chunks, chunk c of row r stored at c ^ (r % 8); D 32: rows padded to 40.
  static constexpr int kLd = D == 32 ? D + 8 : D;
  static constexpr int kElems = kTileRows * kLd;  // one K (or V) tile
  __device__ static int offset(int row, int chunk) {
    if constexpr (D == 32) {
      return row * kLd + chunk * 8;
    } else {
      return row * kLd + ((chunk ^ (row & 7)) * 8);
    }
  }
};

template <int D>
constexpr std::size_t dynamic_smem_bytes(int num_seqs) {
  return (2ull * kStages * Tile<D>::kElems + kStages * kMaxGroup * D) * 2 +
         (kStages + 1) * kTileRows * sizeof(std::uint32_t) + (static_cast<std::size_t>(num_seqs) + 1) * sizeof(int);
}

// Workspace: counters[kMaxPairs] (zero before the first launch; every launch leaves them zero),
// then per partial slot and query head the (max, sum) and the D accumulators. Slot of the part of
// pair p that block b computed: b + p, unique because a block's pairs follow the previous block's.
struct Workspace {
  int* counters;
  float* max_sum;  // [slots, G, 2]
  float* acc;      // [slots, G, D]
};

Workspace workspace_layout(void* base, int pairs, int group) {
  auto* counters = static_cast<int*>(base);
  float* max_sum = reinterpret_cast<float*>(counters + kMaxPairs);
  const std::size_t slots = static_cast<std::size_t>(kMaxGridBlocks) + pairs;
  return Workspace{counters, max_sum, max_sum + slots * group * 2};
}

// Position in the block's run of tiles: global tile x is tile j of the `tiles` tiles of
// (seq, kvh). Every thread of a block holds the same values.
struct TileCursor {
  int x, seq, kvh, j, tiles, ctx;
  __device__ void advance(const int* prefix, const AttentionBatch& batch, int kv_heads) {
    ++x;
    if (++j < tiles) return;
    j = 0;
    if (++kvh < kv_heads) return;
    kvh = 0;
    do {
      ++seq;
    } while (seq < batch.num_seqs && prefix[seq + 1] == prefix[seq]);
    if (seq < batch.num_seqs) {
      tiles = prefix[seq + 1] - prefix[seq];
      ctx = batch.context_len[seq];
    }
  }
};

template <int D>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, AttentionBatch batch,
                            AttentionShape shape, Workspace ws, bf16* out, int out_stride, float scale_log2) {
  using T = Tile<D>;
  extern __shared__ uint4 dynamic_smem[];
  bf16* ks = reinterpret_cast<bf16*>(dynamic_smem);                             // [kStages][kElems]
  bf16* vs = ks + kStages * T::kElems;                                          // [kStages][kElems]
  bf16* qs = vs + kStages * T::kElems;                                          // [kStages][kMaxGroup][D]
  auto* ring = reinterpret_cast<std::uint32_t*>(qs + kStages * kMaxGroup * D);  // [kStages + 1][kTileRows]
  int* prefix = reinterpret_cast<int*>(ring + (kStages + 1) * kTileRows);       // [num_seqs + 1]
  __shared__ float warp_max[kWarps][kMaxGroup], warp_sum[kWarps][kMaxGroup];
  __shared__ int scan[kWarps];
  __shared__ int merging;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, tig = lane % 4;  // accumulator row (query head of the group), column pair
  const int num_seqs = batch.num_seqs, kv_heads = shape.kv_heads;
  const int group = shape.heads / kv_heads;

  // Tiles of each sequence (0 for padding) and their exclusive prefix sum. The step's metadata was
  // copied before its first kernel: all of this, and the block-table reads, precede pdl_wait.
  auto seq_tiles = [&](int s) {
    const int ctx = batch.context_len[s];
    return batch.q_len[s] > 0 && ctx > 0 ? ceil_div(ctx, kTileRows) : 0;
  };
  const int per_thread = ceil_div(num_seqs, kThreads);
  int local = 0;
  for (int i = 0; i < per_thread; ++i) {
    const int s = tid * per_thread + i;
    if (s < num_seqs) local += seq_tiles(s);
  }
  int inclusive = local;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += v;
  }
  if (lane == 31) scan[warp] = inclusive;
  __syncthreads();
  int running = inclusive - local;
  for (int w = 0; w < warp; ++w) running += scan[w];
  for (int i = 0; i < per_thread; ++i) {
    const int s = tid * per_thread + i;
    if (s < num_seqs) {
      prefix[s] = running;
      running += seq_tiles(s);
    }
  }
  if (tid == kThreads - 1) prefix[num_seqs] = running;
  __syncthreads();

  const int total_tiles = prefix[num_seqs] * kv_heads;
  const int chunk = ceil_div(total_tiles, static_cast<int>(gridDim.x));
  const int x0 = static_cast<int>(blockIdx.x) * chunk, x1 = min(x0 + chunk, total_tiles);

  TileCursor lookup{};
  if (x0 < x1) {
    // The sequence holding tile x0: the first s with prefix[s + 1] > x0 / kv_heads.
    const int key = x0 / kv_heads;
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (prefix[mid + 1] > key) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    lookup.x = x0;
    lookup.seq = lo;
    lookup.tiles = prefix[lo + 1] - prefix[lo];
    lookup.ctx = batch.context_len[lo];
    const int offset = x0 - prefix[lo] * kv_heads;
    lookup.kvh = offset / lookup.tiles;
    lookup.j = offset % lookup.tiles;
  }
  const TileCursor start = lookup;
  // Cache rows (block * kv_heads + kvh) * block_size + offset of the tile at `lookup`, one per
  // thread of the first 64, into ring slot x % (kStages + 1); then the cursor moves on.
  auto lookup_tile = [&] {
    if (lookup.x < x1) {
      if (tid < kTileRows) {
        const int token = lookup.j * kTileRows + tid;
        std::uint32_t row = kNoRow;
        if (token < lookup.ctx) {
          const std::int32_t* table =
              batch.block_tables + static_cast<std::int64_t>(lookup.seq) * batch.max_blocks_per_seq;
          row =
              (static_cast<std::uint32_t>(table[token / shape.block_size]) * kv_heads + lookup.kvh) * shape.block_size +
              token % shape.block_size;
        }
        ring[(lookup.x % (kStages + 1)) * kTileRows + tid] = row;
      }
      lookup.advance(prefix, batch, kv_heads);
    }
  };
  for (int s = 0; s < kStages; ++s) lookup_tile();
  __syncthreads();  // the ring's first slots

  // Rows of tile `at` into `stage`: all of them, or (newest = -1) all but the newest token's, or
  // (newest = 1) only that one. The newest token (position ctx - 1) has its K/V stored by the
  // kernel before this one, every other row by earlier steps.
  auto issue_rows = [&](const TileCursor& at, int stage, int newest) {
    const std::uint32_t* rows = ring + (at.x % (kStages + 1)) * kTileRows;
    const int newest_row = at.ctx - 1 - at.j * kTileRows;  // in this tile if below kTileRows
#pragma unroll
    for (int c = tid; c < kTileRows * T::kChunks; c += kThreads) {
      const int r = c / T::kChunks, cc = c % T::kChunks;
      if (newest != 0 && (r == newest_row) != (newest > 0)) continue;
      const std::uint32_t row = rows[r];
      const bool valid = row != kNoRow;
      const std::int64_t src = valid ? static_cast<std::int64_t>(row) * D + cc * 8 : 0;
      const int dst = stage * T::kElems + T::offset(r, cc);
      cp_async16(ks + dst, k_cache + src, valid ? 16 : 0);
      cp_async16(vs + dst, v_cache + src, valid ? 16 : 0);
    }
  };
  auto issue_queries = [&](const TileCursor& at, int stage) {
    if ((at.j == 0 || at.x == x0) && tid < group * T::kChunks) {  // a segment's queries
      const int h = tid / T::kChunks, cc = tid % T::kChunks;
      const bf16* src =
          q + static_cast<std::int64_t>(batch.q_start[at.seq]) * q_stride + (at.kvh * group + h) * D + cc * 8;
      cp_async16(qs + (stage * kMaxGroup + h) * D + cc * 8, src, 16);
    }
  };
  // The first kStages - 1 tiles but their newest rows are requested before pdl_wait, so that their
  // latency overlaps the end of the kernel before.
  TileCursor issue = start;
  for (int s = 0; s < kStages - 1 && x0 < x1 && issue.x < x1; ++s) {
    issue_rows(issue, s, -1);
    issue.advance(prefix, batch, kv_heads);
  }

  // Q and the newest K/V come from the kernel before this one; `out` is read by earlier ones.
  pdl_wait();
  pdl_trigger();
  // Padding rows (a query, no context) get deterministic zeros: sequence s from block s % grid.
  for (int s = blockIdx.x; s < num_seqs; s += gridDim.x) {
    if (batch.q_len[s] > 0 && batch.context_len[s] <= 0) {
      bf16* dst = out + static_cast<std::int64_t>(batch.q_start[s]) * out_stride;
      for (int e = tid; e < shape.heads * D; e += kThreads) dst[e] = __float2bfloat16_rn(0.0f);
    }
  }
  if (x0 >= x1) return;
  {
    TileCursor at = start;
    for (int s = 0; s < kStages - 1 && at.x < x1; ++s) {
      issue_rows(at, s, 1);
      issue_queries(at, s);
      at.advance(prefix, batch, kv_heads);
    }
  }
  // The first tiles are one commit group, followed by empty ones: the loop below counts kStages - 1
  // groups ahead of tile 0, and each tile's group is at or before its own position in that count.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) cp_async_commit();

  auto issue_tile = [&](int stage) {
    if (issue.x < x1) {
      issue_rows(issue, stage, 0);
      issue_queries(issue, stage);
      issue.advance(prefix, batch, kv_heads);
    }
    cp_async_commit();  // one group per call, empty or not: wait_group counts stay uniform
  };

  std::uint32_t qa[D / 16][2];  // A fragments of Q: rows g (the 8 rows g + 8 are zero)
  float o[D / 8][4];            // O accumulators: rows g (and unused g + 8), columns 8i + 2 tig
  float m = -INFINITY, l = 0.0f;
  TileCursor cur = start;
  for (int it = 0; cur.x < x1; ++it) {
    const int stage = it % kStages;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile `it` has landed for every thread; tile it - 1 is no longer read
    if (cur.j == 0 || cur.x == x0) {
      const bf16* qrow = qs + (stage * kMaxGroup + g) * D;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        qa[kk][0] = g < group ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + tig * 2) : 0u;
        qa[kk][1] = g < group ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + 8 + tig * 2) : 0u;
      }
#pragma unroll
      for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
      m = -INFINITY;
      l = 0.0f;
    }
    lookup_tile();  // tile it + kStages, into the slot tile it - 1 used
    issue_tile((it + kStages - 1) % kStages);

    // S (query heads x this warp's 16 tokens) = Q K^T, then the online softmax of row g.
    const bf16* kt = ks + stage * T::kElems;
    const bf16* vt = vs + stage * T::kElems;
    float s[2][4];
    tile_scores<D, T>(qa, kt, warp * 16, lane, s);
    const float alpha = tile_softmax(s, cur.j * kTileRows + warp * 16 + tig * 2, cur.ctx, scale_log2, m, l);
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha;
      o[i][1] *= alpha;
    }
    // O += P V: the S accumulators are the A fragment of P (rows g + 8 zero).
    const std::uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), 0u, pack_bf16(s[1][0], s[1][1]), 0u};
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      std::uint32_t b[4];
      tile_values<T>(b, vt, warp * 16, lane, db);
      mma_bf16(o[2 * db], pa, b[0], b[1]);
      mma_bf16(o[2 * db + 1], pa, b[2], b[3]);
    }

    if (cur.j == cur.tiles - 1 || cur.x == x1 - 1) {
      // Segment end: the warps' rows combined through shared memory; the K stage of this tile is
      // free until the next iteration's barrier and holds the per-warp accumulators.
      auto* partial = reinterpret_cast<float*>(ks + stage * T::kElems);  // [kWarps][kMaxGroup][D]
      combine_warps<D>(o, m, l, partial, warp_max, warp_sum);
      const int pair = cur.seq * kv_heads + cur.kvh;
      const int pair_first = prefix[cur.seq] * kv_heads + cur.kvh * cur.tiles;
      const int first_block = pair_first / chunk, last_block = (pair_first + cur.tiles - 1) / chunk;
      bf16* dst = out + static_cast<std::int64_t>(batch.q_start[cur.seq]) * out_stride + cur.kvh * group * D;
      const std::int64_t slot = static_cast<std::int64_t>(blockIdx.x) + pair;
      for (int e = tid; e < group * D; e += kThreads) {
        const int h = e / D;
        const float2 sums = combined_element<D>(partial, warp_sum, e);
        const float total = sums.y;
        if (first_block == last_block) {  // the whole pair was this block's
          dst[e] = __float2bfloat16_rn(sums.x / total);
        } else {
          ws.acc[slot * group * D + e] = sums.x;
          if (e - h * D == 0) {
            float mh = warp_max[0][h];
#pragma unroll
            for (int w = 1; w < kWarps; ++w) mh = fmaxf(mh, warp_max[w][h]);
            ws.max_sum[(slot * group + h) * 2] = mh;
            ws.max_sum[(slot * group + h) * 2 + 1] = total;
          }
        }
      }
      if (first_block != last_block) {
        __threadfence();  // the partial is visible before the counter says so
        __syncthreads();
        if (tid == 0) {
          const int parts = last_block - first_block + 1;
          merging = atomicAdd(&ws.counters[pair], 1) == parts - 1;
          if (merging) ws.counters[pair] = 0;  // the last one: every other part has been counted
        }
        __syncthreads();
        if (merging) {
          __threadfence();
          // Part b of the pair is slot first_block + b + pair. First each head's max and weighted
          // sum over the parts (a warp per head, lanes over the parts), into the V stage (free until
          // the next iteration's barrier); then every element of the thread with all of a part's
          // loads issued together. Merging element by element, with the max and the sums reloaded
          // for each, made the merge a chain of 2 x group x parts dependent L2 round trips.
          const int parts = last_block - first_block + 1;
          const std::int64_t slot0 = static_cast<std::int64_t>(first_block) + pair;
          float* head_max = reinterpret_cast<float*>(vs + stage * T::kElems);  // [kMaxGroup]
          float* head_total = head_max + kMaxGroup;                            // [kMaxGroup]
          for (int h = warp; h < group; h += kWarps) {
            float mx = -INFINITY;
            for (int b = lane; b < parts; b += 32) mx = fmaxf(mx, __ldcg(&ws.max_sum[((slot0 + b) * group + h) * 2]));
#pragma unroll
            for (int x = 16; x > 0; x /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
            float total = 0.0f;
            for (int b = lane; b < parts; b += 32) {
              const float* ms = &ws.max_sum[((slot0 + b) * group + h) * 2];
              total = fmaf(exp2f(__ldcg(ms) - mx), __ldcg(ms + 1), total);
            }
#pragma unroll
            for (int x = 16; x > 0; x /= 2) total += __shfl_xor_sync(0xffffffffu, total, x);
            if (lane == 0) head_max[h] = mx, head_total[h] = total;
          }
          __syncthreads();
          constexpr int kPerThread = (kMaxGroup * D + kThreads - 1) / kThreads;
          float acc[kPerThread];
#pragma unroll
          for (int i = 0; i < kPerThread; ++i) acc[i] = 0.0f;
          for (int b = 0; b < parts; ++b) {
            const std::int64_t part = slot0 + b;
#pragma unroll
            for (int i = 0; i < kPerThread; ++i) {
              const int e = tid + i * kThreads;
              if (e < group * D) {
                const int h = e / D;
                const float w = exp2f(__ldcg(&ws.max_sum[(part * group + h) * 2]) - head_max[h]);
                acc[i] = fmaf(w, __ldcg(&ws.acc[part * group * D + e]), acc[i]);
              }
            }
          }
#pragma unroll
          for (int i = 0; i < kPerThread; ++i) {
            const int e = tid + i * kThreads;
            if (e < group * D) dst[e] = __float2bfloat16_rn(acc[i] / head_total[e / D]);
          }
        }
      }
      // warp_max/warp_sum and the stage are rewritten only after the next iteration's barrier.
    }
    cur.advance(prefix, batch, kv_heads);
  }
}

// The dynamic shared memory a block of the kernel may have on the device: the device's opt-in
// limit less the kernel's static shared memory (looked up once per device: every launch asks).
template <int D>
std::size_t dynamic_smem_limit(int device) {
  static std::array<std::atomic<long long>, 64> known{};  // the bytes + 1; 0: not yet looked up
  if (device >= 0 && device < static_cast<int>(known.size()) && known[device].load() > 0) {
    return static_cast<std::size_t>(known[device].load() - 1);
  }
  cudaFuncAttributes attributes{};
  GPUSCOUT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, decode_attention_kernel<D>));
  const long long bytes = std::max(0LL, static_cast<long long>(shared_memory_optin_bytes(device)) -
                                            static_cast<long long>(attributes.sharedSizeBytes));
  if (device >= 0 && device < static_cast<int>(known.size())) known[device].store(bytes + 1);
  return static_cast<std::size_t>(bytes);
}

// Whether a launch for num_seqs sequences fits one block's shared memory on the device (K/V stages of
// ~98 KB at head size 128 plus 4 bytes per sequence: an H200 or A100 yes, a 99 KB Ampere/Ada card no).
template <int D>
bool streaming_fits(int device, int num_seqs) {
  return dynamic_smem_bytes<D>(num_seqs) <= dynamic_smem_limit<D>(device);
}

// Blocks resident per SM (registers and shared memory decide), once per process; the dynamic
// shared memory limit is raised once per device, to what kMaxPairs sequences need or what the
// device allows (launches that need more take the split kernel or are refused).
template <int D>
int resident_blocks_per_sm(int device) {
  static std::array<std::atomic<bool>, 64> configured{};
  auto* kernel = decode_attention_kernel<D>;
  if (device < 0 || device >= static_cast<int>(configured.size()) || !configured[device].load()) {
    const std::size_t bytes = std::min(dynamic_smem_bytes<D>(kMaxPairs), dynamic_smem_limit<D>(device));
    GPUSCOUT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    if (device >= 0 && device < static_cast<int>(configured.size())) configured[device].store(true);
  }
  static const int blocks = [kernel] {
    int n = 0;
    GPUSCOUT_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, dynamic_smem_bytes<D>(256)));
    return std::max(n, 1);
  }();
  return blocks;
}

}  // namespace streaming

// pairs: one block per (sequence, KV head) pair, its tokens cut into 16-token tiles shared out in
// four contiguous runs, one per warp. Each warp streams its run through a ring of its own in shared
// memory (cp.async, the streaming kernel's swizzled 16-row layout), so the loop has no block
// barrier, and the four warps are combined once, in shared memory: no partials in global memory,
// no merge counters, no fences. Nsight Compute on the streaming kernel (bench/NOTES.md, session 30)
// put ~40% of its warps' time in the per-block work that does not stream K/V (prologue, segment
// ends, merges of pairs split across blocks) and ~25% at the barrier and cp.async wait that open
// each tile. This kernel suits batches with at least about as many pairs as the GPU holds blocks
// (batch 32 x 8 KV heads); the engine's start-up timing decides where it runs.
namespace pairs {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;  // tokens per warp tile: the n of two m16n8k16 products

// One K (or V) tile of one warp: 16 rows of D, 16-byte chunk c of row r at c ^ (r % 8).
template <int D>
struct WarpTile {
  static_assert(D == 64 || D == 128, "the XOR swizzle needs at least 8 chunks per row");
  static constexpr int kChunks = D / 8;
  static constexpr int kElems = kTileRows * D;
  __device__ static int offset(int row, int chunk) { return row * D + ((chunk ^ (row & 7)) * 8); }
};

template <int D, int kStages>
constexpr std::size_t dynamic_smem_bytes() {
  return static_cast<std::size_t>(kWarps) * kStages * 2 * WarpTile<D>::kElems * sizeof(bf16);
}

template <int D, int kStages>
__global__ void __launch_bounds__(kThreads)
    decode_pair_kernel(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, AttentionBatch batch,
                       AttentionShape shape, bf16* out, int out_stride, float scale_log2) {
  using T = WarpTile<D>;
  extern __shared__ uint4 dynamic_smem[];
  __shared__ float warp_max[kWarps][kMaxGroup], warp_sum[kWarps][kMaxGroup];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, tig = lane % 4;
  const int kv_heads = shape.kv_heads, group = shape.heads / kv_heads, bs = shape.block_size;
  const int seq = static_cast<int>(blockIdx.x) / kv_heads, kvh = static_cast<int>(blockIdx.x) % kv_heads;
  // The step's metadata was copied before its first kernel: it and the block table precede pdl_wait.
  const int ctx = batch.q_len[seq] > 0 ? batch.context_len[seq] : -1;
  if (ctx < 0) {  // no query row: nothing to write (every block waits, kernel_util.cuh)
    pdl_wait();
    pdl_trigger();
    return;
  }
  bf16* dst = out + static_cast<std::int64_t>(batch.q_start[seq]) * out_stride + kvh * group * D;
  const int tiles = ceil_div(ctx, kTileRows);
  const int t0 = tiles * warp / kWarps, t1 = tiles * (warp + 1) / kWarps;  // this warp's run

  bf16* ks = reinterpret_cast<bf16*>(dynamic_smem) + warp * kStages * 2 * T::kElems;  // [kStages][K, V]
  // The block table in windows of 32 entries, lane j holding entry base + j: the current window and
  // the next one, loaded a window ahead of the copies that use them.
  const std::int32_t* table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
  auto window = [&](int base) {
    const int i = base + lane;
    return i < batch.max_blocks_per_seq ? table[i] : 0;
  };
  int base = (t0 * kTileRows / bs) & ~31;
  std::int32_t cur = window(base), next = window(base + 32);
  // Lane l copies chunk l % kChunks of rows l / kChunks + i * kRowsPerCopy of the tile's K and V:
  // each copy instruction of the warp reads whole rows (512 contiguous bytes at head size 128).
  constexpr int kRowsPerCopy = 32 / T::kChunks;
  const int chunk = lane % T::kChunks, row0 = lane / T::kChunks;
  // Block sizes that are multiples of the tile (the engine's 16): a tile's rows are consecutive rows
  // of one cache block, so one lookup serves them all.
  const bool one_block = bs % kTileRows == 0;
  auto issue = [&](int t, int stage) {
    if (t < t1) {
      if (t * kTileRows / bs >= base + 32) {  // warp-uniform: every lane moves the windows together
        base += 32;
        cur = next;
        next = window(base + 32);
      }
      // The cache row of `token` (< 64 blocks past base: the tile starts below base + 32).
      auto cache_row = [&](int token) {
        const int block = token / bs - base;
        const std::int32_t lo = __shfl_sync(0xffffffffu, cur, block & 31);
        const std::int32_t hi = __shfl_sync(0xffffffffu, next, block & 31);
        return (static_cast<std::int64_t>(block < 32 ? lo : hi) * kv_heads + kvh) * bs + token % bs;
      };
      const std::int64_t tile_row = one_block ? cache_row(t * kTileRows) : 0;
      bf16* kd = ks + stage * 2 * T::kElems;
#pragma unroll
      for (int i = 0; i < kTileRows / kRowsPerCopy; ++i) {
        const int r = row0 + i * kRowsPerCopy, token = t * kTileRows + r;
        const bool valid = token < ctx;
        const std::int64_t row = one_block ? tile_row + r : cache_row(min(token, ctx - 1));
        const std::int64_t src = valid ? row * D + chunk * 8 : 0;
        const int o = T::offset(r, chunk);
        cp_async16(kd + o, k_cache + src, valid ? 16 : 0);
        cp_async16(kd + T::kElems + o, v_cache + src, valid ? 16 : 0);
      }
    }
    cp_async_commit();  // one group per call, empty or not: the wait counts stay uniform
  };
  // The newest token (ctx - 1) is stored by the kernel before this one. The first tiles that do not
  // hold it are requested before pdl_wait; the rest of the ring's first kStages - 1 after it.
  const int newest_tile = (ctx - 1) / kTileRows;
  int early = 0;
  while (early < kStages - 1 && t0 + early < t1 && t0 + early != newest_tile) {
    issue(t0 + early, early);
    ++early;
  }
  pdl_wait();
  pdl_trigger();
  if (ctx == 0) {  // padding with a query row: deterministic zeros
    for (int e = tid; e < group * D; e += kThreads) dst[e] = __float2bfloat16_rn(0.0f);
    return;
  }
  for (int s = early; s < kStages - 1; ++s) issue(t0 + s, s);

  // Q of the group's heads as the A fragment rows g (rows g + 8 are zero).
  std::uint32_t qa[D / 16][2];
  {
    const bf16* qrow = q + static_cast<std::int64_t>(batch.q_start[seq]) * q_stride + (kvh * group + g) * D;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qa[kk][0] = g < group ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + tig * 2) : 0u;
      qa[kk][1] = g < group ? *reinterpret_cast<const std::uint32_t*>(qrow + kk * 16 + 8 + tig * 2) : 0u;
    }
  }
  float o[D / 8][2];  // O accumulators of row g, columns 8i + 2 tig (+1)
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t = t0, it = 0; t < t1; ++t, ++it) {
    const int stage = it % kStages;
    // Tile t + kStages - 1 goes into the stage tile t - 1 left (every lane is past reading it) before
    // the wait for tile t, so the wait has every stage's copies in flight.
    __syncwarp();
    issue(t + kStages - 1, (it + kStages - 1) % kStages);
    cp_async_wait<kStages - 1>();
    __syncwarp();  // every lane's copies of tile t landed
    const bf16* kt = ks + stage * 2 * T::kElems;
    const bf16* vt = kt + T::kElems;
    float s[2][4];
    tile_scores<D, T>(qa, kt, 0, lane, s);
    const float alpha = tile_softmax(s, t * kTileRows + tig * 2, ctx, scale_log2, m, l);
    // O += P V: the S accumulators are the A fragment of P (rows g + 8 zero); O is scaled on the way.
    const std::uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), 0u, pack_bf16(s[1][0], s[1][1]), 0u};
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      std::uint32_t b[4];
      tile_values<T>(b, vt, 0, lane, db);
      float c0v[4] = {o[2 * db][0] * alpha, o[2 * db][1] * alpha, 0.0f, 0.0f};
      float c1v[4] = {o[2 * db + 1][0] * alpha, o[2 * db + 1][1] * alpha, 0.0f, 0.0f};
      mma_bf16(c0v, pa, b[0], b[1]);
      mma_bf16(c1v, pa, b[2], b[3]);
      o[2 * db][0] = c0v[0], o[2 * db][1] = c0v[1];
      o[2 * db + 1][0] = c1v[0], o[2 * db + 1][1] = c1v[1];
    }
  }
  cp_async_wait<0>();  // the ring's trailing groups are empty; none may land after the reuse below

  // The four warps combined in the rings' memory (free now).
  auto* partial = reinterpret_cast<float*>(dynamic_smem);  // [kWarps][kMaxGroup][D]
  combine_warps<D>(o, m, l, partial, warp_max, warp_sum);
  for (int e = tid; e < group * D; e += kThreads) {
    const float2 sums = combined_element<D>(partial, warp_sum, e);
    dst[e] = __float2bfloat16_rn(sums.x / sums.y);
  }
}

// Raises the kernel's dynamic shared memory limit once per device; false where the device's opt-in
// limit is below what the kernel needs.
template <int D, int kStages>
bool configure(int device) {
  static std::array<std::atomic<int>, 64> state{};  // 0: not yet, 1: fits, 2: does not
  if (device >= 0 && device < static_cast<int>(state.size()) && state[device].load() != 0) {
    return state[device].load() == 1;
  }
  const bool fits = dynamic_smem_bytes<D, kStages>() <= static_cast<std::size_t>(shared_memory_optin_bytes(device)) -
                                                            2 * kWarps * kMaxGroup * sizeof(float);
  if (fits) {
    GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(decode_pair_kernel<D, kStages>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(dynamic_smem_bytes<D, kStages>())));
  }
  if (device >= 0 && device < static_cast<int>(state.size())) state[device].store(fits ? 1 : 2);
  return fits;
}

}  // namespace pairs

namespace split {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

constexpr int kDecodeSplitTokens = 512;
// Finer splits stop at kDecodeBlockBudget blocks (about 2 resident blocks per SM on 132 SMs).
// Measured on the H200 (bench/NOTES.md), batch 1 at 8k context: 31.6 us with 512-token splits
// (128 blocks), 22.9 us with budget 256 (256-token splits), 30.6 us at 512 and 46.7 us at 1024,
// where the second wave of blocks and the merge of many splits cost more than they bring.
constexpr int kDecodeBlockBudget = 256;

// Tokens per split for a launch: depends only on host-known sizes, so a captured graph keeps it.
int split_tokens(int num_seqs, int kv_heads, int max_context, int block_budget) {
  int tokens = kDecodeSplitTokens;
  while (tokens > kDecodeSplitTokens / 8 &&
         static_cast<std::int64_t>(num_seqs) * kv_heads * ceil_div(std::max(max_context, 1), tokens / 2) <=
             block_budget) {
    tokens /= 2;
  }
  return tokens;
}

// Partial results: per (sequence, head, split) the max (log2 domain), the sum of exp2(s - max),
// and the D accumulators; after the streaming kernel's counters, which must stay zero.
struct Workspace {
  float* max_sum;  // [num_seqs, heads, splits, 2]
  float* acc;      // [num_seqs, heads, splits, D]
};

Workspace workspace_layout(void* base, int num_seqs, int heads, int splits) {
  auto* f = reinterpret_cast<float*>(static_cast<int*>(base) + kMaxPairs);
  return Workspace{f, f + static_cast<std::size_t>(num_seqs) * heads * splits * 2};
}

template <int D, int G>
__global__ void __launch_bounds__(kThreads)
    decode_split_kernel(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, AttentionBatch batch,
                        AttentionShape shape, Workspace ws, int splits, int split_tokens, float scale_log2) {
  constexpr int kTpt = D / 8;  // threads per token row (one 16-byte vector each)
  constexpr int kTokensPerStep = kThreads / kTpt;
  constexpr int kUnroll = 8;  // rows in flight per thread
  constexpr int kScores = G * kDecodeSplitTokens;
  constexpr int kReduce = kWarps * G * D;
  __shared__ float smem[kScores > kReduce ? kScores : kReduce];
  __shared__ float row_max[G], row_sum[G];
  // Cache row (block * kv_heads + kvh) * block_size + offset of each token of the split, looked up
  // once so that no K or V load waits for a block-table load. 32 bits: < 2^32 rows of >= 64 bytes.
  __shared__ std::uint32_t rows[kDecodeSplitTokens];

  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int ctx = batch.q_len[seq] > 0 ? batch.context_len[seq] : 0;
  const int start = split * split_tokens;
  if (start >= ctx) {  // every block waits (kernel_util.cuh), even one with nothing to do
    pdl_wait();
    pdl_trigger();
    return;
  }
  const int n = min(split_tokens, ctx - start);
  const std::int32_t* table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
  for (int t = threadIdx.x; t < n; t += kThreads) {
    const int token = start + t;
    rows[t] = (static_cast<std::uint32_t>(table[token / shape.block_size]) * shape.kv_heads + kvh) * shape.block_size +
              token % shape.block_size;
  }
  __syncthreads();  // rows[] complete
  const int li = threadIdx.x % kTpt;
  const int gid = threadIdx.x / kTpt;
  const int head0 = kvh * G;
  // Rows t0, t0 + kTokensPerStep, ... of the split (zeros past it), leaving out row `skip`.
  auto load_rows = [&](const bf16* cache, int t0, uint4(&r)[kUnroll], int skip) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u * kTokensPerStep;
      r[u] = t < n && t != skip
                 ? ldg_stream(reinterpret_cast<const uint4*>(cache + static_cast<std::int64_t>(rows[t]) * D) + li)
                 : make_uint4(0, 0, 0, 0);
    }
  };
  auto load_row = [&](const bf16* cache, int t0, uint4(&r)[kUnroll], int only) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (t0 + u * kTokensPerStep == only) {
        r[u] = ldg_stream(reinterpret_cast<const uint4*>(cache + static_cast<std::int64_t>(rows[only]) * D) + li);
      }
    }
  };
  // The newest token (position ctx - 1) has its K/V stored by the kernel before this one; every
  // other row by earlier steps. So the first round's rows but the newest are requested before
  // pdl_wait, and their latency overlaps the end of that kernel.
  const int newest = ctx - 1 - start < n ? ctx - 1 - start : -1;
  // A split that one round of loads covers also requests its V rows at once (one latency instead
  // of two); only for groups up to 4 heads, where the registers keep 2 blocks per SM.
  constexpr bool kEarlyV = G <= 4;
  const bool one_round = n <= kTokensPerStep * kUnroll;
  uint4 kv[kUnroll], vv[kUnroll];
  load_rows(k_cache, gid, kv, newest);
  if (kEarlyV && one_round) load_rows(v_cache, gid, vv, newest);
  // The step's metadata was copied before its first kernel; Q and the newest K/V come from the
  // kernel before this one.
  pdl_wait();
  pdl_trigger();
  load_row(k_cache, gid, kv, newest);
  if (kEarlyV && one_round) load_row(v_cache, gid, vv, newest);

  // Phase 1: scores[g][t] = q_g . k_t * scale * log2(e).
  float qf[G][8];
  {
    const bf16* qrow = q + static_cast<std::int64_t>(batch.q_start[seq]) * q_stride;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      load8(qrow + (head0 + g) * D + li * 8, qf[g]);
#pragma unroll
      for (int j = 0; j < 8; ++j) qf[g][j] *= scale_log2;
    }
  }
  // Warp-uniform loop bound: the shuffles below need every lane of the warp.
  for (int base = 0; base < n; base += kTokensPerStep * kUnroll) {
    const int t0 = base + gid;
    if (base > 0) load_rows(k_cache, t0, kv, -1);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      unpack8(kv[u], kf);
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        dot[g] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot[g] = fmaf(qf[g][j], kf[j], dot[g]);
#pragma unroll
        for (int o = kTpt / 2; o > 0; o /= 2) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
      }
      const int t = t0 + u * kTokensPerStep;
      if (li == 0 && t < n) {
#pragma unroll
        for (int g = 0; g < G; ++g) smem[g * kDecodeSplitTokens + t] = dot[g];
      }
    }
  }
  // Otherwise the first V rows are requested now, so their latency overlaps the softmax below.
  if (!(kEarlyV && one_round)) load_rows(v_cache, gid, vv, -1);
  __syncthreads();

  // Phase 2: warp g turns the scores of head g into exp2(s - max) and their sum.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < G) {
    float* s = smem + warp * kDecodeSplitTokens;
    float m = -INFINITY;
    for (int t = lane; t < n; t += 32) m = fmaxf(m, s[t]);
    m = warp_max(m);
    float l = 0.0f;
    for (int t = lane; t < n; t += 32) {
      const float p = exp2f(s[t] - m);
      s[t] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) {
      row_max[warp] = m;
      row_sum[warp] = l;
    }
  }
  __syncthreads();

  // Phase 3: acc[g][d] = sum_t p[g][t] v_t[d]; group gid takes tokens gid, gid + kTokensPerStep, ...
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
  for (int base = 0; base < n; base += kTokensPerStep * kUnroll) {
    const int t0 = base + gid;
    if (base > 0) load_rows(v_cache, t0, vv, -1);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u * kTokensPerStep;
      if (t >= n) break;
      float vf[8];
      unpack8(vv[u], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = smem[g * kDecodeSplitTokens + t];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(p, vf[j], acc[g][j]);
      }
    }
  }
  // The groups of one warp share lanes li: fold them, then the warps through shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int o = kTpt; o < 32; o *= 2) acc[g][j] += __shfl_xor_sync(0xffffffffu, acc[g][j], o);
  __syncthreads();  // the scores are dead: smem becomes the reduction buffer
  if (lane < kTpt) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int j = 0; j < 8; ++j) smem[(warp * G + g) * D + li * 8 + j] = acc[g][j];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += kThreads) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += smem[w * G * D + e];
    const int g = e / D, d = e - g * D;
    const std::int64_t part = (static_cast<std::int64_t>(seq) * shape.heads + head0 + g) * splits + split;
    ws.acc[part * D + d] = total;
    if (d == 0) {
      ws.max_sum[part * 2] = row_max[g];
      ws.max_sum[part * 2 + 1] = row_sum[g];
    }
  }
}

// One block per (head, sequence), one thread per output element d. The splits' maxima are reduced
// by all threads at once, and the accumulators are read 8 splits at a time, so a long context
// (up to 512 splits of 64 tokens) does not become a chain of dependent loads.
__global__ void decode_merge_kernel(AttentionBatch batch, AttentionShape shape, Workspace ws, int splits,
                                    int split_tokens, bf16* out, int out_stride) {
  __shared__ float partial[128 / 32];
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int D = shape.head_dim;
  if (batch.q_len[seq] <= 0) return;  // no query row
  bf16* dst = out + static_cast<std::int64_t>(batch.q_start[seq]) * out_stride + h * D + d;
  const int ctx = batch.context_len[seq];
  if (ctx <= 0) {  // padding: a deterministic row
    *dst = __float2bfloat16_rn(0.0f);
    return;
  }
  const int used = (ctx + split_tokens - 1) / split_tokens;
  const std::int64_t part0 = (static_cast<std::int64_t>(seq) * shape.heads + h) * splits;
  float m = -INFINITY;
  for (int s = d; s < used; s += D) m = fmaxf(m, ws.max_sum[(part0 + s) * 2]);
  m = warp_max(m);
  if (d % 32 == 0) partial[d / 32] = m;
  __syncthreads();
  m = partial[0];
  for (int w = 1; w < D / 32; ++w) m = fmaxf(m, partial[w]);
  float l = 0.0f, o = 0.0f;
#pragma unroll 8
  for (int s = 0; s < used; ++s) {
    const float w = exp2f(ws.max_sum[(part0 + s) * 2] - m);
    l += w * ws.max_sum[(part0 + s) * 2 + 1];
    o += w * ws.acc[(part0 + s) * D + d];
  }
  *dst = __float2bfloat16_rn(o / l);
}

}  // namespace split

}  // namespace

const char* check_attention_shape(const AttentionShape& shape) {
  if (shape.head_dim != 32 && shape.head_dim != 64 && shape.head_dim != 128) {
    return "head_dim not supported: 32, 64 or 128";
  }
  if (shape.heads <= 0 || shape.kv_heads <= 0 || shape.heads % shape.kv_heads != 0) {
    return "heads must be a positive multiple of kv_heads";
  }
  if (shape.heads / shape.kv_heads > kMaxGroup) return "more than 8 query heads per KV head not supported";
  if (shape.block_size <= 0) return "block_size must be positive";
  return "";
}

std::size_t decode_attention_workspace_bytes(int num_seqs, int heads, int head_dim, int max_context) {
  num_seqs = std::max(num_seqs, 0);
  // streaming: partial slots = grid blocks + pairs, each with the group's heads, i.e. at most
  // kMaxGridBlocks * 8 + num_seqs * heads head partials whatever kv_heads is.
  const std::size_t stream_parts =
      static_cast<std::size_t>(streaming::kMaxGridBlocks) * kMaxGroup + static_cast<std::size_t>(num_seqs) * heads;
  // split: one partial per (sequence, head, split); with 512-token splits num_seqs * heads *
  // splits, finer splits only while the blocks stay within the budget: at most budget * group.
  const std::size_t split_coarse =
      static_cast<std::size_t>(num_seqs) * heads * ceil_div(std::max(max_context, 1), split::kDecodeSplitTokens);
  const std::size_t split_fine = static_cast<std::size_t>(split::kDecodeBlockBudget) * std::min(heads, kMaxGroup);
  const std::size_t parts = std::max({stream_parts, split_coarse, split_fine});
  return kMaxPairs * sizeof(int) + parts * (head_dim + 2) * sizeof(float);
}

void launch_decode_attention_grid(int grid_blocks, const bf16* q, int q_stride, const bf16* k_cache,
                                  const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                  void* workspace, bf16* out, int out_stride, cudaStream_t stream) {
  if (batch.num_seqs <= 0) return;
  const int pairs = batch.num_seqs * shape.kv_heads;
  if (pairs > kMaxPairs || batch.num_seqs >= kMaxPairs) {
    throw std::invalid_argument("decode attention: more than 16384 (sequence, KV head) pairs");
  }
  const streaming::Workspace ws = streaming::workspace_layout(workspace, pairs, shape.heads / shape.kv_heads);
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  const CurrentDevice current = current_device();
  const int device = current.device, sms = current.sms;
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (!streaming::streaming_fits<D>(device, batch.num_seqs)) {
      throw std::invalid_argument(fmt::format(
          "decode attention: the streaming kernel needs {} bytes of shared memory per block for {} sequences at head "
          "size {}; this GPU allows {} (the split kernel runs instead where the choice is automatic)",
          streaming::dynamic_smem_bytes<D>(batch.num_seqs), batch.num_seqs, D,
          streaming::dynamic_smem_limit<D>(device)));
    }
    const int resident = streaming::resident_blocks_per_sm<D>(device);
    const int blocks = std::clamp(grid_blocks > 0 ? grid_blocks : sms * resident, 1, streaming::kMaxGridBlocks);
    launch_kernel(streaming::decode_attention_kernel<D>, dim3(blocks), streaming::kThreads,
                  streaming::dynamic_smem_bytes<D>(batch.num_seqs), stream, q, q_stride, k_cache, v_cache, batch, shape,
                  ws, out, out_stride, scale_log2);
  });
}

namespace {

// The pair kernel launched where it runs on this GPU (head size 64 or 128, 2 or 3 stages, its shared
// memory); false, launching nothing, elsewhere.
bool launch_pairs_where_supported(int stages, const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                  const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                                  cudaStream_t stream) {
  if (batch.num_seqs <= 0) return true;  // nothing to launch
  if (!decode_attention_pairs_supported(shape.head_dim, stages)) return false;
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  const dim3 grid(static_cast<unsigned>(batch.num_seqs) * static_cast<unsigned>(shape.kv_heads));
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if constexpr (D == 64 || D == 128) {
      auto* kernel = stages == 2 ? pairs::decode_pair_kernel<D, 2> : pairs::decode_pair_kernel<D, 3>;
      launch_kernel(kernel, grid, pairs::kThreads,
                    stages == 2 ? pairs::dynamic_smem_bytes<D, 2>() : pairs::dynamic_smem_bytes<D, 3>(), stream, q,
                    q_stride, k_cache, v_cache, batch, shape, out, out_stride, scale_log2);
    }
  });
  return true;
}

}  // namespace

bool decode_attention_pairs_supported(int head_dim, int stages) {
  if ((head_dim != 64 && head_dim != 128) || (stages != 2 && stages != 3)) return false;
  const int device = current_device().device;
  bool fits = false;
  dispatch_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if constexpr (D == 64 || D == 128) {
      fits = stages == 2 ? pairs::configure<D, 2>(device) : pairs::configure<D, 3>(device);
    }
  });
  return fits;
}

void launch_decode_attention_pairs(int stages, const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                   const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                                   cudaStream_t stream) {
  if (!launch_pairs_where_supported(stages, q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream)) {
    throw std::invalid_argument(fmt::format(
        "decode attention: the pair kernel runs head size 64 or 128 with 2 or 3 stages, where this GPU's shared "
        "memory per block holds them (asked: head size {}, {} stages)",
        shape.head_dim, stages));
  }
}

void launch_decode_attention_split(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                   const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                                   int out_stride, cudaStream_t stream) {
  if (batch.num_seqs <= 0) return;
  using namespace split;
  const int tokens = split_tokens(batch.num_seqs, shape.kv_heads, batch.max_context, kDecodeBlockBudget);
  const int splits = ceil_div(std::max(batch.max_context, 1), tokens);
  const Workspace ws = workspace_layout(workspace, batch.num_seqs, shape.heads, splits);
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  const dim3 grid(splits, shape.kv_heads, batch.num_seqs);
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    dispatch_int<1, kMaxGroup>(shape.heads / shape.kv_heads, [&](auto g) {
      launch_kernel(decode_split_kernel<decltype(d)::value, decltype(g)::value>, grid, kThreads, 0, stream, q, q_stride,
                    k_cache, v_cache, batch, shape, ws, splits, tokens, scale_log2);
    });
  });
  launch_kernel(decode_merge_kernel, dim3(shape.heads, batch.num_seqs), shape.head_dim, 0, stream, batch, shape, ws,
                splits, tokens, out, out_stride);
}

void launch_decode_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                             const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                             int out_stride, cudaStream_t stream, const DecodeAttentionPlan& plan) {
  using K = DecodeAttentionPlan::Kernel;
  // A pair plan the GPU cannot run (head size 32, too little shared memory) falls to the split kernel.
  if (plan.kernel == K::pairs &&
      launch_pairs_where_supported(plan.stages, q, q_stride, k_cache, v_cache, batch, shape, out, out_stride, stream)) {
    return;
  }
  bool streaming =
      plan.kernel == K::automatic ? batch.num_seqs * shape.kv_heads >= kStreamMinPairs : plan.kernel == K::streaming;
  if (streaming) {  // where its shared memory does not fit this GPU (and this many sequences): split
    const int device = current_device().device;
    dispatch_head_dim(shape.head_dim, [&](auto d) {
      streaming = streaming::streaming_fits<decltype(d)::value>(device, batch.num_seqs);
    });
  }
  if (streaming) {
    launch_decode_attention_grid(plan.kernel == K::streaming ? plan.grid_blocks : 0, q, q_stride, k_cache, v_cache,
                                 batch, shape, workspace, out, out_stride, stream);
  } else {
    launch_decode_attention_split(q, q_stride, k_cache, v_cache, batch, shape, workspace, out, out_stride, stream);
  }
}

int decode_attention_streaming_max_seqs(int head_dim) {
  const int device = current_device().device;
  int most = 0;
  dispatch_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    // The shared memory grows with the sequences: the largest count that fits, by bisection.
    int lo = 0, hi = kMaxPairs - 1;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (streaming::streaming_fits<D>(device, mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    most = lo;
  });
  return most;
}

std::vector<DecodeAttentionPlan> decode_attention_candidates(int head_dim) {
  const CurrentDevice current = current_device();
  const int device = current.device, sms = current.sms;
  int resident = 0;
  dispatch_head_dim(head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (streaming::streaming_fits<D>(device, 1)) resident = streaming::resident_blocks_per_sm<D>(device);
  });
  std::vector<DecodeAttentionPlan> plans{{DecodeAttentionPlan::Kernel::split, 0}};
  for (int per_sm = 1; per_sm <= resident && sms * per_sm <= streaming::kMaxGridBlocks; ++per_sm) {
    plans.push_back({DecodeAttentionPlan::Kernel::streaming, sms * per_sm});
  }
  if (env_switch_on("GPUSCOUT_DECODE_PAIR_KERNEL")) {
    for (const int stages : {3, 2}) {
      if (decode_attention_pairs_supported(head_dim, stages)) {
        plans.push_back({DecodeAttentionPlan::Kernel::pairs, 0, stages});
      }
    }
  }
  return plans;
}

std::string describe(const DecodeAttentionPlan& plan) {
  switch (plan.kernel) {
    case DecodeAttentionPlan::Kernel::split:
      return "split";
    case DecodeAttentionPlan::Kernel::streaming: {
      const int sms = current_device().sms;
      std::string s = "streaming " + std::to_string(plan.grid_blocks) + " blocks";
      if (plan.grid_blocks > 0 && plan.grid_blocks % sms == 0)
        s += " (" + std::to_string(plan.grid_blocks / sms) + "/SM)";
      return plan.grid_blocks > 0 ? s : "streaming (SMs x resident blocks)";
    }
    case DecodeAttentionPlan::Kernel::pairs:
      return "pairs (" + std::to_string(plan.stages) + " stages)";
    default:
      return "automatic";
  }
}

}  // namespace gpuscout::cuda::infer
