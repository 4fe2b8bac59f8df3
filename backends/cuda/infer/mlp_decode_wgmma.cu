// A decode step's whole MLP in one persistent kernel (sm_90a): y = (silu(xn W_gate^T) * (xn W_up^T))
// W_down^T (+ y), for up to kDecodeMlpMaxRows rows of xn (the normed residual stream).
//
// Why: at batch 32 the MLP is bound by streaming its weights (352 MB per layer for Llama-3.1-8B), but
// the unfused path is three kernels (cuBLASLt gate/up, SiLU * up, cuBLASLt down), and each boundary
// costs a drain, a launch and a ramp in which HBM idles; cuBLASLt's kernels do not start under
// programmatic launch (bench/NOTES.md, sessions 12 and 15). Here one grid of one block per SM stays
// resident through both GEMMs: the copy warp streams gate/up weights before the RMSNorm kernel ahead of
// it has finished, and the down projection's weights while the last gate/up tiles finish, so HBM is
// never left waiting on a kernel boundary; act is written once (0.9 MB, through L2).
//
// Both GEMMs put W on wgmma's M side and the few rows of x on N (n = 32). Work comes in units of
// 64 or 128 W rows x a range of k, taken off a queue (an atomic counter) by each block's copy warp,
// whose one thread streams a unit stage by stage (a 64-wide k step of two 64-row W tiles and x's 32
// rows: 20 KB, 128-byte swizzle, a ring of 10 stages filled by tensor copies). One MMA warpgroup
// computes a stage with m64n32k16 wgmmas into two 64 x 32 FP32 accumulators.
//   Gate/up units first: unit u is gate rows [64u, 64u + 64) and the matching up rows over all of k,
//   so each thread holds every gate value next to its up partner; gate and up are rounded to BF16 (as
//   the unfused path's product is), act = silu(gate) * up goes to global memory, and the count of
//   the down part that u falls in goes up: act's columns [64u, 64u + 64) are the down projection's k
//   step u.
//   Then down units, part by part: 128 outputs x one of `splits` parts of k. A stage's W copies go out
//   at once, its act copy once its part's count is complete, so down weights stream while the last
//   gate/up units finish. Each unit writes FP32 partials; the last of a tile's parts to finish (a
//   counter) adds them in part order (deterministic) and the residual, and writes y.
// Under PDL the gate/up weights' first stages go out before the RMSNorm kernel ahead has finished;
// xn's copies wait for it. The counters end every launch at zero. A block may wait on another's
// count, so every block must be resident at once: the grid is the SM count times the blocks that fit
// an SM, and the kernel never triggers its dependents early, so a kernel after it cannot take an SM
// before all its blocks run. A count wait that outlasts 5 s traps (a launch error, not a hang).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"
#include "wgmma_util.cuh"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kN = kDecodeMlpMaxRows;                   // x rows per stage: wgmma's n
constexpr int kBK = 64;                                 // k per stage: one 128-byte swizzle row
constexpr int kWRows = 64;                              // one wgmma's M
constexpr int kWTileBytes = kWRows * kBK * 2;           // 8 KB
constexpr int kXBytes = kN * kBK * 2;                   // 4 KB
constexpr int kStageBytes = 2 * kWTileBytes + kXBytes;  // 20 KB (a multiple of the 1024-byte swizzle atom)
// Stages per block: 10 (200 KB, one block per SM) or 5 (two blocks per SM, so one block's epilogue
// runs beside the other's main loop).
template <int kStages>
constexpr int kSmemBytes = kStages* kStageBytes + 1024;
constexpr int kThreads = 160;             // the MMA warpgroup (warps 0-3) and the copy warp (warp 4)
constexpr int kDownOutputs = 2 * kWRows;  // outputs per down unit
constexpr int kMaxSplits = 8;
constexpr std::uint64_t kSpinLimitNs = 5'000'000'000;  // a count wait this long is a bug: trap

