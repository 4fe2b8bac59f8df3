// One-row GEMV (y = W x, batch-1 decode) streaming W through a shared-memory ring per SM.
//
// One block per SM owns a contiguous range of output rows (one contiguous span of W). Its producer
// warp (one thread) copies that span in pieces of at most kPieceBytes (a segment of one row) into a
// ring of kSlots slots with cp.async.bulk; the kWarps consumer warps take piece p with warp
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
#include <cstdlib>
#include <cstring>
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

__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

// Shared memory (all dynamic: the opt-in limit is set for the dynamic part alone): the ring, its
// full/empty barriers, the norm's per-warp sums, x (k BF16), the norm's weights (k BF16, with a
// norm), the block's row sums.
std::size_t smem_bytes(int n, int k, int grid, bool norm) {
  const std::size_t rows = static_cast<std::size_t>(n + grid - 1) / grid;
  return kRingBytes + 2 * kSlots * sizeof(std::uint64_t) + kWarps * sizeof(float) +
         (norm ? 2 : 1) * static_cast<std::size_t>(k) * sizeof(bf16) + rows * sizeof(float);
}

// norm_weight != nullptr: x is the residual stream and the GEMV's input is RMSNorm(x) * norm_weight,
// which every block computes while it stages x (one block reduction; the norm's weights are staged
// before the wait). silu_mul: x is a gate/up row of 2k values and the input is silu(gate) * up. So
// the elementwise kernel before the GEMV goes, and with it a boundary that held back the GEMV's
// start: a kernel starts when the one before it triggers, which here is after that one's wait, so
// with an RMSNorm in between the ring could stream W only during the norm, not during the previous
// GEMM's tail (bench/NOTES.md, session 9: batch-1 step 4.53 -> 4.27-4.31 ms for the two norms).
__global__ void __launch_bounds__(kBlockThreads, 1)
    ring_gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, int n, int k, const bf16* residual,
                     bf16* y, const bf16* __restrict__ norm_weight, float norm_eps, bool silu_mul) {
  extern __shared__ uint4 smem4[];
  auto* ring = reinterpret_cast<unsigned char*>(smem4);
  auto* full = reinterpret_cast<std::uint64_t*>(ring + kRingBytes);
  std::uint64_t* empty = full + kSlots;
  auto* warp_squares = reinterpret_cast<float*>(empty + kSlots);  // [kWarps]: 64 bytes, x stays 16-aligned
  auto* xs4 = reinterpret_cast<uint4*>(warp_squares + kWarps);
  uint4* gs4 = xs4 + k / 8;  // the norm's weights (with a norm)
  auto* row_sum = reinterpret_cast<float*>(norm_weight != nullptr ? gs4 + k / 8 : gs4);
  const int row_begin = static_cast<int>(static_cast<std::int64_t>(n) * blockIdx.x / gridDim.x);
  const int rows = static_cast<int>(static_cast<std::int64_t>(n) * (blockIdx.x + 1) / gridDim.x) - row_begin;
  const int row_bytes = k * static_cast<int>(sizeof(bf16));
  const int per_row = (row_bytes + kPieceBytes - 1) / kPieceBytes;
  const int pieces = rows * per_row;
  init_ring_barriers(full, empty, kSlots);
  __syncthreads();

  if (threadIdx.x >= kThreads) {
    if (threadIdx.x == kThreads) {
      const auto* span = reinterpret_cast<const unsigned char*>(w + static_cast<std::int64_t>(row_begin) * k);
      for (int p = 0; p < pieces; ++p) {
        const int slot = p % kSlots;
        if (p >= kSlots) mbar_wait_parity(empty + slot, ((p / kSlots) - 1) & 1);
        const int row = p / per_row, segment = p - row * per_row;
        const int offset = segment * kPieceBytes;
        const unsigned bytes = static_cast<unsigned>(min(kPieceBytes, row_bytes - offset));
        mbar_arrive_expect_tx(full + slot, bytes);
        bulk_copy_to_shared(ring + slot * kPieceBytes, span + static_cast<std::int64_t>(row) * row_bytes + offset,
                            bytes, full + slot);
      }
    }
    return;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (norm_weight != nullptr) {  // weights: no earlier kernel writes them
    const auto* g4 = reinterpret_cast<const uint4*>(norm_weight);
    for (int v = threadIdx.x; v < k / 8; v += kThreads) gs4[v] = g4[v];
  }
  pdl_wait();  // x (and the residual) come from the kernels before
  pdl_trigger();
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
  for (int i = threadIdx.x; i < rows; i += kThreads) row_sum[i] = 0.0f;
  consumer_sync();
  for (int p = warp; p < pieces; p += kWarps) {
    const int slot = p % kSlots;
    const int row = p / per_row, segment = p - row * per_row;
    const int chunks = min(kPieceBytes, row_bytes - segment * kPieceBytes) / 16;
    mbar_wait_parity(full + slot, (p / kSlots) & 1);
    const auto* w4 = reinterpret_cast<const uint4*>(ring + slot * kPieceBytes);
    const uint4* xp = xs4 + segment * (kPieceBytes / 16);
    const float partial = ring_piece_dot(w4, xp, chunks, lane);
    __syncwarp();
    if (lane == 0) mbar_arrive(empty + slot);
    const float acc = warp_sum(partial);
    if (lane == 0) atomicAdd(row_sum + row, acc);
  }
  consumer_sync();
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    float v = row_sum[i];
    if (residual != nullptr) v += __bfloat162float(residual[row_begin + i]);
    y[row_begin + i] = __float2bfloat16_rn(v);
  }
}

// The current device's SM count and the shared memory a block may opt into, which the kernel is
// allowed once per device (the launch path is also the engine's tuning loop: no attribute calls
// per launch). `sms` is stored last, so a nonzero value means both are set.
struct DeviceLimits {
  int sms = 0;
  int smem_optin = 0;
};

DeviceLimits prepared_device() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> sms_of[kMaxDevices];
  static std::atomic<int> smem_optin_of[kMaxDevices];
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) throw std::runtime_error("ring GEMV: device index beyond 63");
  if (sms_of[device].load() == 0) {
    int sms = 0, optin = 0;
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(ring_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    smem_optin_of[device].store(optin);
    sms_of[device].store(sms);
  }
  return DeviceLimits{sms_of[device].load(), smem_optin_of[device].load()};
}

}  // namespace

bool launch_ring_gemv(const bf16* x, const bf16* w, int n, int k, const bf16* residual, bf16* y, cudaStream_t stream,
                      const RingInput& input) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  if (n <= 0 || k <= 0 || k % 8 != 0 || !aligned(x) || !aligned(w)) return false;
  const bool norm = input.norm_weight != nullptr;
  if ((norm && !aligned(input.norm_weight)) || (norm && input.silu_mul)) return false;
  const DeviceLimits limits = prepared_device();
  const int grid = std::min(limits.sms, n);
  const std::size_t smem = smem_bytes(n, k, grid, norm);
  if (smem > static_cast<std::size_t>(limits.smem_optin)) return false;
  launch_kernel(ring_gemv_kernel, grid, kBlockThreads, smem, stream, x, w, n, k, residual, y, input.norm_weight,
                input.norm_eps, input.silu_mul);
  return true;
}

bool ring_gemv_by_default() {
  static const bool on = [] {
    const char* v = std::getenv("GPUSCOUT_RING_GEMV");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace gpuscout::cuda::infer
