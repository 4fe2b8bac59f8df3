// The batch-1 decode GEMV with its weights in flight before the previous kernel ends; see
// gemv_stream.hpp for why.
//
// Layout of the work. Block b of G (one per SM) owns W rows [b n / G, (b + 1) n / G): with W
// row-major that is one contiguous span, cut into stages of kStageRows whole rows (<= 32 KiB). One
// thread fills a ring of stages with cp.async.bulk copies, each counted on the stage's mbarrier;
// the first `stages` copies are issued before pdl_wait(). The block's 256 threads share each stage:
// thread t multiplies chunks t, t + 256, ... (8 k values each) of every row of the stage by the
// same chunks of x (read once into shared memory after the wait), the warps' sums meet in shared
// memory, and warp 1 writes the stage's outputs while thread 0 refills the slot. Every output is
// summed in the same order on every call (deterministic).
#include "gemv_stream.hpp"

#include <array>
#include <atomic>

#include "kernel_util.cuh"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStageBytes = 32 * 1024;
constexpr int kMaxStages = 6;
constexpr int kMaxStageRows = 32;
// The sums of two consecutive stages: the next stage's warps write one buffer while warp 1 may
// still read the other.
constexpr int kReduceFloats = 2 * kWarps * kMaxStageRows;
// 227 KiB: the most dynamic shared memory one block may opt into on sm_90.
constexpr int kMaxSmem = 227 * 1024;

int stage_rows_for(int k) {
  int rows = kMaxStageRows;
  while (rows > 1 && rows * k * 2 > kStageBytes) rows /= 2;
  return rows;
}

std::size_t smem_bytes(int k, int stage_rows, int stages) {
  return static_cast<std::size_t>(stages) * stage_rows * k * 2 + static_cast<std::size_t>(k) * 2 +
         kReduceFloats * sizeof(float) + kMaxStages * sizeof(std::uint64_t);
}

int stages_for(int k, int stage_rows, int cap) {
  int stages = cap > 0 ? std::min(cap, kMaxStages) : kMaxStages;
  while (stages > 2 && smem_bytes(k, stage_rows, stages) > static_cast<std::size_t>(kMaxSmem)) --stages;
  return stages;
}

template <int kStageRows>
__global__ void __launch_bounds__(kThreads, 1)
    stream_gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, int n, int k, int stages,
                       const bf16* residual, bf16* y) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int chunks = k / 8;
  const int stage_bytes = kStageRows * k * 2;
  unsigned char* ring = smem;
  auto* xs = reinterpret_cast<uint4*>(smem + static_cast<std::size_t>(stages) * stage_bytes);
  auto* sums = reinterpret_cast<float*>(xs + chunks);
  auto* full = reinterpret_cast<std::uint64_t*>(sums + kReduceFloats);

  // Block b owns rows [b n / G, (b + 1) n / G): one contiguous span of W, copied in whole-stage
  // pieces. (Giving it every G-th row instead, so that the SMs sweep W together as a copy does, was
  // 10-13% slower on the long shapes: bench/NOTES.md, session 7.)
  const std::int64_t row_begin = static_cast<std::int64_t>(blockIdx.x) * n / gridDim.x;
  const int my_rows = static_cast<int>(static_cast<std::int64_t>(blockIdx.x + 1) * n / gridDim.x - row_begin);
  const int stage_count = (my_rows + kStageRows - 1) / kStageRows;
  auto issue = [&](int s) {
    const int slot = s % stages;
    const int first = s * kStageRows;
    const unsigned bytes = static_cast<unsigned>(min(kStageRows, my_rows - first)) * k * 2;
    mbar_arrive_expect_tx(&full[slot], bytes);
    bulk_copy_to_shared(ring + static_cast<std::size_t>(slot) * stage_bytes, w + (row_begin + first) * k, bytes,
                        &full[slot]);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1);
    mbar_init_fence();
    // Weights depend on no earlier kernel: these copies overlap whatever runs before us.
    for (int s = 0; s < min(stages, stage_count); ++s) issue(s);
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them
  pdl_wait();
  pdl_trigger();
  for (int c = threadIdx.x; c < chunks; c += kThreads) xs[c] = reinterpret_cast<const uint4*>(x)[c];
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int s = 0; s < stage_count; ++s) {
    const int slot = s % stages;
    const int first = s * kStageRows;
    const int rows = min(kStageRows, my_rows - first);
    mbar_wait_parity(&full[slot], static_cast<unsigned>(s / stages) & 1u);
    const auto* stage = reinterpret_cast<const uint4*>(ring + static_cast<std::size_t>(slot) * stage_bytes);
    float acc[kStageRows];
#pragma unroll
    for (int r = 0; r < kStageRows; ++r) acc[r] = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += kThreads) {
      float xf[8];
      unpack8(xs[c], xf);
#pragma unroll
      for (int r = 0; r < kStageRows; ++r) {
        if (r < rows) {
          float wf[8];
          unpack8(stage[r * chunks + c], wf);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r] = fmaf(xf[j], wf[j], acc[r]);
        }
      }
    }
    float* part = sums + (s & 1) * kWarps * kMaxStageRows;
