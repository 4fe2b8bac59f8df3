// Batch-1 decode step as one persistent kernel (decode_fused.hpp says why).
//
// Grid: one block per SM, every block resident at once (checked with the occupancy calculator
// before launch; nothing else of the stream runs beside it). A block is kWarps consumer warps and
// one producer warp.
//
// The producer (one thread) streams the block's share of every weight matrix of the step, in the
// order the consumers use them, through a ring of kSlots shared-memory pieces with cp.async.bulk:
// a piece is a segment of at most kPieceBytes of one W row, each block owning a contiguous range of
// output rows per matrix. It depends on no activation, so it runs ahead of the consumers across
// stage boundaries and grid barriers (up to kSlots pieces, 128 KB per SM): HBM keeps streaming
// while the consumers wait. (Session 8 probes, bench/NOTES.md: consumer warps loading W into
// registers themselves streamed at 2.2-3.6 TB/s, a ring consumed piece by piece by the whole block
// at 3.5; pieces consumed one per warp in parallel at 4.5 TB/s.)
//
// The consumers do, per layer, five stages, each ended by every block arriving at a grid barrier
// (one monotonically rising counter):
//   1. QKV rows of this block   <- RMSNorm(h) computed by every block into shared memory
//   2. attention items          <- (KV head, context split) pairs; the last split of a head merges
//   3. O rows (+ residual)      <- the attention output
//   4. gate/up rows             <- RMSNorm(h)
//   5. down rows (+ residual)   <- SiLU(gate) x up
// In a GEMV stage piece p goes to consumer warp p % kWarps, which adds its dot product to the
// row's sum in shared memory; the block then writes its rows.
//
// Data another block wrote during this kernel is read with ld.global.cg (L2; L1 is not coherent),
// the older KV cache with the non-coherent path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "decode_fused.hpp"
#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kWarps = 16;                    // consumer warps
constexpr int kThreads = kWarps * 32;         // consumer threads
constexpr int kBlockThreads = kThreads + 32;  // plus the producer warp
constexpr int kPieceBytes = 8192;
// A multiple of kWarps: slot p % kSlots is then always consumed by warp p % kWarps, in order, so
// the mbarrier parity a warp waits for is never two phases ahead of the slot's.
constexpr int kSlots = 16;
constexpr int kMaxSplits = 64;
// Cached tokens of a block's first attention item copied to shared memory during the QKV stage
// (its K/V do not depend on the layer's input): the attention then starts on data already there
// instead of waiting a loaded HBM round trip (~4 us while the weights stream) for each.
constexpr int kKvPrefetchTokens = 48;
constexpr int kMaxKvHeads = 64;
// Workspace: the barrier counter, then one merge counter per KV head, then the split partials.
constexpr std::size_t kMergeCounterOffset = 64;
constexpr std::size_t kHeaderBytes = kMergeCounterOffset + kMaxKvHeads * sizeof(unsigned);
// A barrier that has not resolved after this long means a block never arrived (not resident, or a
// fault): trap, so that the step fails with a CUDA error instead of hanging.
constexpr unsigned long long kBarrierTimeoutNs = 20ull * 1000 * 1000 * 1000;

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Named barrier 1: the consumer warps only (the producer warp never joins it).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_test(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(smem_addr(bar)), "r"(parity)
               : "memory");
  return done != 0;
}
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  if (mbar_test(bar, parity)) return;
  const unsigned long long start = global_ns();
  while (!mbar_test(bar, parity)) {
    if (global_ns() - start > kBarrierTimeoutNs) __trap();
  }
}

// Grid barrier k (k = 1, 2, ...) is passed when the counter reaches k x gridDim.x: every block
// arrives once per barrier and waits for them in the same order.
struct GridBarrier {
  unsigned* counter;
  unsigned passed = 0;

