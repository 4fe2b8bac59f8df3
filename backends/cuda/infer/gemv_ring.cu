// One-row GEMV (y = W x, batch-1 decode) streaming W through a shared-memory ring per SM.
//
// One block per SM streams a contiguous span of n / grid output rows (one span of W); the n mod grid
// rows left over go in small chunks to the blocks that claim them first from an atomic counter. Its
// producer warp (one thread) copies its rows in pieces of at most kPieceBytes (a segment of one row)
// into a ring of kSlots slots with cp.async.bulk; the kWarps consumer warps take piece p with warp
// p % kWarps, dot it with x (staged in shared memory) and add it to the row's sum. The producer
// starts before griddepcontrol.wait (W depends on no earlier kernel), so under programmatic launch
// the first 128 KB per SM are on their way while the kernel before it (an RMSNorm, the attention,
// SiLU) still runs.
//
// Why this shape (session 8, bench/probe/fused_gemv_probe.cu, one H200): warps loading W into their
// own registers streamed the Llama-3.1-8B layer weights at 2.2-3.6 TB/s (bandwidth grew with warps,
// not with loads in flight per lane); a ring whose pieces the whole block consumed one at a time at
// 3.5 TB/s (session 7's stream GEMV, with ~9 us of fixed start per call); a ring whose pieces go one
// per warp at 4.5 TB/s. As separate one-row GEMMs (bench/NOTES.md) it beat the warp-per-row skinny
// kernel at all five Llama-3.1-8B shapes (qkv 16.4 against 18.8 us, LM head 237 against 244) and
// cuBLASLt at three; in three same-call A/B pairs the batch-1 step went from 4.69-4.73 to 4.59-4.67 ms.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kWarps = 16;                    // consumer warps
constexpr int kThreads = kWarps * 32;         // consumer threads
constexpr int kBlockThreads = kThreads + 32;  // plus the producer warp
constexpr int kPieceBytes = 8192;
// A multiple of kWarps: slot p % kSlots is then always consumed by warp p % kWarps, in order, so a
// warp never waits on a slot whose mbarrier is two phases behind the piece it wants.
constexpr int kSlots = 16;
constexpr std::size_t kRingBytes = static_cast<std::size_t>(kSlots) * kPieceBytes;

// Why the rows left over are claimed (bench/NOTES.md, session 11, one H200): with all of them
// assigned at launch, n = 4096 gives 4 blocks 32 rows and 128 blocks 31, and the GEMV ends with the
// 32-row blocks; claimed by the blocks that get there first, the batch-1 step went from 4.33 to
// 4.16-4.20 ms (seven same-call pairs over three calls). Handing out more of W that way (a quarter to
// all of it, in 8-64 KB chunks) made the ring slower alone (gate_up 58 -> 64-92 us), with claims
// fetched one or three ahead alike.
constexpr int kSmallChunkBytes = 16 * 1024;
constexpr int kMaxChunkRows = 64;
// A small chunk's row sums live in one of kChunkSlots tables, reused every kChunkSlots chunks (the
// first chunk has its own). Piece q is fully consumed (sums added, the chunk's output written, its
// table cleared) before piece q + 32 is published: the producer publishes q + 32 only once q + 16's
// slot is released, by the warp that consumed q before it. A chunk has at least one piece, so
// kChunkSlots - 1 >= 32 chunks lie between a chunk's last piece and the first of the next chunk
// using its table.
constexpr int kChunkSlots = 40;

struct ChunkPlan {
  int chunk_rows = 1;  // rows per small chunk
  int first_rows = 1;  // rows of each block's own span (its first chunk)
  int grid = 1;
};

ChunkPlan plan_chunks(int n, int row_bytes, int sms) {
  ChunkPlan plan;
  plan.chunk_rows = std::clamp(kSmallChunkBytes / row_bytes, 1, kMaxChunkRows);
  plan.grid = std::min(sms, n);
  plan.first_rows = n / plan.grid;
  return plan;
}

