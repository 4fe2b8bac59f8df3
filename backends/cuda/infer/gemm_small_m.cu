// The decode GEMM for 1..64 rows; see gemm_small_m.hpp for what it computes.
//
// Layout of the work. A block owns kSmallMTileCols = 128 rows of W (8 warps x 16) and one range of
// k (its split). Each warp multiplies its 16 W rows as the skinny kernel does: lane (g, t) takes 8
// contiguous k values of W rows g and g + 8 per step of 32 k and feeds them to the k slots it owns
// in the A fragments of two mma.sync m16n8k16 (A and B use the same slot-to-k map, so the product
// is exact). The x rows are the mma's n: rows 8j..8j+7 are n-tile j, so one A fragment serves all
// kNTiles n-tiles. x is read once per block (not once per warp) into shared memory by cp.async and
// shared by the 8 warps: x traffic from L2 is rows / 128 of the W traffic.
//
// How W gets from HBM to the tensor cores is what decides the speed, and it is not settled by
// reasoning (bench/NOTES.md): the variants below (kSmallMVariants) are all correct, and
// GemmRunner::tune times each at each split and keeps the fastest.
//   registers: 16-byte loads straight into registers, two batches deep (the batch being
//     multiplied and the next): about one batch (32 KB per block) in flight.
//   cp.async ring: each lane copies the 16-byte pieces it later reads into its own slots of a
//     ring of shared-memory stages, stages - 1 batches ahead whatever the multiply takes.
//   bulk ring: the same ring filled by one cp.async.bulk copy per W row and stage (the copy engine
//     makes the requests), completion counted on one mbarrier per warp and stage.
//
// Split k: with fewer output tiles than ~2 waves of blocks (o, down, qkv at 4096 or 14336 k), the
// blocks of one tile each sum a range of k into FP32 partials; the block that finishes the tile's
// count last adds them in split order (the same sum whatever the arrival order) plus the residual.
#include "gemm_small_m.hpp"

#include <algorithm>
#include <array>
#include <atomic>

#include "kernel_util.cuh"
#include "kernel_variants.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
static_assert(kSmallMTileCols == kWarps * 16, "one m16 tile of W rows per warp");
constexpr int kStepK = 32;      // k per warp step: 4 lanes x 8 values
constexpr int kGroupSteps = 4;  // k ranges of splits are whole groups of steps (every batch size divides it)

// Staged x of one batch of kBatchSteps steps: rows of kBatchK BF16 plus a 64-byte pad, which puts
// rows g and g + 1 of one 8-lane phase of a 16-byte shared load on disjoint banks (stride = 4 mod 8
// sixteen-byte units).
template <int kBatchSteps>
struct Batch {
  static constexpr int kK = kStepK * kBatchSteps;
  static constexpr int kXStride = kK + 32;
  static_assert((kXStride * 2 / 16) % 8 == 4, "bank-conflict-free x reads");
  static constexpr int kWBytes = kThreads * kBatchSteps * 2 * 16;  // two 16-byte W pieces per lane and step
  template <int kNTiles>
  static constexpr int x_bytes() {
    return kNTiles * 8 * kXStride * static_cast<int>(sizeof(bf16));
  }
};