  __device__ void arrive() {
    consumer_sync();  // the block's stores are done before its thread 0 publishes them
    if (threadIdx.x == 0 && counter != nullptr) {
      __threadfence();
      atomicAdd(counter, 1u);
    }
  }
  __device__ void wait() {
    ++passed;
    const unsigned target = passed * gridDim.x;
    if (threadIdx.x == 0 && counter != nullptr) {
      const unsigned long long start = global_ns();
      while (ld_acquire(counter) < target) {
        if (global_ns() - start > kBarrierTimeoutNs) __trap();
      }
      __threadfence();
    }
    consumer_sync();
  }
};

__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + __expf(-g));
}

// xs = bf16(x / sqrt(mean(x^2) + eps) * weight), as rmsnorm_kernel rounds it. width % 8 == 0.
__device__ void stage_rmsnorm(const bf16* x, const bf16* weight, int width, float eps, bf16* xs, float* partial) {
  const int chunks = width / 8;
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  auto* xs4 = reinterpret_cast<uint4*>(xs);
  float sum = 0.0f;
  for (int v = threadIdx.x; v < chunks; v += kThreads) {
    const uint4 raw = __ldcg(x4 + v);
    xs4[v] = raw;
    float f[8];
    unpack8(raw, f);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += f[j] * f[j];
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  consumer_sync();
  sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) sum += partial[w];
  const float inv = rsqrtf(sum / static_cast<float>(width) + eps);
  const auto* w4 = reinterpret_cast<const uint4*>(weight);
  for (int v = threadIdx.x; v < chunks; v += kThreads) {
    float f[8], w[8];
    unpack8(xs4[v], f);
    unpack8(__ldg(w4 + v), w);
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = f[j] * inv * w[j];
    xs4[v] = pack8(f);
  }
  consumer_sync();
}

__device__ void stage_copy(const bf16* x, int width, bf16* xs) {
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  auto* xs4 = reinterpret_cast<uint4*>(xs);
  for (int v = threadIdx.x; v < width / 8; v += kThreads) xs4[v] = __ldcg(x4 + v);
  consumer_sync();
}

// xs = bf16(silu(gate) * up), as silu_mul_kernel rounds it.
__device__ void stage_silu(const bf16* gate_up, int ffn, bf16* xs) {
  const auto* g4 = reinterpret_cast<const uint4*>(gate_up);
  const auto* u4 = reinterpret_cast<const uint4*>(gate_up + ffn);
  auto* xs4 = reinterpret_cast<uint4*>(xs);
  for (int v = threadIdx.x; v < ffn / 8; v += kThreads) {
    float g[8], u[8];
    unpack8(__ldcg(g4 + v), g);
    unpack8(__ldcg(u4 + v), u);
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = silu(g[j]) * u[j];
    xs4[v] = pack8(g);
  }
  consumer_sync();
}

// The weight ring of one block (shared memory) and the row sums of its current GEMV stage.
struct Ring {
  unsigned char* data;   // kSlots x kPieceBytes
  std::uint64_t* full;   // [kSlots]: the piece landed (the producer's expect_tx, the copy's bytes)
  std::uint64_t* empty;  // [kSlots]: its consumer warp is done with it
  float* row_sum;        // [rows of this block in the current stage]
};

// This block's output rows [x, y) of an n-row matrix: contiguous, so its W rows are one span.
__device__ __forceinline__ int2 block_rows(int n) {
  return make_int2(static_cast<int>(static_cast<std::int64_t>(n) * blockIdx.x / gridDim.x),
                   static_cast<int>(static_cast<std::int64_t>(n) * (blockIdx.x + 1) / gridDim.x));
}

__device__ __forceinline__ int pieces_per_row(int k) {
  return (k * static_cast<int>(sizeof(bf16)) + kPieceBytes - 1) / kPieceBytes;
}

// Producer: the pieces of this block's rows of W [n, k], numbered on from `piece`, into the ring.
__device__ void produce(const bf16* w, int n, int k, const Ring& ring, int& piece) {
  const int2 rows = block_rows(n);
  const int row_bytes = k * static_cast<int>(sizeof(bf16));
  for (std::int64_t row = rows.x; row < rows.y; ++row) {
    const auto* src = reinterpret_cast<const unsigned char*>(w + row * k);
    for (int offset = 0; offset < row_bytes; offset += kPieceBytes, ++piece) {
      const int slot = piece % kSlots;
      if (piece >= kSlots) mbar_wait(ring.empty + slot, ((piece / kSlots) - 1) & 1);
      const unsigned bytes = static_cast<unsigned>(min(kPieceBytes, row_bytes - offset));
      mbar_arrive_expect_tx(ring.full + slot, bytes);
      bulk_copy_to_shared(ring.data + slot * kPieceBytes, src + offset, bytes, ring.full + slot);
    }
  }
}