#pragma unroll
    for (int r = 0; r < kStageRows; ++r) {
      const float v = warp_sum(acc[r]);
      if (lane == 0 && r < rows) part[warp * kMaxStageRows + r] = v;
    }
    __syncthreads();  // the slot is read and the warps' sums are in shared memory
    if (threadIdx.x == 0 && s + stages < stage_count) issue(s + stages);
    if (warp == 1 && lane < rows) {
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) v += part[i * kMaxStageRows + lane];
      const std::int64_t o = row_begin + first + lane;
      if (residual != nullptr) v += __bfloat162float(residual[o]);
      y[o] = __float2bfloat16_rn(v);
    }
  }
}

using Kernel = void (*)(const bf16*, const bf16*, int, int, int, const bf16*, bf16*);

Kernel kernel_for(int stage_rows) {
  switch (stage_rows) {
    case 32:
      return stream_gemv_kernel<32>;
    case 16:
      return stream_gemv_kernel<16>;
    case 8:
      return stream_gemv_kernel<8>;
    case 4:
      return stream_gemv_kernel<4>;
    case 2:
      return stream_gemv_kernel<2>;
    default:
      return stream_gemv_kernel<1>;
  }
}

struct DeviceFacts {
  int sms = 0;
  int cc = 0;
};

DeviceFacts device_facts() {
  static std::array<std::atomic<int>, 64> sms{}, cc{};
  int device = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= static_cast<int>(sms.size())) device = 0;
  if (sms[device].load() == 0) {
    int count = 0, major = 0, minor = 0;
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    cc[device].store(major * 10 + minor);
    sms[device].store(count);
  }
  return {sms[device].load(), cc[device].load()};
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

const char* check_stream_gemv(const bf16* x, int rows, const void* w, int n, int k) {
  if (rows != 1) return "rows != 1";
  if (n < 1) return "n < 1";
  if (k < 8 || k % 8 != 0) return "k is not a positive multiple of 8";
  if (k > kStreamGemvMaxK) return "k > 16384 (a W row must fit one 32 KiB stage)";
  if (!aligned16(x) || !aligned16(w)) return "x or W not 16-byte aligned";
  if (device_facts().cc < 90) return "needs sm_90 (bulk copies and mbarrier transaction counts)";
  return nullptr;
}

bool launch_stream_gemv(const bf16* x, int rows, const bf16* w, int n, int k, const bf16* residual, bf16* y,
                        cudaStream_t stream, int stages) {
  if (check_stream_gemv(x, rows, w, n, k) != nullptr) return false;
  const int stage_rows = stage_rows_for(k);
  const int ring = stages_for(k, stage_rows, stages);
  const std::size_t smem = smem_bytes(k, stage_rows, ring);
  const Kernel kernel = kernel_for(stage_rows);
  // The opt-in above 48 KiB belongs to the current device's context (tensor parallelism: several);
  // a host-side call, also allowed while a graph is captured.
  GPUSCOUT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
  const int grid = std::min(n, device_facts().sms);
  launch_kernel(kernel, grid, kThreads, smem, stream, x, w, n, k, ring, residual, y);
  return true;
}

}  // namespace gpuscout::cuda::infer