// Claim counters, one per launch in rotation: counter s is used again kClaimCounters launches later on
// the device, long after the grid that used it reset it (a grid launches once the one before it
// passed its wait, i.e. once the one before *that* has finished). Every block claims until it gets
// a chunk number past the end, so a grid makes small chunks + grid claims, and the claim that gets
// the last number resets the counter: no block waits on a count of finished blocks at its end.
constexpr int kClaimCounters = 16;
__device__ unsigned g_ring_claims[kClaimCounters];

__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

// Shared memory (all dynamic: the opt-in limit is set for the dynamic part alone): the ring, its
// full/empty barriers, the norm's per-warp sums, x (k BF16), the norm's weights (k BF16, with a
// norm), each slot's piece (chunk, index), the chunk tables' row sums and pieces left.
std::size_t smem_bytes(int k, const ChunkPlan& plan, bool norm) {
  return kRingBytes + 2 * kSlots * sizeof(std::uint64_t) + kWarps * sizeof(float) +
         (norm ? 2 : 1) * static_cast<std::size_t>(k) * sizeof(bf16) + kSlots * sizeof(int2) +
         (static_cast<std::size_t>(kChunkSlots) * plan.chunk_rows + plan.first_rows) * sizeof(float) +
         (kChunkSlots + 1) * sizeof(int);
}