// Consumers: y[row] = bf16(sum_k xs[k] W[row, k] (+ residual[row])) for this block's rows of n,
// reading W from the ring (pieces numbered on from `base`, as the producer numbered them).
// `stage_input` waits for the stage's input and fills xs (every consumer thread calls it).
template <typename StageInput>
__device__ void gemv_stage(int n, int k, const bf16* xs, bf16* y, const bf16* residual, const Ring& ring, int& base,
                           StageInput&& stage_input) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int2 span = block_rows(n);
  const int rows = span.y - span.x;
  const int row_bytes = k * static_cast<int>(sizeof(bf16));
  const int per_row = pieces_per_row(k);
  const int pieces = rows * per_row;
  stage_input();
  for (int i = threadIdx.x; i < rows; i += kThreads) ring.row_sum[i] = 0.0f;
  consumer_sync();
  const auto* xs4 = reinterpret_cast<const uint4*>(xs);
  // Piece base + q belongs to warp (base + q) % kWarps.
  for (int q = (warp - base % kWarps + kWarps) % kWarps; q < pieces; q += kWarps) {
    const int piece = base + q;
    const int slot = piece % kSlots;
    const int row = q / per_row, segment = q - row * per_row;
    const int chunks = min(kPieceBytes, row_bytes - segment * kPieceBytes) / 16;
    mbar_wait(ring.full + slot, (piece / kSlots) & 1);
    const auto* w4 = reinterpret_cast<const uint4*>(ring.data + slot * kPieceBytes);
    const uint4* x4 = xs4 + segment * (kPieceBytes / 16);
    float acc0 = 0.0f, acc1 = 0.0f;  // two chains: the FMA latency is not the limit
#pragma unroll 4
    for (int c = lane; c < chunks; c += 32) {
      float wf[8], xf[8];
      unpack8(w4[c], wf);
      unpack8(x4[c], xf);
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        acc0 = fmaf(xf[e], wf[e], acc0);
        acc1 = fmaf(xf[e + 1], wf[e + 1], acc1);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(ring.empty + slot);
    const float acc = warp_sum(acc0 + acc1);
    if (lane == 0) atomicAdd(ring.row_sum + row, acc);
  }
  base += pieces;
  consumer_sync();
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    float v = ring.row_sum[i];
    if (residual != nullptr) v += __bfloat162float(__ldcg(residual + span.x + i));
    y[span.x + i] = __float2bfloat16_rn(v);
  }
}

template <int E>
__device__ __forceinline__ void load_lane(const bf16* p, float (&f)[E], bool coherent) {
  if constexpr (E == 4) {
    const uint2 v = coherent ? __ldcg(reinterpret_cast<const uint2*>(p)) : __ldg(reinterpret_cast<const uint2*>(p));
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
  } else if constexpr (E == 2) {
    const unsigned v =
        coherent ? __ldcg(reinterpret_cast<const unsigned*>(p)) : __ldg(reinterpret_cast<const unsigned*>(p));
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
    f[0] = a.x, f[1] = a.y;
  } else {
    f[0] = __bfloat162float(coherent ? __ldcg(p) : __ldg(p));
  }
}

struct AttentionScratch {
  float* q;      // [kGroup][D] rotated query heads of the group
  float* k_new;  // [D] the step's token: rotated K
  float* v_new;  // [D] and V
  float* warps;  // [kWarps][kGroup][D + 2]: each warp's acc, max, sum
  int* last;     // this block merges the head's splits
  bf16* kv;      // [2][kKvPrefetchTokens][D]: K then V of the first item's first tokens
};