// W with a hint that the L2 fetch 256 bytes around the 16 asked for (the rest of the row's run).
__device__ __forceinline__ uint4 ldg_stream_l2_256(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ void cp_async16_l2_256(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

// cp.async.wait_group with a run-time count below kMax (a pipeline's first iterations).
template <int kMax>
__device__ __forceinline__ void cp_async_wait_upto(int pending) {
  if constexpr (kMax <= 0) {
    cp_async_wait<0>();
  } else {
    if (pending >= kMax) {
      cp_async_wait<kMax>();
    } else {
      cp_async_wait_upto<kMax - 1>(pending);
    }
  }
}

// Stages x of one batch (k past the split and rows past `rows` land as zeros: a zero W times
// stale x could still be NaN) into dst, one 16-byte cp.async per piece; no commit.
template <int kNTiles, int kBatchSteps>
__device__ __forceinline__ void stage_x(bf16* dst, const bf16* x, int rows, int k, int k0, int k_end) {
  using B = Batch<kBatchSteps>;
  constexpr int kVecsPerRow = B::kK / 8;
  for (int i = threadIdx.x; i < kNTiles * 8 * kVecsPerRow; i += kThreads) {
    const int r = i / kVecsPerRow, v = i % kVecsPerRow;
    const int kk = k0 + v * 8;
    const bool live = r < rows && kk < k_end;
    const bf16* src = live ? x + static_cast<std::int64_t>(r) * k + kk : x;
    cp_async16(dst + r * B::kXStride + v * 8, src, live ? 16 : 0);
  }
}

// The 2 kNTiles mmas of one step: W rows g and g + 8 (8 k values each), x rows 8j + g.
template <int kNTiles, int kBatchSteps>
__device__ __forceinline__ void multiply_step(float (&c)[kNTiles][4], const uint4& va, const uint4& vb,
                                              const bf16* x_lane) {
  using B = Batch<kBatchSteps>;
  const std::uint32_t f0[4] = {va.x, vb.x, va.y, vb.y};
  const std::uint32_t f1[4] = {va.z, vb.z, va.w, vb.w};
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const uint4 xv = *reinterpret_cast<const uint4*>(x_lane + j * 8 * B::kXStride);
    mma_bf16(c[j], f0, xv.x, xv.y);
    mma_bf16(c[j], f1, xv.z, xv.w);
  }
}

// The block's k range in steps of 32.
struct KRange {
  int begin, end, batches;
};
template <int kBatchSteps>
__device__ __forceinline__ KRange k_range(int k, int steps_per_split) {
  const int steps = k / kStepK;
  const int begin = min(static_cast<int>(blockIdx.y) * steps_per_split, steps);
  const int end = min(begin + steps_per_split, steps);
  return {begin, end, (end - begin + kBatchSteps - 1) / kBatchSteps};
}

// y (splits == 1) or the split's partial plus, in the tile's last block, the ordered sum.
template <int kNTiles>
__device__ __forceinline__ void finish(const float (&c)[kNTiles][4], int rows, int n, int col0, const bf16* residual,
                                       bf16* y, unsigned* counters, float* partials, int* merging) {
  const int lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
  const int splits = gridDim.y, tile = blockIdx.x;
  // Accumulator element i of lane (g, t) in n-tile j: W row col0 + g (+ 8 for i >= 2), x row
  // 8j + 2t + (i & 1).
  if (splits == 1) {
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = col0 + g + (i >= 2 ? 8 : 0), r = j * 8 + 2 * tig + (i & 1);
        if (r < rows && col < n) {
          const std::int64_t o = static_cast<std::int64_t>(r) * n + col;
          float v = c[j][i];
          if (residual != nullptr) v += __bfloat162float(residual[o]);
          y[o] = __float2bfloat16_rn(v);
        }
      }
    }
    return;
  }
  float* part = partials + static_cast<std::int64_t>(blockIdx.y) * rows * n;
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = col0 + g + (i >= 2 ? 8 : 0), r = j * 8 + 2 * tig + (i & 1);
      if (r < rows && col < n) part[static_cast<std::int64_t>(r) * n + col] = c[j][i];
    }
  }
  __threadfence();  // the partial is visible before the counter says so
  __syncthreads();
  if (threadIdx.x == 0) {
    *merging = atomicAdd(&counters[tile], 1u) == static_cast<unsigned>(splits - 1);
    if (*merging) counters[tile] = 0;  // the last one: every other split has been counted
  }
  __syncthreads();
  if (!*merging) return;
  __threadfence();
  // The tile's sum, four columns per thread where the rows allow 16-byte partial reads: the tail
  // of the launch waits on these blocks, so their L2 reads must be many and wide.
  const int tile_col0 = tile * kSmallMTileCols;
  const std::int64_t split_stride = static_cast<std::int64_t>(rows) * n;
  const bool wide = n % 4 == 0 && reinterpret_cast<std::uintptr_t>(y) % 8 == 0 &&
                    (residual == nullptr || reinterpret_cast<std::uintptr_t>(residual) % 8 == 0);
  if (wide) {
    constexpr int kQuads = kSmallMTileCols / 4;
    for (int e = threadIdx.x; e < rows * kQuads; e += kThreads) {
      const int r = e / kQuads, col = tile_col0 + (e % kQuads) * 4;
      if (col >= n) continue;
      const std::int64_t o = static_cast<std::int64_t>(r) * n + col;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
      for (int s = 0; s < splits; ++s) {
        const float4 p = __ldcg(reinterpret_cast<const float4*>(partials + s * split_stride + o));
        v.x += p.x, v.y += p.y, v.z += p.z, v.w += p.w;
      }
      if (residual != nullptr) {
        const uint2 raw = *reinterpret_cast<const uint2*>(residual + o);
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        v.x += lo.x, v.y += lo.y, v.z += hi.x, v.w += hi.y;
      }
      *reinterpret_cast<uint2*>(y + o) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
    }
    return;
  }
  for (int e = threadIdx.x; e < rows * kSmallMTileCols; e += kThreads) {
    const int r = e / kSmallMTileCols, col = tile_col0 + e % kSmallMTileCols;
    if (col >= n) continue;
    const std::int64_t o = static_cast<std::int64_t>(r) * n + col;
    float v = 0.0f;
#pragma unroll 4
    for (int s = 0; s < splits; ++s) v += __ldcg(partials + s * split_stride + o);
    if (residual != nullptr) v += __bfloat162float(residual[o]);
    y[o] = __float2bfloat16_rn(v);
  }
}

