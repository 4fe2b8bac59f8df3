// The MLP's gate/up GEMM with SwiGLU in its epilogue (sm_90a): act[r, i] = silu(x W_gate^T)[r, i] *
// (x W_up^T)[r, i], W_gate_up [2 ffn, k] holding the gate rows then the up rows, as the engine stores it.
// cuBLASLt has no SiLU epilogue, so the unfused path writes the whole [rows, 2 ffn] product and a
// separate kernel reads it back (at 16384 rows 0.94 GB each way per layer, bench/NOTES.md session 21).
// Here each tile's gate and up columns meet in the same thread's accumulators and only act is written.
//
// Design: cuBLASLt's tile shape (128 x 256 of the product per block, 64-wide k steps), written out
// as CUTLASS's warp-specialized "cooperative" kernel. A persistent grid, one 384-thread block per SM.
// Warpgroup 0 copies: one thread issues tensor copies of each k step of a tile, x [128 rows] and W's
// 128 gate rows and the 128 matching up rows (48 KB, 128-byte swizzle), into a ring of stages
// guarded by full/empty mbarriers. Warpgroups 1 and 2 each compute 64 rows of every tile, one
// m64n256k16 wgmma per k16 step (both operands K-major from shared memory), so each thread's
// accumulators hold its gate columns and their up partners; by default (the deferred epilogue, see
// the kernel) act is written while the next tile's MMAs run. Tiles go out in groups of
// kGroupM row tiles, so the blocks in flight share x and W in L2. (A ping-pong schedule, each MMA
// warpgroup on alternate 128 x 128 tiles with its epilogue under the other's main loop, was 7-10%
// slower at prefill sizes: it moves a third more bytes per FLOP; bench/NOTES.md, session 21.)
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

constexpr int kBM = 128;                                // rows of x per tile
constexpr int kOutputs = 128;                           // per tile: 128 gate and 128 up columns of W
constexpr int kBK = 64;                                 // k per stage: one 128-byte swizzle row
constexpr int kThreads = 384;                           // a copy warpgroup and two MMA warpgroups
constexpr int kABytes = kBM * kBK * 2;                  // 16 KB
constexpr int kBHalfBytes = kOutputs * kBK * 2;         // 16 KB: the gate rows, or the up rows
constexpr int kStageBytes = kABytes + 2 * kBHalfBytes;  // 48 KB
// The deferred epilogue's staging: per MMA warpgroup its 64 rows of gate and up as BF16, each row
// padded by 16 bytes so that the accumulator layout's stores (8 rows by 4 lanes) hit 32 banks.
constexpr int kStagingRowBytes = 2 * kOutputs * 2 + 16;    // 528
constexpr int kStagingBytes = 64 * kStagingRowBytes;       // 33 KB
constexpr int kChunksPerThread = 64 * kOutputs / 8 / 128;  // 8 outputs a chunk: 8 chunks per thread a tile
// Stages: four of 48 KB (192 KB; five would not fit in 227 KB), or three beside the staging.
template <bool kDeferred>
constexpr int kStages = kDeferred ? 3 : 4;
template <bool kDeferred>
constexpr int kSmemBytes = kStages<kDeferred>* kStageBytes + (kDeferred ? 2 * kStagingBytes : 0) + 1024;
constexpr int kGroupM = 16;                              // row tiles per rasterization group
constexpr int kCopyRegisters = 40, kMmaRegisters = 232;  // 128 x 40 + 256 x 232 <= 64 K

struct TileOrder {
  int tiles_m, tiles_n;
  // Tile `tile`'s first row and output tile: row tiles fastest within a group of kGroupM, so the
  // ~SM-count tiles in flight span kGroupM row tiles and a few output tiles.
  __device__ void coords(int tile, int& m0, int& n_tile) const {
    const int per_group = kGroupM * tiles_n;
    const int group = tile / per_group, in_group = tile % per_group;
    const int first_m = group * kGroupM;
    const int group_m = min(tiles_m - first_m, kGroupM);
    m0 = (first_m + in_group % group_m) * kBM;
    n_tile = in_group / group_m;
  }
};

__device__ __forceinline__ float silu_fast(float g) {
  return __fdividef(g, 1.0f + __expf(-g));
}

// One warpgroup's 64 x N accumulator (N / 2 gate columns, then as many up columns) to act. Layout
// (m64nN): element 4c + e is row row0 + warp * 16 + lane / 4 (+ 8 for e >= 2), column 8c + 2 (lane %
// 4) + (e & 1); gate column i's up partner is column N / 2 + i, N / 4 elements on.
template <int kRegs>
__device__ __forceinline__ void store_swiglu(const float (&acc)[kRegs], bf16* __restrict__ out, int row0, int rows,
                                             int ffn, int col0) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int row_a = row0 + warp * 16 + lane / 4, row_b = row_a + 8;