// The context range of split s of `splits` over ctx tokens.
__device__ __forceinline__ int2 split_range(int ctx, int splits, int s) {
  const int chunk = (ctx + splits - 1) / splits;
  return make_int2(min(ctx, s * chunk), min(ctx, (s + 1) * chunk));
}

// Starts the copies of this block's first item's cached K/V (up to kKvPrefetchTokens tokens, the
// step's own token excluded) into sm.kv; attention_items waits for them.
template <int D>
__device__ void prefetch_kv(const FusedDecodeArgs& a, const FusedDecodeLayer& layer, const AttentionScratch& sm,
                            int splits) {
  const int item = blockIdx.x;
  const int kv_heads = a.shape.kv_heads, bs = a.shape.block_size;
  if (item >= kv_heads * splits) return;
  const int g = item / splits;
  const int ctx = __ldg(a.context_len);
  const int2 range = split_range(ctx, splits, item % splits);
  const int tokens = min(kKvPrefetchTokens, min(range.y, ctx - 1) - range.x);
  constexpr int kChunks = D / 8;  // 16-byte pieces of a row
  for (int idx = threadIdx.x; idx < 2 * max(tokens, 0) * kChunks; idx += kThreads) {
    const int which = idx / (tokens * kChunks), rem = idx - which * tokens * kChunks;
    const int t = rem / kChunks, c = rem - t * kChunks;
    const int p = range.x + t;
    const std::int64_t block = __ldg(a.block_table + p / bs);
    const bf16* src = (which == 0 ? layer.k_cache : layer.v_cache) + ((block * kv_heads + g) * bs + p % bs) * D + c * 8;
    cp_async16(sm.kv + (which * kKvPrefetchTokens + t) * D + c * 8, src, 16);
  }
  cp_async_commit();
}