template <int kNTiles, int kBatchSteps, bool kL2Hint>
__global__ void __launch_bounds__(kThreads, 2)
    small_m_registers_kernel(const bf16* __restrict__ x, int rows, const bf16* __restrict__ w, int n, int k,
                             int steps_per_split, const bf16* residual, bf16* y, unsigned* counters, float* partials) {
  using B = Batch<kBatchSteps>;
  constexpr int kXStages = 3;  // one being read, one landing, one free: one barrier per batch
  constexpr int kStageElems = kNTiles * 8 * B::kXStride;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int merging;
  bf16* xs = reinterpret_cast<bf16*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
  const int col0 = blockIdx.x * kSmallMTileCols + warp * 16;  // this warp's first W row
  const auto* wa = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(col0 + g, n - 1)) * k);
  const auto* wb = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(min(col0 + g + 8, n - 1)) * k);
  const KRange kr = k_range<kBatchSteps>(k, steps_per_split);

  float c[kNTiles][4];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
  uint4 wa0[kBatchSteps], wb0[kBatchSteps], wa1[kBatchSteps], wb1[kBatchSteps];
  auto load_w = [&](uint4(&va)[kBatchSteps], uint4(&vb)[kBatchSteps], int batch) {
#pragma unroll
    for (int u = 0; u < kBatchSteps; ++u) {
      const int s = kr.begin + batch * kBatchSteps + u;
      const bool live = s < kr.end;
      const int v = s * 4 + tig;  // 16-byte vector index within the W row
      if constexpr (kL2Hint) {
        va[u] = live ? ldg_stream_l2_256(wa + v) : make_uint4(0, 0, 0, 0);
        vb[u] = live ? ldg_stream_l2_256(wb + v) : make_uint4(0, 0, 0, 0);
      } else {
        va[u] = live ? ldg_stream(wa + v) : make_uint4(0, 0, 0, 0);
        vb[u] = live ? ldg_stream(wb + v) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  // One cp.async group per call (possibly empty): "all but the newest group" is the batch next up.
  auto stage = [&](int batch) {
    if (batch < kr.batches) {
      stage_x<kNTiles, kBatchSteps>(xs + (batch % kXStages) * kStageElems, x, rows, k,
                                    (kr.begin + batch * kBatchSteps) * kStepK, kr.end * kStepK);
    }
    cp_async_commit();
  };
  auto multiply = [&](const uint4(&va)[kBatchSteps], const uint4(&vb)[kBatchSteps], int batch) {
    const bf16* xb = xs + (batch % kXStages) * kStageElems + g * B::kXStride + tig * 8;
#pragma unroll
    for (int u = 0; u < kBatchSteps; ++u) multiply_step<kNTiles, kBatchSteps>(c, va[u], vb[u], xb + u * kStepK);
  };

  load_w(wa0, wb0, 0);  // weights depend on no earlier kernel: before the wait
  pdl_wait();
  pdl_trigger();
  stage(0);
  for (int b = 0; b < kr.batches; b += 2) {
    load_w(wa1, wb1, b + 1);
    stage(b + 1);
    cp_async_wait<1>();
    __syncthreads();
    multiply(wa0, wb0, b);
    if (b + 1 >= kr.batches) break;
    load_w(wa0, wb0, b + 2);
    stage(b + 2);
    cp_async_wait<1>();
    __syncthreads();
    multiply(wa1, wb1, b + 1);
  }
  cp_async_wait<0>();
  finish<kNTiles>(c, rows, n, col0, residual, y, counters, partials, &merging);
}

enum class Ring { cp_async, bulk };

template <int kNTiles, int kBatchSteps, int kStages, Ring kRing, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    small_m_ring_kernel(const bf16* __restrict__ x, int rows, const bf16* __restrict__ w, int n, int k,
                        int steps_per_split, const bf16* residual, bf16* y, unsigned* counters, float* partials) {
  using B = Batch<kBatchSteps>;
  constexpr int kXRows = kNTiles * 8;
  constexpr int kRowBytes = kBatchSteps * kStepK * 2;  // one W row's piece of a batch
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ int merging;
  __shared__ std::uint64_t bars[kStages][kWarps];  // bulk ring: one per warp and stage
  unsigned char* w_ring = smem_raw;
  auto* x_ring = reinterpret_cast<bf16*>(smem_raw + kStages * B::kWBytes);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
  const int col0 = blockIdx.x * kSmallMTileCols + warp * 16;
  const bf16* w_row_a = w + static_cast<std::int64_t>(min(col0 + g, n - 1)) * k;
  const bf16* w_row_b = w + static_cast<std::int64_t>(min(col0 + g + 8, n - 1)) * k;
  const KRange kr = k_range<kBatchSteps>(k, steps_per_split);

  // Where lane reads W step u (row g: half 0, row g + 8: half 1) of a stage. cp.async ring: a
  // private 16-byte slot per lane. Bulk ring: the warp's 16 rows of the batch, row-major.
  auto w_piece = [&](int stage, int u, int half) -> const unsigned char* {
    if constexpr (kRing == Ring::cp_async) {
      return w_ring + stage * B::kWBytes + ((u * 2 + half) * kThreads + threadIdx.x) * 16;
    } else {
      return w_ring + stage * B::kWBytes + (warp * 16 + g + half * 8) * kRowBytes + u * 64 + tig * 16;
    }
  };
  auto issue_w = [&](int batch) {
    if (batch >= kr.batches) return;
    const int stage = batch % kStages;
    const int s0 = kr.begin + batch * kBatchSteps;
    if constexpr (kRing == Ring::cp_async) {
#pragma unroll
      for (int u = 0; u < kBatchSteps; ++u) {
        const int s = s0 + u;
        const bool live = s < kr.end;
        const int off = live ? s * kStepK + tig * 8 : 0;
        cp_async16_l2_256(const_cast<unsigned char*>(w_piece(stage, u, 0)), w_row_a + off, live ? 16 : 0);
        cp_async16_l2_256(const_cast<unsigned char*>(w_piece(stage, u, 1)), w_row_b + off, live ? 16 : 0);
      }
    } else {
      // Every lane has read this stage's previous batch (its values fed the mmas before this).
      __syncwarp();
      const unsigned bytes = static_cast<unsigned>(min(kBatchSteps, kr.end - s0)) * kStepK * 2;
      if (lane == 0) mbar_arrive_expect_tx(&bars[stage][warp], 16 * bytes);
      __syncwarp();
      if (lane < 16) {
        const bf16* src = w + static_cast<std::int64_t>(min(col0 + lane, n - 1)) * k + s0 * kStepK;
        bulk_copy_to_shared(w_ring + stage * B::kWBytes + (warp * 16 + lane) * kRowBytes, src, bytes,
                            &bars[stage][warp]);
      }
    }
  };
  auto issue_x = [&](int batch) {
    if (batch >= kr.batches) return;
    stage_x<kNTiles, kBatchSteps>(x_ring + (batch % kStages) * (kXRows * B::kXStride), x, rows, k,
                                  (kr.begin + batch * kBatchSteps) * kStepK, kr.end * kStepK);
  };

  if constexpr (kRing == Ring::bulk) {
    if (lane == 0) {
      for (int s = 0; s < kStages; ++s) mbar_init(&bars[s][warp], 1);
      mbar_init_fence();
    }
    __syncwarp();
  }
  float c[kNTiles][4];
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;

    // cp.async groups, in commit order: (cp.async ring) W of batches 0..kStages-2, one each, before
    // the wait (weights depend on no earlier kernel); x of those batches, one group after it; then
    // one group per iteration with W (cp.async ring) and x of batch b + kStages - 1 (empty past the
    // last batch). The bulk ring's W is issued at the same points but counted on its mbarriers.
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) {
    issue_w(b);
    if constexpr (kRing == Ring::cp_async) cp_async_commit();
  }
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int b = 0; b < kStages - 1; ++b) issue_x(b);
  cp_async_commit();

  for (int b = 0; b < kr.batches; ++b) {
    const int stage = b % kStages;
    // Batch b's group is complete once at most min(b, kStages - 2) newer ones are pending.
    cp_async_wait_upto<kStages - 2>(b);
    if constexpr (kRing == Ring::bulk) mbar_wait_parity(&bars[stage][warp], (b / kStages) & 1);
    __syncthreads();  // x of batch b from every thread; stage (b - 1) % kStages free for refilling
    issue_w(b + kStages - 1);
    issue_x(b + kStages - 1);
    cp_async_commit();
    const bf16* xb = x_ring + stage * (kXRows * B::kXStride) + g * B::kXStride + tig * 8;
    const int live_steps = kr.end - (kr.begin + b * kBatchSteps);
#pragma unroll
    for (int u = 0; u < kBatchSteps; ++u) {
      if (u >= live_steps) break;  // past the split: the bulk ring left those bytes stale
      const uint4 va = *reinterpret_cast<const uint4*>(w_piece(stage, u, 0));
      const uint4 vb = *reinterpret_cast<const uint4*>(w_piece(stage, u, 1));
      multiply_step<kNTiles, kBatchSteps>(c, va, vb, xb + u * kStepK);
    }
  }
  cp_async_wait<0>();
  finish<kNTiles>(c, rows, n, col0, residual, y, counters, partials, &merging);
}