#pragma unroll
  for (int c = 0; c < kRegs / 8; ++c) {
    const int col = col0 + c * 8 + (lane % 4) * 2;
    const float* g = &acc[4 * c];
    const float* u = &acc[4 * c + kRegs / 2];
    if (row_a < rows) {
      *reinterpret_cast<__nv_bfloat162*>(out + static_cast<std::int64_t>(row_a) * ffn + col) =
          __floats2bfloat162_rn(silu_fast(g[0]) * u[0], silu_fast(g[1]) * u[1]);
    }
    if (row_b < rows) {
      *reinterpret_cast<__nv_bfloat162*>(out + static_cast<std::int64_t>(row_b) * ffn + col) =
          __floats2bfloat162_rn(silu_fast(g[2]) * u[2], silu_fast(g[3]) * u[3]);
    }
  }
}

// kDeferred: a tile's epilogue runs under the next tile's main loop. At the end of a tile each MMA
// warpgroup rounds its gate and up accumulators to BF16 into its staging rows (as the unfused path
// rounds its product) and frees them; during the first k steps of the next tile, while that step's
// MMAs run, each thread turns one 8-output chunk of the staged rows into act (SiLU * up, one 16-byte
// store; a warp writes 2 x 256 contiguous bytes). Otherwise the epilogue computes from the
// accumulators while the tensor cores wait (about 5% of a tile: 256 MUFU operations per thread).
template <bool kDeferred>
__global__ void __launch_bounds__(kThreads, 1)
    gate_up_swiglu_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                          bf16* __restrict__ out, int rows, int ffn, int k_steps, TileOrder order) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kStages = infer::kStages<kDeferred>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  unsigned char* stages = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], 2);  // both MMA warpgroups release each stage use
    }
    mbar_init_fence();
  }
  __syncthreads();
  const int tiles = order.tiles_m * order.tiles_n;

  if (wg == 0) {
    release_registers<kCopyRegisters>();
    if (t != 0) return;
    int it = 0;  // stage uses, in the block's tile order
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m0, n_tile;
      order.coords(tile, m0, n_tile);
      const int o0 = n_tile * kOutputs;
      for (int ks = 0; ks < k_steps; ++ks, ++it) {
        const int s = it % kStages;
        if (it >= kStages) mbar_wait_parity(&empty[s], ((it / kStages) - 1) & 1);
        unsigned char* stage = stages + s * kStageBytes;
        mbar_arrive_expect_tx(&full[s], kStageBytes);
        tma_load_2d(stage, &x_map, ks * kBK, m0, &full[s]);
        tma_load_2d(stage + kABytes, &w_map, ks * kBK, o0, &full[s]);
        tma_load_2d(stage + kABytes + kBHalfBytes, &w_map, ks * kBK, ffn + o0, &full[s]);
      }
    }
    return;
  }

  claim_registers<kMmaRegisters>();
  const int half = wg - 1;  // this warpgroup's 64 rows of each tile
  const std::uint32_t stages_addr = smem_addr(stages);
  float acc[128];  // 64 x 256: gate columns 0-127, up columns 128-255
  // kDeferred: the staged tile's place and the chunks of it this thread has still to write.
  unsigned char* staging = stages + kStages * kStageBytes + half * kStagingBytes;
  int pending = 0, staged_m0 = 0, staged_o0 = 0;
  auto epilogue_chunk = [&] {
    const int id = (kChunksPerThread - pending) * 128 + t;
    const int r = id / (kOutputs / 8), c8 = id % (kOutputs / 8);
    const int row = staged_m0 + half * 64 + r;
    --pending;
    if (row >= rows) return;
    const unsigned char* src = staging + r * kStagingRowBytes + c8 * 16;
    float g[8], u[8], o[8];
    unpack8(*reinterpret_cast<const uint4*>(src), g);
    unpack8(*reinterpret_cast<const uint4*>(src + kOutputs * 2), u);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = silu_fast(g[e]) * u[e];
    store8(out + static_cast<std::int64_t>(row) * ffn + staged_o0 + c8 * 8, o);
  };
  auto warpgroup_sync = [&] { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + half) : "memory"); };
  int it = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    for (int ks = 0; ks < k_steps; ++ks, ++it) {
      const int s = it % kStages;
      mbar_wait_parity(&full[s], (it / kStages) & 1);
      const std::uint32_t stage = stages_addr + s * kStageBytes;
      const std::uint32_t a = stage + half * 64 * 128, b = stage + kABytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wgmma_m64n256k16_ss(acc, smem_desc(a + kk * 32, 16, 1024), smem_desc(b + kk * 32, 16, 1024), ks > 0 || kk > 0);
      }
      wgmma_commit();
      if constexpr (kDeferred) {
        if (pending > 0) epilogue_chunk();  // under this step's MMAs
      }
      // The MMAs of the step before are done: this warpgroup is through with their stage.
      wgmma_wait<1>();
      if (ks > 0 && t == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    }
    wgmma_wait<0>();
    fence_registers(acc);
    if (t == 0) mbar_arrive(&empty[(it - 1) % kStages]);
    int m0, n_tile;
    order.coords(tile, m0, n_tile);
    if constexpr (kDeferred) {
      while (pending > 0) epilogue_chunk();  // a tile of fewer k steps than chunks
      warpgroup_sync();                      // the staging rows are read: overwrite them
      const int warp = t / 32, lane = t % 32, r = warp * 16 + lane / 4;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        unsigned char* dst = staging + r * kStagingRowBytes + (c * 8 + (lane % 4) * 2) * 2;
        *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(acc[4 * c], acc[4 * c + 1]);
        *reinterpret_cast<__nv_bfloat162*>(dst + 8 * kStagingRowBytes) =
            __floats2bfloat162_rn(acc[4 * c + 2], acc[4 * c + 3]);
      }
      warpgroup_sync();  // staged: every thread's chunks may read any row
      pending = kChunksPerThread;
      staged_m0 = m0;
      staged_o0 = n_tile * kOutputs;
    } else {
      store_swiglu(acc, out, m0 + half * 64, rows, ffn, n_tile * kOutputs);
    }
  }
  if constexpr (kDeferred) {
    while (pending > 0) epilogue_chunk();
  }