// The (KV head, split) items of this block: softmax partials of the group's query heads over the
// split's context range, written to `partials` [heads][splits][D + 2]; the block that completes a
// head's last split merges them into attn. The step's own token (position context - 1) comes from
// the QKV output, rotated here, and is stored into the cache by the split that holds it.
template <int D, int kGroup>
__device__ void attention_items(const FusedDecodeArgs& a, const FusedDecodeLayer& layer, const AttentionScratch& sm,
                                const float* cos_half, const float* sin_half, int splits, unsigned* merge_counters,
                                float* partials) {
  constexpr int E = D / 32;
  constexpr int kHalf = D / 2;
  constexpr int kStride = D + 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int heads = a.shape.heads, kv_heads = a.shape.kv_heads, bs = a.shape.block_size;
  const int group = heads / kv_heads;
  const int ctx = __ldg(a.context_len);
  const int pos = ctx - 1;
  const float scale = rsqrtf(static_cast<float>(D));
  for (int item = blockIdx.x; item < kv_heads * splits; item += gridDim.x) {
    const int g = item / splits, s = item % splits;
    const int2 range = split_range(ctx, splits, s);
    const int p0 = range.x, p1 = range.y;
    // Tokens [p0, p0 + prefetched) are in sm.kv (prefetch_kv, this block's first item only).
    const int prefetched = item == blockIdx.x ? min(kKvPrefetchTokens, min(p1, pos) - p0) : 0;
    const bool has_new = p0 <= pos && pos < p1;
    // Rotate the group's query heads (and the new K) as rope_store_kv_kernel does, rounding to BF16.
    const int rotate_pairs = (group + (has_new ? 1 : 0)) * kHalf;
    for (int idx = threadIdx.x; idx < rotate_pairs; idx += kThreads) {
      const int h = idx / kHalf, i = idx % kHalf;
      const bool is_k = h == group;
      const int column = is_k ? (heads + g) * D : (g * group + h) * D;
      const float x0 = __bfloat162float(__ldcg(a.qkv + column + i));
      const float x1 = __bfloat162float(__ldcg(a.qkv + column + i + kHalf));
      const bf16 r0 = __float2bfloat16_rn(x0 * cos_half[i] - x1 * sin_half[i]);
      const bf16 r1 = __float2bfloat16_rn(x1 * cos_half[i] + x0 * sin_half[i]);
      float* dst = is_k ? sm.k_new : sm.q + h * D;
      dst[i] = __bfloat162float(r0);
      dst[i + kHalf] = __bfloat162float(r1);
      const int slot = __ldg(a.slot);
      if (is_k && slot >= 0) {
        bf16* k = layer.k_cache + ((static_cast<std::int64_t>(slot / bs) * kv_heads + g) * bs + slot % bs) * D;
        k[i] = r0;
        k[i + kHalf] = r1;
      }
    }
    if (has_new) {
      const int slot = __ldg(a.slot);
      bf16* v = layer.v_cache + ((static_cast<std::int64_t>(slot / bs) * kv_heads + g) * bs + slot % bs) * D;
      for (int d = threadIdx.x; d < D; d += kThreads) {
        const bf16 x = __ldcg(a.qkv + (heads + kv_heads + g) * D + d);
        if (slot >= 0) v[d] = x;
        sm.v_new[d] = __bfloat162float(x);
      }
    }
    cp_async_wait<0>();
    consumer_sync();

    float m[kGroup], l[kGroup], acc[kGroup][E];
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[h][e] = 0.0f;
    }
    // A warp's tokens p0 + warp + i * kWarps, kTokenBatch at a time: all their K/V loads are in
    // flight together (one at a time, each waiting for the one before, cost a round trip each).
    constexpr int kTokenBatch = 4;
    for (int first = p0 + warp; first < p1; first += kWarps * kTokenBatch) {
      float kf[kTokenBatch][E], vf[kTokenBatch][E];
#pragma unroll
      for (int b = 0; b < kTokenBatch; ++b) {
        const int p = first + b * kWarps;
        if (p >= p1) break;
        if (p == pos) {
#pragma unroll
          for (int e = 0; e < E; ++e) kf[b][e] = sm.k_new[lane * E + e], vf[b][e] = sm.v_new[lane * E + e];
        } else if (p - p0 < prefetched) {
          const bf16* k = sm.kv + (p - p0) * D + lane * E;
          const bf16* v = k + kKvPrefetchTokens * D;
#pragma unroll
          for (int e = 0; e < E; ++e) kf[b][e] = __bfloat162float(k[e]), vf[b][e] = __bfloat162float(v[e]);
        } else {
          const std::int64_t block = __ldg(a.block_table + p / bs);
          const std::int64_t off = ((block * kv_heads + g) * bs + p % bs) * D + lane * E;
          load_lane<E>(layer.k_cache + off, kf[b], false);
          load_lane<E>(layer.v_cache + off, vf[b], false);
        }
      }
#pragma unroll
      for (int b = 0; b < kTokenBatch; ++b) {
        if (first + b * kWarps >= p1) break;
#pragma unroll
        for (int h = 0; h < kGroup; ++h) {
          if (h >= group) break;
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < E; ++e) dot = fmaf(sm.q[h * D + lane * E + e], kf[b][e], dot);
          const float score = warp_sum(dot) * scale;
          const float m_new = fmaxf(m[h], score);
          const float correction = __expf(m[h] - m_new);
          const float weight = __expf(score - m_new);
          l[h] = l[h] * correction + weight;
#pragma unroll
          for (int e = 0; e < E; ++e) acc[h][e] = fmaf(acc[h][e], correction, weight * vf[b][e]);
          m[h] = m_new;
        }
      }
    }
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      if (h >= group) break;
      float* wp = sm.warps + (warp * kGroup + h) * kStride;