// norm_weight != nullptr: x is the residual stream and the GEMV's input is RMSNorm(x) * norm_weight,
// which every block computes while it stages x (one block reduction; the norm's weights are staged
// before the wait). silu_mul: x is a gate/up row of 2k values and the input is silu(gate) * up. So
// the elementwise kernel before the GEMV goes, and with it a boundary that held back the GEMV's
// start: a kernel starts when the one before it triggers, which here is after that one's wait, so
// with an RMSNorm in between the ring could stream W only during the norm, not during the previous
// GEMM's tail (bench/NOTES.md, session 9: batch-1 step 4.53 -> 4.27-4.31 ms for the two norms).
//
// Rows go in chunks (ChunkPlan): the block's own span, then small chunks from an atomic counter,
// fetched one chunk ahead. Each chunk's sums gather in a table; the warp that adds its last piece writes
// the chunk's outputs, so outputs leave as chunks finish.
__global__ void __launch_bounds__(kBlockThreads, 1)
    ring_gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, int n, int k, const bf16* residual,
                     bf16* y, const bf16* __restrict__ norm_weight, float norm_eps, bool silu_mul, ChunkPlan plan,
                     int claim_counter) {
  extern __shared__ uint4 smem4[];
  auto* ring = reinterpret_cast<unsigned char*>(smem4);
  auto* full = reinterpret_cast<std::uint64_t*>(ring + kRingBytes);
  std::uint64_t* empty = full + kSlots;
  auto* warp_squares = reinterpret_cast<float*>(empty + kSlots);  // [kWarps]: 64 bytes, x stays 16-aligned
  auto* xs4 = reinterpret_cast<uint4*>(warp_squares + kWarps);
  uint4* gs4 = xs4 + k / 8;  // the norm's weights (with a norm)
  // Per slot: the piece's chunk (its first row) and its index in the chunk | its table << 24.
  auto* slot_piece = reinterpret_cast<int2*>(norm_weight != nullptr ? gs4 + k / 8 : gs4);
  auto* table_sum = reinterpret_cast<float*>(slot_piece + kSlots);  // table t at t * chunk_rows
  auto* table_left = reinterpret_cast<int*>(table_sum + kChunkSlots * plan.chunk_rows + plan.first_rows);
  unsigned& claims = g_ring_claims[claim_counter];
  const int row_bytes = k * static_cast<int>(sizeof(bf16));
  const int per_row = (row_bytes + kPieceBytes - 1) / kPieceBytes;
  const int chunk_rows = plan.chunk_rows;
  const int small_begin = gridDim.x * plan.first_rows;  // the first row of the small chunks
  const int small_chunks = (n - small_begin + chunk_rows - 1) / chunk_rows;
  float* own_sums = table_sum + kChunkSlots * chunk_rows;  // the block's span's table
  init_ring_barriers(full, empty, kSlots);
  __syncthreads();

  if (threadIdx.x >= kThreads) {
    if (threadIdx.x == kThreads) {
      const auto* wb = reinterpret_cast<const unsigned char*>(w);
      int p = 0;
      // Chunk c < 0 is the block's own span; c >= 0 is small chunk c, rows small_begin + c * chunk_rows.
      int chunk = -1;
      int next = static_cast<int>(atomicAdd(&claims, 1u));  // fetched one chunk ahead
      for (int smalls = 0;;) {
        const bool first = chunk < 0;
        const int row0 = first ? blockIdx.x * plan.first_rows : small_begin + chunk * chunk_rows;
        if (row0 >= n) {
          if (chunk == small_chunks + static_cast<int>(gridDim.x) - 1) claims = 0;  // the grid's last claim
          break;
        }
        const int table = first ? kChunkSlots : smalls++ % kChunkSlots;
        const int chunk_pieces = (first ? plan.first_rows : min(chunk_rows, n - row0)) * per_row;
        for (int i = 0; i < chunk_pieces; ++i, ++p) {
          const int slot = p % kSlots;
          if (p >= kSlots) mbar_wait_parity(empty + slot, ((p / kSlots) - 1) & 1);
          if (i == 0) table_left[table] = chunk_pieces;  // published by the arrive below
          slot_piece[slot] = make_int2(row0, i | (table << 24));
          const int row = row0 + i / per_row, offset = (i % per_row) * kPieceBytes;
          const unsigned bytes = static_cast<unsigned>(min(kPieceBytes, row_bytes - offset));
          mbar_arrive_expect_tx(full + slot, bytes);
          bulk_copy_to_shared(ring + slot * kPieceBytes, wb + static_cast<std::int64_t>(row) * row_bytes + offset,
                              bytes, full + slot);
        }
        chunk = next;
        if (chunk < small_chunks) next = static_cast<int>(atomicAdd(&claims, 1u));
      }
      for (int i = 0; i < kWarps; ++i, ++p) {  // one end mark per consumer warp
        const int slot = p % kSlots;
        if (p >= kSlots) mbar_wait_parity(empty + slot, ((p / kSlots) - 1) & 1);
        slot_piece[slot].x = -1;
        mbar_arrive(full + slot);
      }
    }
    return;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (norm_weight != nullptr) {  // weights: no earlier kernel writes them
    const auto* g4 = reinterpret_cast<const uint4*>(norm_weight);
    for (int v = threadIdx.x; v < k / 8; v += kThreads) gs4[v] = g4[v];
  }
  for (int i = threadIdx.x; i < kChunkSlots * chunk_rows; i += kThreads) table_sum[i] = 0.0f;
  pdl_wait();  // x (and the residual) come from the kernels before
  pdl_trigger();
  // The span's sums start from its residual, loaded beside x's staging rather than after the last
  // piece (a dependent load less at the end of the o and down projections).
  for (int i = threadIdx.x; i < plan.first_rows; i += kThreads)
    own_sums[i] = residual != nullptr ? __bfloat162float(residual[blockIdx.x * plan.first_rows + i]) : 0.0f;
  const auto* x4 = reinterpret_cast<const uint4*>(x);
  if (silu_mul) {
    for (int v = threadIdx.x; v < k / 8; v += kThreads) {
      float g[8], u[8];
      unpack8(x4[v], g);
      unpack8(x4[k / 8 + v], u);
#pragma unroll
      for (int e = 0; e < 8; ++e) g[e] = silu(g[e]) * u[e];
      xs4[v] = pack8(g);
    }
  } else if (norm_weight == nullptr) {
    for (int v = threadIdx.x; v < k / 8; v += kThreads) xs4[v] = x4[v];
  } else {
    // As rmsnorm_kernel: inv = rsqrt(mean(x^2) + eps), x * inv * weight rounded to BF16.
    float squares = 0.0f;
    for (int v = threadIdx.x; v < k / 8; v += kThreads) {
      const uint4 raw = x4[v];
      xs4[v] = raw;
      float f[8];
      unpack8(raw, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) squares = fmaf(f[e], f[e], squares);
    }
    squares = warp_sum(squares);
    if (lane == 0) warp_squares[warp] = squares;
    consumer_sync();
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) total += warp_squares[i];
    const float inv = rsqrtf(total / static_cast<float>(k) + norm_eps);
    for (int v = threadIdx.x; v < k / 8; v += kThreads) {
      float f[8], g[8];
      unpack8(xs4[v], f);
      unpack8(gs4[v], g);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = f[e] * inv * g[e];
      xs4[v] = pack8(f);
    }
  }
  consumer_sync();
  for (int p = warp;; p += kWarps) {
    const int slot = p % kSlots;
    mbar_wait_parity(full + slot, (p / kSlots) & 1);
    const int2 piece = slot_piece[slot];
    if (piece.x < 0) break;
    const int i = piece.y & 0xffffff, table = piece.y >> 24;
    const int r = i / per_row, segment = i - r * per_row;
    const int vectors = min(kPieceBytes, row_bytes - segment * kPieceBytes) / 16;
    const auto* w4 = reinterpret_cast<const uint4*>(ring + slot * kPieceBytes);
    const float partial = ring_piece_dot(w4, xs4 + segment * (kPieceBytes / 16), vectors, lane);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + slot);
    const float acc = warp_sum(partial);
    float* sums = table_sum + table * chunk_rows;
    int last = 0;
    if (lane == 0) {
      atomicAdd(sums + r, acc);
      __threadfence_block();  // the sum before the count, for the warp that sees the count reach 0
      last = atomicSub(table_left + table, 1) == 1;
    }
    if (__shfl_sync(0xffffffffu, last, 0) != 0) {
      __threadfence_block();
      const int row0 = piece.x;
      const bool own = table == kChunkSlots;  // its sums started from the residual
      const int rows_here = own ? plan.first_rows : min(chunk_rows, n - row0);
      for (int j = lane; j < rows_here; j += 32) {
        float v = sums[j];
        sums[j] = 0.0f;
        if (residual != nullptr && !own) v += __bfloat162float(residual[row0 + j]);
        y[row0 + j] = __float2bfloat16_rn(v);
      }
    }
  }
}