// D (64 x 32, FP32) = A (64 x 16) B (16 x 32), both K-major in shared memory; D += when accumulate != 0.
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], std::uint64_t a, std::uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(accumulate));
#endif
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Generic-proxy stores (act) before async-proxy reads (other blocks' tensor copies) of global memory.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

struct Params {
  bf16* act;           // [rows, ffn]
  bf16* y;             // [rows, hidden]: the residual stream, added to unless !accumulate
  float* partials;     // [splits][kN][hidden]
  unsigned* counters;  // see the Counter offsets
  int rows, hidden, ffn;
  int gate_up_units, k1_steps;  // ffn / 64 units of hidden / 64 steps
  int down_tiles, splits, k2_steps;
  int accumulate;
};
// counters: [0] the work queue's next unit, [1] blocks done, [2, 2 + down_tiles) parts of each down
// tile done, then per down part the gate/up units done whose act columns (= the down projection's k
// steps) fall in that part.
constexpr int kQueue = 0, kDone = 1, kTileCounters = 2;

// Whether the barrier's phase of this parity has completed, without waiting.
__device__ __forceinline__ bool mbar_test_parity(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(smem_addr(bar)), "r"(parity)
               : "memory");
  return done != 0;
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void spin_until_reached(const unsigned* counter, unsigned target) {
  const std::uint64_t start = global_timer_ns();
  while (load_acquire(counter) < target) {
    __nanosleep(32);
    if (global_timer_ns() - start > kSpinLimitNs) __trap();
  }
}

template <int kStages>
__global__ void __launch_bounds__(kThreads, 10 / kStages)
    decode_mlp_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap act_map,
                      const __grid_constant__ CUtensorMap w_gate_up_map, const __grid_constant__ CUtensorMap w_down_map,
                      Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  __shared__ int stage_unit[kStages];  // the unit a stage belongs to (-1: no more work)
  __shared__ int last_part, settle_now;
  unsigned char* stages = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], 1);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const int down_units = p.down_tiles * p.splits, units = p.gate_up_units + down_units;
  unsigned* part_ready = p.counters + kTileCounters + p.down_tiles;
  auto part_first_step = [&](int part) { return part * p.k2_steps / p.splits; };
  // Unit `unit` (gate/up units first, then the down units part by part): its W rows, k steps and
  // whether x is act.
  struct Unit {
    int unit, w_row0, w_row1, first_step, steps;
    bool down;
    int tile, part;
  };
  auto describe = [&](int unit) {
    Unit d{};
    d.unit = unit;
    if (unit < p.gate_up_units) {
      d.w_row0 = unit * kWRows;
      d.w_row1 = p.ffn + unit * kWRows;
      d.first_step = 0;
      d.steps = p.k1_steps;
      d.down = false;
    } else {
      const int v = unit - p.gate_up_units;
      d.part = v / p.down_tiles;
      d.tile = v % p.down_tiles;
      d.w_row0 = d.tile * kDownOutputs;
      d.w_row1 = d.w_row0 + kWRows;
      d.first_step = part_first_step(d.part);
      d.steps = part_first_step(d.part + 1) - d.first_step;
      d.down = true;
    }
    return d;
  };

  if (warp == 4) {  // the copy warp: one thread takes units off the queue and issues every tensor copy
    if (lane != 0) return;
    int it = 0;
    // Stage uses whose W copies are issued and whose x copy waits for its input (xn: the kernel before;
    // act: every gate/up unit of its down part), oldest first. A part's readiness is read from memory
    // until it is seen once (an L2 round trip per stage would hold up the copies).
    int pending_slot[kStages], pending_step[kStages], pending_part[kStages], head = 0, pending = 0;
    bool xn_ready = false;
    unsigned parts_ready = 0;  // bit q: part q's act is written
    auto flush = [&](bool block) {
      while (pending > 0) {
        const int s = pending_slot[head], step = pending_step[head];
        unsigned char* x_dst = stages + s * kStageBytes + 2 * kWTileBytes;
        if (step < 0) {  // phase 1: xn at k step -step - 1
          if (!xn_ready) {
            if (!block) return;
            pdl_wait();
            xn_ready = true;
          }
          tma_load_2d(x_dst, &x_map, (-step - 1) * kBK, 0, &full[s]);
        } else {
          const int q = pending_part[head];
          if (!(parts_ready & (1u << q))) {
            const unsigned* counter = part_ready + q;
            const unsigned target = static_cast<unsigned>(part_first_step(q + 1) - part_first_step(q));
            if (load_acquire(counter) < target) {
              if (!block) return;
              spin_until_reached(counter, target);
            }
            fence_proxy_async_global();  // act was stored by other blocks' threads
            parts_ready |= 1u << q;
          }
          tma_load_2d(x_dst, &act_map, step * kBK, 0, &full[s]);
        }
        head = (head + 1) % kStages;
        --pending;
      }
    };
    auto next_slot = [&] {
      const int s = it % kStages;
      // The MMA warpgroup frees a stage only once the stage after it (in the same unit) has landed, so
      // the slot this use takes (it - kStages) frees only if use it - kStages + 1 has its x: with
      // kStages - 1 uses pending, that one may be among them.
      if (pending >= kStages - 1) flush(true);
      if (it >= kStages) mbar_wait_parity(&empty[s], ((it / kStages) - 1) & 1);
      ++it;
      return s;
    };
    for (int unit = atomicAdd(p.counters + kQueue, 1u); unit < units; unit = atomicAdd(p.counters + kQueue, 1u)) {
      const Unit d = describe(unit);
      const CUtensorMap* w_map = d.down ? &w_down_map : &w_gate_up_map;
      for (int ks = d.first_step; ks < d.first_step + d.steps; ++ks) {
        const int s = next_slot();
        stage_unit[s] = unit;  // published to the MMA warpgroup by the barrier's arrival
        unsigned char* stage = stages + s * kStageBytes;
        mbar_arrive_expect_tx(&full[s], kStageBytes);
        tma_load_2d(stage, w_map, ks * kBK, d.w_row0, &full[s]);
        tma_load_2d(stage + kWTileBytes, w_map, ks * kBK, d.w_row1, &full[s]);
        pending_slot[(head + pending) % kStages] = s;
        pending_step[(head + pending) % kStages] = d.down ? ks : -ks - 1;
        pending_part[(head + pending) % kStages] = d.part;
        ++pending;
        flush(false);
      }
    }
    flush(true);
    const int s = next_slot();
    stage_unit[s] = -1;
    mbar_arrive(&full[s]);
    return;
  }

  // The MMA warpgroup.
  pdl_wait();  // y (the residual) was written before the kernel ahead of this one
  const int t = threadIdx.x;
  const std::uint32_t stages_addr = smem_addr(stages);
  float acc0[16], acc1[16];
  int it = 0;
  auto warpgroup_sync = [] { asm volatile("bar.sync 1, 128;\n" ::: "memory"); };
  // Accumulator layout (m64n32): element 4c + e is W row warp * 16 + lane / 4 (+ 8 for e >= 2) and x
  // row 8c + 2 (lane % 4) + (e & 1).
  const int w_row = warp * 16 + lane / 4;
  // A unit's results are stored at its end, but the fence and the count that publish them (which wait
  // for those stores to land) are settled under the next unit's first MMAs where its first stage has
  // already landed, else at once: `owed`.
  Unit owed{};
  bool owing = false;
  auto settle = [&] {
    if (!owing) return;
    owing = false;
    if (!owed.down) {
      fence_proxy_async_global();  // act is read next by tensor copies
      warpgroup_sync();
      if (t == 0) {
        int part = 0;
        while (part + 1 < p.splits && part_first_step(part + 1) <= owed.unit) ++part;
        __threadfence();
        atomicAdd(part_ready + part, 1u);
      }
      return;
    }
    warpgroup_sync();
    if (t == 0) {
      __threadfence();
      const unsigned done = atomicAdd(p.counters + kTileCounters + owed.tile, 1u);
      last_part = done == static_cast<unsigned>(p.splits - 1);
      if (last_part) {
        p.counters[kTileCounters + owed.tile] = 0;
        __threadfence();
      }
    }
    warpgroup_sync();
    if (!last_part) return;
    // The tile's rows x 128 outputs, four at a time: parts summed in order, then the residual.
    for (int i = t; i < p.rows * kDownOutputs / 4; i += 128) {
      const int r = i / (kDownOutputs / 4), o = owed.tile * kDownOutputs + (i % (kDownOutputs / 4)) * 4;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int q = 0; q < p.splits; ++q) {
        const float4 v4 = __ldcg(
            reinterpret_cast<const float4*>(p.partials + (static_cast<std::int64_t>(q) * kN + r) * p.hidden + o));
        sum.x += v4.x;
        sum.y += v4.y;
        sum.z += v4.z;
        sum.w += v4.w;
      }
      __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(p.y + static_cast<std::int64_t>(r) * p.hidden + o);
      if (p.accumulate) {
        const float2 r0 = __bfloat1622float2(dst[0]), r1 = __bfloat1622float2(dst[1]);
        sum.x += r0.x;
        sum.y += r0.y;
        sum.z += r1.x;
        sum.w += r1.y;
      }
      dst[0] = __floats2bfloat162_rn(sum.x, sum.y);
      dst[1] = __floats2bfloat162_rn(sum.z, sum.w);
    }
  };
  while (true) {
    // The next unit's first stage may wait on what is owed (a down stage's act): settle first then.
    // One thread looks and the warpgroup follows its answer (wgmma and bar.sync need all 128 threads
    // on the same path; each looking for itself split them).
    if (owing) {
      if (t == 0) settle_now = !mbar_test_parity(&full[it % kStages], (it / kStages) & 1);
      warpgroup_sync();
      if (settle_now) settle();
    }
    mbar_wait_parity(&full[it % kStages], (it / kStages) & 1);
    const int unit = stage_unit[it % kStages];
    if (unit < 0) break;
    const Unit d = describe(unit);
    for (int ks = 0; ks < d.steps; ++ks, ++it) {
      const int s = it % kStages;
      mbar_wait_parity(&full[s], (it / kStages) & 1);
      const std::uint32_t a0 = stages_addr + s * kStageBytes, a1 = a0 + kWTileBytes, b = a0 + 2 * kWTileBytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const int accumulate = ks > 0 || kk > 0;
        wgmma_m64n32k16_ss(acc0, smem_desc(a0 + kk * 32, 16, 1024), smem_desc(b + kk * 32, 16, 1024), accumulate);
        wgmma_m64n32k16_ss(acc1, smem_desc(a1 + kk * 32, 16, 1024), smem_desc(b + kk * 32, 16, 1024), accumulate);
      }
      wgmma_commit();
      if (ks == 0) settle();  // under this step's MMAs
      wgmma_wait<1>();        // the step before's MMAs are done: release its stage
      if (ks > 0 && t == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    }
    wgmma_wait<0>();
    fence_registers(acc0);
    fence_registers(acc1);
    if (t == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    owed = d;
    owing = true;
    if (!d.down) {
      // act = silu(gate) * up for this unit's 64 columns.
#pragma unroll
      for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = 8 * c + 2 * (lane % 4) + (e & 1);
          if (r >= p.rows) continue;
          const float g = __bfloat162float(__float2bfloat16_rn(acc0[4 * c + e]));
          const float up = __bfloat162float(__float2bfloat16_rn(acc1[4 * c + e]));
          p.act[static_cast<std::int64_t>(r) * p.ffn + unit * kWRows + w_row + (e >= 2 ? 8 : 0)] =
              __float2bfloat16_rn(silu(g) * up);
        }
      }
      continue;
    }
    float* partial = p.partials + static_cast<std::int64_t>(d.part) * kN * p.hidden + d.tile * kDownOutputs;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * c + 2 * (lane % 4) + (e & 1);
        if (r >= p.rows) continue;
        const int o = w_row + (e >= 2 ? 8 : 0);
        partial[static_cast<std::int64_t>(r) * p.hidden + o] = acc0[4 * c + e];
        partial[static_cast<std::int64_t>(r) * p.hidden + kWRows + o] = acc1[4 * c + e];
      }
    }
  }
  settle();
  // The last block out leaves the queue, the part counts and its own counter at zero for the next
  // launch. Every block's copy warp is past its last queue take and part wait by then: its MMA
  // warpgroup saw the end of its work, which comes after both.
  if (t == 0 && atomicAdd(p.counters + kDone, 1u) == gridDim.x - 1) {
    p.counters[kQueue] = 0;
    p.counters[kDone] = 0;
    for (int q = 0; q < p.splits; ++q) part_ready[q] = 0;
    __threadfence();
  }