int steps_per_split(int k, int split) {
  const int groups = k / kStepK / kGroupSteps + (k / kStepK % kGroupSteps != 0);
  return ((groups + split - 1) / split) * kGroupSteps;
}

// Shared-memory stages that let kMinBlocks blocks share an SM (227 KB), at most 8.
template <int kNTiles, int kBatchSteps, int kMinBlocks>
constexpr int ring_stages() {
  using B = Batch<kBatchSteps>;
  constexpr int budget = (kMinBlocks == 1 ? 220 : 112) * 1024;
  constexpr int fit = budget / (B::kWBytes + B::template x_bytes<kNTiles>());
  return fit > 8 ? 8 : fit;
}

using KernelFn = void (*)(const bf16*, int, const bf16*, int, int, int, const bf16*, bf16*, unsigned*, float*);

struct Launchable {
  KernelFn kernel;
  std::size_t smem;
};

// The variant's kernel for kNTiles n-tiles, with its dynamic shared memory allowed (once per
// device and kernel). The rings ask for all of the shared memory, so two ring blocks fit. The
// register variants ask for the least that holds their two blocks: at the largest carveout (L1
// ~28 KB) they ran 1.5x slower than at the driver's default, since their W loads hold L1 space while
// in flight (bench/NOTES.md, session 5); at the least they are 10-20% faster (session 12).
template <int kNTiles>
Launchable variant_kernel(int variant) {
  constexpr int kRegSteps = kNTiles <= 4 ? 4 : 2;  // registers: more accumulators, fewer W in flight
  Launchable l{};
  auto ring = [&](auto steps, auto min_blocks, auto bulk) {
    constexpr int kSteps = decltype(steps)::value, kBlocks = decltype(min_blocks)::value;
    constexpr int kStages = ring_stages<kNTiles, kSteps, kBlocks>();
    static_assert(kStages >= 3, "a pipeline needs three stages");
    constexpr Ring kRing = decltype(bulk)::value ? Ring::bulk : Ring::cp_async;
    l.kernel = small_m_ring_kernel<kNTiles, kSteps, kStages, kRing, kBlocks>;
    l.smem = static_cast<std::size_t>(kStages) * (Batch<kSteps>::kWBytes + Batch<kSteps>::template x_bytes<kNTiles>());
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  using Bulk = std::true_type;
  using CpAsync = std::false_type;
  switch (variant) {
    case 0:
      l = {small_m_registers_kernel<kNTiles, kRegSteps, false>,
           3 * static_cast<std::size_t>(Batch<kRegSteps>::template x_bytes<kNTiles>())};
      break;
    case 1:
      l = {small_m_registers_kernel<kNTiles, kRegSteps, true>,
           3 * static_cast<std::size_t>(Batch<kRegSteps>::template x_bytes<kNTiles>())};
      break;
    case 2:
      ring(I2{}, I2{}, CpAsync{});
      break;
    case 3:
      ring(I2{}, I2{}, Bulk{});
      break;
    default:
      ring(I4{}, I1{}, Bulk{});
      break;
  }
  static std::array<std::array<std::atomic<bool>, kSmallMVariants>, 64> configured{};
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  // The bulk rings need compute capability 9.0; a ring larger than a block's shared memory cannot run.
  if ((variant >= 3 && !sm90_features_on(device)) ||
      l.smem > static_cast<std::size_t>(shared_memory_optin_bytes(device))) {
    return Launchable{};
  }
  if (device < 0 || device >= static_cast<int>(configured.size()) || !configured[device][variant].load()) {
    GPUSCOUT_CUDA_CHECK(
        cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(l.smem)));
    int carveout = cudaSharedmemCarveoutMaxShared;
    if (variant <= 1) {
      int smem_per_sm = 0;
      GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
      const std::size_t needed = 2 * (l.smem + 1024);  // two blocks, each with its 1 KB the system reserves
      carveout = static_cast<int>(std::min<std::size_t>(
          100, (needed * 100 + static_cast<std::size_t>(smem_per_sm) - 1) / static_cast<std::size_t>(smem_per_sm)));
    }
    GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
    if (device >= 0 && device < static_cast<int>(configured.size())) configured[device][variant].store(true);
  }
  return l;
}