// The current device's SM count and the shared memory a block may opt into, which the kernel is
// allowed once per device (the launch path is also the engine's tuning loop: no attribute calls
// per launch), and the claim counter of this launch. `sms` is stored last, so a nonzero value means
// both limits are set.
struct DeviceLimits {
  int sms = 0;
  int smem_optin = 0;
  int claim_counter = 0;
};

DeviceLimits prepared_device() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> sms_of[kMaxDevices];
  static std::atomic<int> smem_optin_of[kMaxDevices];
  static std::atomic<unsigned> launches_on[kMaxDevices];
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) throw std::runtime_error("ring GEMV: device index beyond 63");
  if (sms_of[device].load() == 0) {
    int sms = 0;
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    // Below compute capability 9.0 (no bulk copies) the ring never launches: no shared memory at all.
    const int optin = sm90_features_on(device) ? shared_memory_optin_bytes(device) : 0;
    if (optin > 0) {
      GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(ring_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    }
    smem_optin_of[device].store(optin);
    sms_of[device].store(sms);
  }
  return DeviceLimits{sms_of[device].load(), smem_optin_of[device].load(),
                      static_cast<int>(launches_on[device].fetch_add(1) % kClaimCounters)};
}

}  // namespace

bool launch_ring_gemv(const bf16* x, const bf16* w, int n, int k, const bf16* residual, bf16* y, cudaStream_t stream,
                      const RingInput& input) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (n <= 0 || k <= 0 || k % 8 != 0 || !aligned(x) || !aligned(w)) return false;
  const bool norm = input.norm_weight != nullptr;
  if ((norm && !aligned(input.norm_weight)) || (norm && input.silu_mul)) return false;
  const DeviceLimits limits = prepared_device();
  const ChunkPlan plan = plan_chunks(n, k * static_cast<int>(sizeof(bf16)), limits.sms);
  const std::size_t smem = smem_bytes(k, plan, norm);
  if (smem > static_cast<std::size_t>(limits.smem_optin)) return false;
  launch_kernel(ring_gemv_kernel, plan.grid, kBlockThreads, smem, stream, x, w, n, k, residual, y, input.norm_weight,
                input.norm_eps, input.silu_mul, plan, limits.claim_counter);
  return true;
}

bool ring_gemv_by_default() {
  static const bool on = env_switch_on("GPUSCOUT_RING_GEMV");
  return on;
}

}  // namespace gpuscout::cuda::infer