#pragma unroll
      for (int e = 0; e < E; ++e) wp[lane * E + e] = acc[h][e];
      if (lane == 0) wp[D] = m[h], wp[D + 1] = l[h];
    }
    consumer_sync();
    // The block's partial per head: the warps' softmax states combined.
    for (int idx = threadIdx.x; idx < group * D; idx += kThreads) {
      const int h = idx / D, d = idx % D;
      float top = -INFINITY;
      for (int w = 0; w < kWarps; ++w) top = fmaxf(top, sm.warps[(w * kGroup + h) * kStride + D]);
      float sum = 0.0f, value = 0.0f;
      if (top != -INFINITY) {
        for (int w = 0; w < kWarps; ++w) {
          const float* wp = sm.warps + (w * kGroup + h) * kStride;
          const float f = __expf(wp[D] - top);
          sum += wp[D + 1] * f;
          value += wp[d] * f;
        }
      }
      float* out = partials + (static_cast<std::int64_t>(g * group + h) * splits + s) * kStride;
      out[d] = value;
      if (d == 0) out[D] = top, out[D + 1] = sum;
    }
    consumer_sync();
    if (threadIdx.x == 0) {
      __threadfence();
      *sm.last = atomicAdd(merge_counters + g, 1u) == static_cast<unsigned>(splits - 1);
    }
    consumer_sync();
    if (*sm.last) {
      __threadfence();
      for (int idx = threadIdx.x; idx < group * D; idx += kThreads) {
        const int h = idx / D, d = idx % D;
        const float* part = partials + static_cast<std::int64_t>(g * group + h) * splits * kStride;
        float top = -INFINITY;
        for (int q = 0; q < splits; ++q) top = fmaxf(top, __ldcg(part + q * kStride + D));
        float sum = 0.0f, value = 0.0f;
        for (int q = 0; q < splits; ++q) {
          const float mq = __ldcg(part + q * kStride + D);
          if (mq == -INFINITY) continue;
          const float f = __expf(mq - top);
          sum += __ldcg(part + q * kStride + D + 1) * f;
          value += __ldcg(part + q * kStride + d) * f;
        }
        // sum 0: no context at all (an all-padding start-up step); the row is not used.
        a.attn[(g * group + h) * D + d] = __float2bfloat16_rn(sum > 0.0f ? value / sum : 0.0f);
      }
      if (threadIdx.x == 0) merge_counters[g] = 0;  // ready for the next layer (several barriers later)
    }
    consumer_sync();
  }
}

int splits_for(int grid, int kv_heads) {
  return std::clamp(grid / kv_heads, 1, kMaxSplits);
}

struct SmemLayout {
  std::size_t ring, full, empty, row_sum, x, partial, cos, sin, q, k_new, v_new, warps, last, kv, total;
};

// The stage input (xs) and the attention's per-warp partials share one region: the attention runs
// after the QKV stage read xs and before the O stage stages its input there.
SmemLayout smem_layout(int hidden, int ffn, const AttentionShape& shape, int group_cap, int grid) {
  SmemLayout s{};
  const int d = shape.head_dim;
  const int q_dim = shape.heads * d;
  const int qkv_dim = q_dim + 2 * shape.kv_heads * d;
  const int widest_in = std::max({hidden, q_dim, ffn});
  const int widest_out = std::max({qkv_dim, hidden, 2 * ffn});
  auto align = [](std::size_t v) { return (v + 127) / 128 * 128; };
  s.ring = 0;
  s.full = align(static_cast<std::size_t>(kSlots) * kPieceBytes);
  s.empty = s.full + kSlots * sizeof(std::uint64_t);
  s.row_sum = align(s.empty + kSlots * sizeof(std::uint64_t));
  s.x = align(s.row_sum + (static_cast<std::size_t>(widest_out) / grid + 2) * sizeof(float));
  s.warps = s.x;
  const std::size_t x_bytes = static_cast<std::size_t>(widest_in) * sizeof(bf16);
  const std::size_t warps_bytes = static_cast<std::size_t>(kWarps) * group_cap * (d + 2) * sizeof(float);
  s.partial = align(s.x + std::max(x_bytes, warps_bytes));
  s.cos = align(s.partial + kWarps * sizeof(float));
  s.sin = align(s.cos + d / 2 * sizeof(float));
  s.q = align(s.sin + d / 2 * sizeof(float));
  s.k_new = align(s.q + static_cast<std::size_t>(group_cap) * d * sizeof(float));
  s.v_new = align(s.k_new + d * sizeof(float));
  s.last = align(s.v_new + d * sizeof(float));
  s.kv = align(s.last + 16);
  s.total = s.kv + 2ull * kKvPrefetchTokens * d * sizeof(bf16);
  return s;
}