Launchable launchable(int rows, int variant) {
  Launchable l{};
  dispatch_int<1, kSmallMMaxRows / 8>((rows + 7) / 8,
                                      [&](auto tiles) { l = variant_kernel<decltype(tiles)::value>(variant); });
  return l;
}

}  // namespace

const char* small_m_variant_name(int variant) {
  static const char* const names[kSmallMVariants] = {"registers", "registers+L2::256B", "cp.async ring", "bulk ring",
                                                     "bulk ring 1 block/SM"};
  return variant >= 0 && variant < kSmallMVariants ? names[variant] : "?";
}

int small_m_gemm_blocks_per_sm(int rows, int variant) {
  if (rows < 1 || rows > kSmallMMaxRows || variant < 0 || variant >= kSmallMVariants) return 0;
  const Launchable l = launchable(rows, variant);
  if (l.kernel == nullptr) return 0;
  int blocks = 0;
  GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, l.kernel, kThreads, l.smem));
  return blocks;
}

int small_m_gemm_effective_split(int k, int split) {
  if (k <= 0 || k % kStepK != 0 || split < 1) return 0;
  const int sps = steps_per_split(k, split);
  return (k / kStepK + sps - 1) / sps;
}

const char* check_small_m_gemm(const bf16* x, int rows, const bf16* w, int n, int k, int split,
                               const SmallMWorkspace& ws) {
  if (rows < 1 || rows > kSmallMMaxRows) return "rows outside 1..64";
  if (n < 1) return "no output columns";
  if (k <= 0 || k % kStepK != 0) return "k not a positive multiple of 32";
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0 || reinterpret_cast<std::uintptr_t>(w) % 16 != 0) {
    return "x or W not 16-byte aligned";
  }
  if (split < 1) return "split below 1";
  const int splits = small_m_gemm_effective_split(k, split);
  if (splits > 1) {
    const int tiles = (n + kSmallMTileCols - 1) / kSmallMTileCols;
    if (ws.counters == nullptr || tiles > ws.counter_count) return "too few split-k counters";
    if (ws.partials == nullptr || reinterpret_cast<std::uintptr_t>(ws.partials) % 16 != 0 ||
        static_cast<std::size_t>(splits) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(n) >
            ws.partial_floats) {
      return "split-k partials exceed the workspace";
    }
  }
  return nullptr;
}

bool launch_small_m_gemm(const bf16* x, int rows, const bf16* w, int n, int k, int split, const bf16* residual, bf16* y,
                         const SmallMWorkspace& ws, cudaStream_t stream, int variant) {
  if (variant < 0 || variant >= kSmallMVariants) return false;
  if (check_small_m_gemm(x, rows, w, n, k, split, ws) != nullptr) return false;
  const Launchable l = launchable(rows, variant);
  if (l.kernel == nullptr) return false;  // not on this GPU
  const int tiles = (n + kSmallMTileCols - 1) / kSmallMTileCols;
  launch_kernel(l.kernel, dim3(tiles, small_m_gemm_effective_split(k, split)), kThreads, l.smem, stream, x, rows, w, n,
                k, steps_per_split(k, split), residual, y, ws.counters, ws.partials);
  return true;
}

}  // namespace gpuscout::cuda::infer