#else
  __trap();  // built for sm_90a only; the host side launches it nowhere else
#endif
}

}  // namespace

bool gate_up_swiglu_supported(int in, int ffn, int cc_major, int cc_minor) {
  return cc_major == 9 && cc_minor == 0 && in > 0 && in % kBK == 0 && ffn > 0 && ffn % kOutputs == 0;
}

int gate_up_swiglu_min_rows(int ffn, int sms) {
  const int output_tiles = std::max(ffn / kOutputs, 1);
  const int row_tiles = (kSwigluMinWaves * sms + output_tiles - 1) / output_tiles;
  return std::max(row_tiles, 1) * kBM;
}

bool gate_up_swiglu_fits(int device) {
  return std::max(kSmemBytes<true>, kSmemBytes<false>) <= shared_memory_optin_bytes(device);
}

bool gate_up_swiglu_by_default() {
  static const bool on = env_switch_on("GPUSCOUT_SWIGLU_GEMM");
  return on;
}

SwigluEpilogue swiglu_epilogue_by_default() {
  static const SwigluEpilogue e = [] {
    const char* v = std::getenv("GPUSCOUT_SWIGLU_EPILOGUE");
    return v != nullptr && std::strcmp(v, "in-place") == 0 ? SwigluEpilogue::in_place : SwigluEpilogue::deferred;
  }();
  return e;
}

bool launch_gate_up_swiglu(const bf16* x, int rows, int in, const bf16* w_gate_up, int ffn, bf16* out,
                           cudaStream_t stream, SwigluEpilogue epilogue) {
  int device = 0, major = 0, minor = 0, sms = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (!gate_up_swiglu_supported(in, ffn, major, minor) || !gate_up_swiglu_fits(device)) return false;
  // Tensor copies need 16-byte-aligned bases (the engine's buffers are cudaMalloc'd: 256 bytes).
  // (The deferred epilogue's 16-byte stores need the same of out.)
  if ((reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(w_gate_up) |
       reinterpret_cast<std::uintptr_t>(out)) %
          16 !=
      0) {
    return false;
  }
  if (rows <= 0) return true;
  GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Boxes of one k step (64 values: a 128-byte swizzle row) by a tile's rows of x, or of W's gate or up rows.
  const CUtensorMap x_map = bf16_tensor_map(x, in, rows, kBK, kBM, "the gate/up GEMM's x");
  const CUtensorMap w_map = bf16_tensor_map(w_gate_up, in, 2ull * ffn, kBK, kOutputs, "the gate/up GEMM's W");
  const TileOrder order{(rows + kBM - 1) / kBM, ffn / kOutputs};
  const int grid = std::min(order.tiles_m * order.tiles_n, sms);
  if (epilogue == SwigluEpilogue::deferred) {
    GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(gate_up_swiglu_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             kSmemBytes<true>));
    gate_up_swiglu_kernel<true>
        <<<grid, kThreads, kSmemBytes<true>, stream>>>(x_map, w_map, out, rows, ffn, in / kBK, order);
  } else {
    GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(gate_up_swiglu_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             kSmemBytes<false>));
    gate_up_swiglu_kernel<false>
        <<<grid, kThreads, kSmemBytes<false>, stream>>>(x_map, w_map, out, rows, ffn, in / kBK, order);
  }
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpuscout::cuda::infer