template <int D, int kGroup>
__global__ void __launch_bounds__(kBlockThreads, 1) fused_decode_kernel(FusedDecodeArgs a, SmemLayout lay, int splits) {
  extern __shared__ uint4 smem4[];
  auto* smem = reinterpret_cast<unsigned char*>(smem4);
  const Ring ring{smem + lay.ring, reinterpret_cast<std::uint64_t*>(smem + lay.full),
                  reinterpret_cast<std::uint64_t*>(smem + lay.empty), reinterpret_cast<float*>(smem + lay.row_sum)};
  auto* xs = reinterpret_cast<bf16*>(smem + lay.x);
  auto* partial = reinterpret_cast<float*>(smem + lay.partial);
  auto* cos_half = reinterpret_cast<float*>(smem + lay.cos);
  auto* sin_half = reinterpret_cast<float*>(smem + lay.sin);
  const AttentionScratch scratch{reinterpret_cast<float*>(smem + lay.q),     reinterpret_cast<float*>(smem + lay.k_new),
                                 reinterpret_cast<float*>(smem + lay.v_new), reinterpret_cast<float*>(smem + lay.warps),
                                 reinterpret_cast<int*>(smem + lay.last),    reinterpret_cast<bf16*>(smem + lay.kv)};
  const int hidden = a.hidden, ffn = a.ffn;
  const int q_dim = a.shape.heads * D;
  const int qkv_dim = q_dim + 2 * a.shape.kv_heads * D;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) {
      mbar_init(ring.full + i, 1);
      mbar_init(ring.empty + i, 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x >= kThreads) {
    // The producer: weights depend on nothing, so it starts before pdl_wait and never waits for it.
    if (threadIdx.x == kThreads) {
      int piece = 0;
      for (int li = 0; li < a.num_layers; ++li) {
        const FusedDecodeLayer& layer = a.layers[li];
        produce(layer.wqkv, qkv_dim, hidden, ring, piece);
        produce(layer.wo, hidden, q_dim, ring, piece);
        produce(layer.w_gate_up, 2 * ffn, hidden, ring, piece);
        produce(layer.w_down, hidden, ffn, ring, piece);
      }
    }
    return;
  }

  auto* ws = static_cast<unsigned char*>(a.workspace);
  GridBarrier barrier{reinterpret_cast<unsigned*>(ws)};
  auto* merge_counters = reinterpret_cast<unsigned*>(ws + kMergeCounterOffset);
  auto* partials = reinterpret_cast<float*>(ws + kHeaderBytes);
  // The position is step metadata, copied before the step's first kernel: cos/sin before pdl_wait.
  // theta^(-2i/D) in double rounded once to FP32, as rope_store_kv_kernel computes it.
  const float position = static_cast<float>(__ldg(a.position));
  for (int i = threadIdx.x; i < D / 2; i += kThreads) {
    const float inv_freq = static_cast<float>(pow(static_cast<double>(a.rope_theta), -2.0 * i / D));
    sincosf(position * inv_freq, &sin_half[i], &cos_half[i]);
  }
  const bool skip_norms = a.knock_out & 1u, skip_attention = a.knock_out & 4u, skip_silu = a.knock_out & 8u;
  if (a.knock_out & 16u) barrier.counter = nullptr;
  auto norm = [&](const bf16* weight) {
    if (skip_norms) {
      stage_copy(a.h, hidden, xs);
    } else {
      stage_rmsnorm(a.h, weight, hidden, a.norm_eps, xs, partial);
    }
  };
  int base = 0;  // the first ring piece of the current GEMV stage
  for (int li = 0; li < a.num_layers; ++li) {
    const FusedDecodeLayer layer = a.layers[li];
    gemv_stage(qkv_dim, hidden, xs, a.qkv, nullptr, ring, base, [&] {
      if (!skip_attention) prefetch_kv<D>(a, layer, scratch, splits);
      if (li == 0) {
        pdl_wait();  // the embedding (h) is written
      } else {
        barrier.wait();
      }
      norm(layer.attn_norm);
    });
    barrier.arrive();
    gemv_stage(hidden, q_dim, xs, a.h, a.h, ring, base, [&] {
      barrier.wait();
      if (!skip_attention) {
        attention_items<D, kGroup>(a, layer, scratch, cos_half, sin_half, splits, merge_counters, partials);
      }
      barrier.arrive();
      barrier.wait();
      stage_copy(a.attn, q_dim, xs);
    });
    barrier.arrive();
    gemv_stage(2 * ffn, hidden, xs, a.gate_up, nullptr, ring, base, [&] {
      barrier.wait();
      norm(layer.mlp_norm);
    });
    barrier.arrive();
    gemv_stage(hidden, ffn, xs, a.h, a.h, ring, base, [&] {
      barrier.wait();
      if (skip_silu) {
        stage_copy(a.gate_up, ffn, xs);
      } else {
        stage_silu(a.gate_up, ffn, xs);
      }
    });
    barrier.arrive();
  }
}