#else
  __trap();  // built for sm_90a only; the host side launches it nowhere else
#endif
}

}  // namespace

bool decode_mlp_supported(int hidden, int ffn, int cc_major, int cc_minor) {
  return cc_major == 9 && cc_minor == 0 && hidden > 0 && hidden % kDownOutputs == 0 && ffn > 0 && ffn % kWRows == 0;
}

bool decode_mlp_by_default() {
  static const bool on = [] {
    const char* v = std::getenv("GPUSCOUT_DECODE_MLP");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

std::size_t decode_mlp_partial_floats(int hidden) {
  return static_cast<std::size_t>(kMaxSplits) * kN * static_cast<std::size_t>(hidden);
}

int decode_mlp_counter_count(int hidden) {
  return kTileCounters + hidden / kDownOutputs + kMaxSplits;
}

bool launch_decode_mlp(const bf16* xn, int rows, int hidden, const bf16* w_gate_up, int ffn, const bf16* w_down,
                       bf16* act, bf16* y, bool accumulate, const DecodeMlpWorkspace& ws, cudaStream_t stream) {
  int device = 0, major = 0, minor = 0, sms = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (!decode_mlp_supported(hidden, ffn, major, minor) || rows > kN) return false;
  // Tensor copies need 16-byte-aligned bases; the reduction's 8-byte stores, 8-byte-aligned y.
  if ((reinterpret_cast<std::uintptr_t>(xn) | reinterpret_cast<std::uintptr_t>(w_gate_up) |
       reinterpret_cast<std::uintptr_t>(w_down) | reinterpret_cast<std::uintptr_t>(act) |
       reinterpret_cast<std::uintptr_t>(ws.partials)) %
              16 !=
          0 ||
      reinterpret_cast<std::uintptr_t>(y) % 8 != 0) {
    return false;
  }
  if (ws.partials == nullptr || ws.partial_floats < decode_mlp_partial_floats(hidden) || ws.counters == nullptr ||
      ws.counter_count < decode_mlp_counter_count(hidden)) {
    return false;
  }
  if (rows <= 0) return true;
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // (GPUSCOUT_DECODE_MLP_STAGES=5: two blocks per SM, for timing runs.)
  static const bool two_per_sm = [] {
    const char* v = std::getenv("GPUSCOUT_DECODE_MLP_STAGES");
    return v != nullptr && std::strcmp(v, "5") == 0;
  }();
  auto* kernel = two_per_sm ? decode_mlp_kernel<5> : decode_mlp_kernel<10>;
  const int smem = two_per_sm ? kSmemBytes<5> : kSmemBytes<10>;
  GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  if (per_sm < 1) return false;

  Params p{};
  p.act = act;
  p.y = y;
  p.partials = ws.partials;
  p.counters = ws.counters;
  p.rows = rows;
  p.hidden = hidden;
  p.ffn = ffn;
  p.gate_up_units = ffn / kWRows;
  p.k1_steps = hidden / kBK;
  p.down_tiles = hidden / kDownOutputs;
  p.k2_steps = ffn / kBK;
  p.accumulate = accumulate ? 1 : 0;
  // Every block resident at once (the grid barrier), and no more blocks than units of work.
  const int grid = std::min(sms * per_sm, std::max(p.gate_up_units, p.down_tiles));
  // Down parts: about two units per block, so that the queue's last units are short, as far as k allows.
  // (GPUSCOUT_DECODE_MLP_PARTS=N sets it, for timing runs.)
  static const int parts_asked = [] {
    const char* v = std::getenv("GPUSCOUT_DECODE_MLP_PARTS");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  p.splits = std::clamp(parts_asked > 0 ? parts_asked : (2 * grid + p.down_tiles - 1) / p.down_tiles, 1,
                        std::min(kMaxSplits, p.k2_steps));

  // Boxes of one k step by 32 rows of x or act (rows past `rows` read as zeros) or 64 rows of W.
  const CUtensorMap x_map = bf16_tensor_map(xn, hidden, rows, kBK, kN, "the decode MLP's x");
  const CUtensorMap act_map = bf16_tensor_map(act, ffn, rows, kBK, kN, "the decode MLP's act");
  const CUtensorMap w_gate_up_map =
      bf16_tensor_map(w_gate_up, hidden, 2ull * ffn, kBK, kWRows, "the decode MLP's gate/up W");
  const CUtensorMap w_down_map = bf16_tensor_map(w_down, ffn, hidden, kBK, kWRows, "the decode MLP's down W");
  launch_kernel(kernel, static_cast<unsigned>(grid), kThreads, static_cast<std::size_t>(smem), stream, x_map, act_map,
                w_gate_up_map, w_down_map, p);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpuscout::cuda::infer