template <typename F>
void dispatch(const AttentionShape& shape, F&& f) {
  const int group = shape.heads / shape.kv_heads;
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    if (group <= 4) {
      f(d, std::integral_constant<int, 4>{});
    } else {
      f(d, std::integral_constant<int, 8>{});
    }
  });
}

}  // namespace

std::string check_fused_decode(int hidden, int ffn, const AttentionShape& shape) {
  if (const char* why = check_attention_shape(shape); why != nullptr && *why != '\0') return why;
  if (hidden % 8 != 0 || ffn % 8 != 0 || (shape.heads * shape.head_dim) % 8 != 0) {
    return fmt::format("hidden {} / ffn {} / heads x head_dim {}: need multiples of 8", hidden, ffn,
                       shape.heads * shape.head_dim);
  }
  if (shape.kv_heads <= 0 || shape.heads % shape.kv_heads != 0 || shape.heads / shape.kv_heads > 8) {
    return fmt::format("{} query heads over {} KV heads: need a group of at most 8", shape.heads, shape.kv_heads);
  }
  if (shape.kv_heads > kMaxKvHeads) return fmt::format("{} KV heads: at most {}", shape.kv_heads, kMaxKvHeads);
  if (fused_decode_grid_blocks(hidden, ffn, shape) == 0) return "one block does not fit an SM";
  return {};
}

int fused_decode_grid_blocks(int hidden, int ffn, const AttentionShape& shape) {
  int device = 0, sms = 0, smem_optin = 0, resident = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  dispatch(shape, [&](auto d, auto group) {
    const SmemLayout lay = smem_layout(hidden, ffn, shape, group.value, sms);
    if (lay.total > static_cast<std::size_t>(smem_optin)) return;
    const auto kernel = fused_decode_kernel<decltype(d)::value, decltype(group)::value>;
    GPUSCOUT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(lay.total)));
    GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kBlockThreads, lay.total));
  });
  return resident >= 1 ? sms : 0;
}

std::size_t fused_decode_workspace_bytes(const AttentionShape& shape) {
  return kHeaderBytes + static_cast<std::size_t>(shape.heads) * kMaxSplits * (shape.head_dim + 2) * sizeof(float);
}

void launch_fused_decode(const FusedDecodeArgs& args, cudaStream_t stream) {
  const int grid = fused_decode_grid_blocks(args.hidden, args.ffn, args.shape);
  if (grid == 0) throw std::runtime_error("fused decode: one block does not fit an SM");
  // The barrier counter starts at zero every step; the merge counters are left at zero by each
  // launch, zeroed here too in case a launch before this one faulted halfway.
  GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(args.workspace, 0, kHeaderBytes, stream));
  const int splits = splits_for(grid, args.shape.kv_heads);
  dispatch(args.shape, [&](auto d, auto group) {
    const SmemLayout lay = smem_layout(args.hidden, args.ffn, args.shape, group.value, grid);
    launch_kernel(fused_decode_kernel<decltype(d)::value, decltype(group)::value>, grid, kBlockThreads, lay.total,
                  stream, args, lay, splits);
  });
}

}  // namespace gpuscout::cuda::infer
