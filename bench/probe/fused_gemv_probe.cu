// Experiment (session 8): how fast does a persistent one-block-per-SM GEMV chain stream the
// Llama-3.1-8B layer weights (32 x [qkv 6144x4096, o 4096x4096, gate_up 28672x4096, down
// 4096x14336], 14.0 GB) at batch 1, by warps per block, loads in flight per lane and what sits
// between the stages (nothing, a grid barrier, a barrier plus staging the input vector).
// Build (repository root): nvcc -O3 -std=c++17 -arch=sm_90 -Ibackends/cuda/infer -Ibackends/cuda/include
//   -Iinclude bench/probe/fused_gemv_probe.cu -o fused_gemv_probe
// (the mbarrier, bulk-copy and BF16 helpers are the engine's, backends/cuda/infer/kernel_util.cuh)
// Session 8's figures (bench/results/h200-fused-decode-s8-20261130.txt, bench/NOTES.md) came from
// this file as it evolved: calls 3-5 streamed pattern-filled weights, call 10 random ones (the same
// times within 0.5%). The third design of call 4 (a TMA ring whose pieces the whole block consumes
// one at a time: 4.04 ms without barriers) is in commit aa020fe.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernel_util.cuh"

using gpuscout::cuda::infer::bf16;
using namespace gpuscout::cuda::infer;
#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      return 1;                                      \
    }                                                \
  } while (0)

__device__ __forceinline__ uint4 ldg_now(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Grid barrier k: every block arrives once, then waits until the counter reaches k x blocks;
// `sync` synchronizes the block's threads that take part.
template <typename Sync>
__device__ void grid_barrier(unsigned* counter, unsigned& passed, Sync sync) {
  sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
  }
  ++passed;
  if (threadIdx.x == 0) {
    while (ld_acquire(counter) < passed * gridDim.x) {
    }
    __threadfence();
  }
  sync();
}

struct Layer {
  const bf16 *qkv, *o, *gu, *down;
};

template <int kWarps, int kLoads, int kMode>
__global__ void __launch_bounds__(kWarps * 32, 1)
    probe(const Layer* layers, int num_layers, bf16* x, bf16* y, unsigned* counter) {
  extern __shared__ uint4 xs4[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned passed = 0;
  auto barrier = [&] {
    if (kMode != 0) grid_barrier(counter, passed, [] { __syncthreads(); });
  };
  auto stage = [&](const bf16* w, int n, int k) {
    const int row_begin = (int)((long long)n * blockIdx.x / gridDim.x);
    const int row_end = (int)((long long)n * (blockIdx.x + 1) / gridDim.x);
    const int first_row = row_begin + warp;
    const int rows = first_row < row_end ? (row_end - first_row + kWarps - 1) / kWarps : 0;
    const int chunks = k / 8, per_row = (chunks + 31) / 32, total = rows * per_row;
    uint4 ring[kLoads];
    int load_row = 0, load_j = 0;
    auto load_next = [&](uint4& slot, int t) {
      const int ch = load_j * 32 + lane;
      const long long row = first_row + (long long)load_row * kWarps;
      slot =
          t < total && ch < chunks ? ldg_now(reinterpret_cast<const uint4*>(w + row * k) + ch) : make_uint4(0, 0, 0, 0);
      if (++load_j == per_row) load_j = 0, ++load_row;
    };
#pragma unroll
    for (int s = 0; s < kLoads; ++s) load_next(ring[s], s);
    barrier();
    if (kMode == 2) {
      for (int v = threadIdx.x; v < k / 8; v += kWarps * 32) xs4[v] = __ldcg(reinterpret_cast<const uint4*>(x) + v);
      __syncthreads();
    }
    int row_i = 0, j = 0;
    float acc = 0.f;
    for (int t0 = 0; t0 < total; t0 += kLoads) {
#pragma unroll
      for (int s = 0; s < kLoads; ++s) {
        const int t = t0 + s;
        if (t < total) {
          const int ch = j * 32 + lane;
          if (ch < chunks) {
            float wf[8], xf[8];
            unpack8(ring[s], wf);
            unpack8(xs4[ch], xf);
            for (int e = 0; e < 8; ++e) acc = fmaf(xf[e], wf[e], acc);
          }
          load_next(ring[s], t + kLoads);
          if (++j == per_row) {
            acc = warp_sum(acc);
            if (lane == 0) y[first_row + row_i * kWarps] = __float2bfloat16_rn(acc);
            acc = 0.f, j = 0, ++row_i;
          }
        }
      }
    }
  };
  for (int l = 0; l < num_layers; ++l) {
    const Layer L = layers[l];
    stage(L.qkv, 6144, 4096);
    stage(L.o, 4096, 4096);
    stage(L.gu, 28672, 4096);
    stage(L.down, 4096, 14336);
  }
}

__device__ __forceinline__ void consumer_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// Per-warp pieces: a piece is a segment (<= kPieceBytes) of one row; consumer warp w takes pieces
// w, w + kWarps, ... (so kWarps pieces are consumed at once), adding its row partial to rowacc.
template <int kWarps, int kSlots, int kPieceBytes, int kMode>
__global__ void __launch_bounds__(kWarps * 32 + 32, 1)
    probe_tma2(const Layer* layers, int num_layers, bf16* x, bf16* y, unsigned* counter) {
  constexpr int kConsumers = kWarps * 32;
  extern __shared__ uint4 smem[];
  auto* ring = reinterpret_cast<unsigned char*>(smem);
  auto* xs4 = reinterpret_cast<uint4*>(ring + kSlots * kPieceBytes);
  auto* rowacc = reinterpret_cast<float*>(xs4 + 14336 / 8);
  auto* bars = reinterpret_cast<std::uint64_t*>(rowacc + 256);
  std::uint64_t* full = bars;
  std::uint64_t* empty = bars + kSlots;
  init_ring_barriers(full, empty, kSlots);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int shapes[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  if (warp == kWarps) {
    if (lane != 0) return;
    int piece = 0;
    for (int l = 0; l < num_layers; ++l) {
      const Layer L = layers[l];
      const bf16* ws[4] = {L.qkv, L.o, L.gu, L.down};
      for (int st = 0; st < 4; ++st) {
        const int n = shapes[st][0], k = shapes[st][1];
        const int row_begin = (int)((long long)n * blockIdx.x / gridDim.x);
        const int row_end = (int)((long long)n * (blockIdx.x + 1) / gridDim.x);
        const long long begin = (long long)row_begin * k * 2, end = (long long)row_end * k * 2;
        const int row_bytes = k * 2;
        for (long long r = row_begin; r < row_end; ++r) {
          for (int off = 0; off < row_bytes; off += kPieceBytes, ++piece) {
            const int slot = piece % kSlots;
            if (piece >= kSlots) mbar_wait_parity(empty + slot, ((piece / kSlots) - 1) & 1);
            const unsigned bytes = min(kPieceBytes, row_bytes - off);
            mbar_arrive_expect_tx(full + slot, bytes);
            bulk_copy_to_shared(ring + slot * kPieceBytes, reinterpret_cast<const char*>(ws[st] + r * k) + off, bytes,
                                full + slot);
          }
        }
        (void)begin, (void)end;
      }
    }
    return;
  }
  unsigned passed = 0;
  auto barrier = [&] {
    if (kMode != 0) grid_barrier(counter, passed, [] { consumer_sync(kConsumers); });
  };
  int base = 0;  // the first piece of this stage
  for (int l = 0; l < num_layers; ++l) {
    for (int st = 0; st < 4; ++st) {
      const int n = shapes[st][0], k = shapes[st][1];
      const int row_begin = (int)((long long)n * blockIdx.x / gridDim.x);
      const int row_end = (int)((long long)n * (blockIdx.x + 1) / gridDim.x);
      const int row_bytes = k * 2;
      const int per_row = (row_bytes + kPieceBytes - 1) / kPieceBytes;
      const int pieces = (row_end - row_begin) * per_row;
      barrier();
      if (kMode == 2) {
        for (int v = threadIdx.x; v < k / 8; v += kConsumers) xs4[v] = __ldcg(reinterpret_cast<const uint4*>(x) + v);
      }
      for (int i = threadIdx.x; i < row_end - row_begin; i += kConsumers) rowacc[i] = 0.f;
      consumer_sync(kConsumers);
      // Piece p goes to warp p % kWarps (global numbering) and slot p % kSlots, kSlots a multiple of
      // kWarps: a slot is always consumed by the same warp, in order, so its mbarrier parity never
      // runs two phases ahead of the piece a warp waits for.
      for (int q = ((warp - base) % kWarps + kWarps) % kWarps; q < pieces; q += kWarps) {
        const int piece = base + q;
        const int slot = piece % kSlots;
        const int row = q / per_row, seg = q % per_row;
        const int bytes = min(kPieceBytes, row_bytes - seg * kPieceBytes);
        mbar_wait_parity(full + slot, (piece / kSlots) & 1);
        const uint4* w4 = reinterpret_cast<const uint4*>(ring + slot * kPieceBytes);
        const uint4* x4 = xs4 + seg * (kPieceBytes / 16);
        const float partial = ring_piece_dot(w4, x4, bytes / 16, lane);
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + slot);
        const float acc = warp_sum(partial);
        if (lane == 0) atomicAdd(rowacc + row, acc);
      }
      base += pieces;
      consumer_sync(kConsumers);
      for (int i = threadIdx.x; i < row_end - row_begin; i += kConsumers)
        y[row_begin + i] = __float2bfloat16_rn(rowacc[i]);
    }
  }
}

// Random BF16 in [-1/64, 1/64) (as the engine's weights are random): data-dependent power on a
// power-capped card could change clocks, so the probe does not stream patterns.
__global__ void fill(uint4* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    uint4 v;
    unsigned* w = &v.x;
    for (int j = 0; j < 4; ++j) {
      h = h * 1664525u + 1013904223u;
      const unsigned lo = ((h & 1u) << 15) | ((120u + ((h >> 1) & 1u)) << 7) | ((h >> 2) & 0x7fu);
      const unsigned hi = (((h >> 9) & 1u) << 15) | ((120u + ((h >> 10) & 1u)) << 7) | ((h >> 11) & 0x7fu);
      w[j] = lo | (hi << 16);
    }
    p[i] = v;
  }
}

const char* mode_name(int mode) {
  return mode == 0 ? "no barrier" : mode == 1 ? "barrier" : "barrier+stage x";
}

// Median of 5 timed launches (after one warm-up) of `kernel` on one block per SM.
template <typename Kernel>
float time_kernel(Kernel kernel, int threads, int smem, const Layer* layers, int num_layers, bf16* x, bf16* y,
                  unsigned* counter, int sms) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return -1;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    cudaMemset(counter, 0, 4);
    cudaEventRecord(a);
    kernel<<<sms, threads, smem>>>(layers, num_layers, x, y, counter);
    cudaEventRecord(b);
    if (cudaEventSynchronize(b) != cudaSuccess || cudaGetLastError() != cudaSuccess) return -1;
    float t;
    cudaEventElapsedTime(&t, a, b);
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Run {
  const Layer* layers;
  int num_layers;
  bf16 *x, *y;
  unsigned* counter;
  int sms;
  double bytes;
  void report(const char* what, float ms) const {
    printf("%s: %.3f ms, %.0f GB/s, %.1f us per stage\n", what, ms, bytes / (ms * 1e-3) / 1e9,
           ms * 1e3 / (num_layers * 4));
  }
  template <int kWarps, int kLoads, int kMode>
  void registers() const {
    const float ms =
        time_kernel(probe<kWarps, kLoads, kMode>, kWarps * 32, 14336 * 2, layers, num_layers, x, y, counter, sms);
    char what[128];
    snprintf(what, sizeof what, "warps %2d loads %2d mode %d (%s)", kWarps, kLoads, kMode, mode_name(kMode));
    report(what, ms);
  }
  template <int kWarps, int kSlots, int kPieceBytes, int kMode>
  void tma_warp() const {
    const int smem = kSlots * kPieceBytes + 14336 * 2 + 256 * 4 + 2 * kSlots * 8;
    const float ms = time_kernel(probe_tma2<kWarps, kSlots, kPieceBytes, kMode>, kWarps * 32 + 32, smem, layers,
                                 num_layers, x, y, counter, sms);
    char what[128];
    snprintf(what, sizeof what, "TMA per-warp pieces: warps %2d, %2d slots x %5d B, mode %d (%s)", kWarps, kSlots,
             kPieceBytes, kMode, mode_name(kMode));
    report(what, ms);
  }
};

int main() {
  const int layers = 32;
  const size_t per_layer = (6144ull * 4096 + 4096ull * 4096 + 28672ull * 4096 + 4096ull * 14336);
  bf16* w = nullptr;
  CK(cudaMalloc(&w, per_layer * layers * 2));
  fill<<<1024, 256>>>(reinterpret_cast<uint4*>(w), per_layer * layers / 8, 1);
  std::vector<Layer> hl(layers);
  for (int l = 0; l < layers; ++l) {
    const bf16* base = w + per_layer * l;
    hl[l] = {base, base + 6144ull * 4096, base + 6144ull * 4096 + 4096ull * 4096,
             base + 6144ull * 4096 + 4096ull * 4096 + 28672ull * 4096};
  }
  Layer* dl;
  CK(cudaMalloc(&dl, sizeof(Layer) * layers));
  CK(cudaMemcpy(dl, hl.data(), sizeof(Layer) * layers, cudaMemcpyHostToDevice));
  bf16 *x, *y;
  unsigned* counter;
  CK(cudaMalloc(&x, 28672 * 2));
  CK(cudaMalloc(&y, 28672 * 2));
  CK(cudaMalloc(&counter, 4));
  CK(cudaMemset(x, 0, 28672 * 2));
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const double bytes = per_layer * layers * 2.0;
  printf("%d layers, %.2f GB of weights, %d SMs\n", layers, bytes / 1e9, sms);
  // copy rate for reference
  {
    void *a, *b;
    size_t n = 4ull << 30;
    cudaMalloc(&a, n);
    cudaMalloc(&b, n);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> v;
    for (int i = 0; i < 5; ++i) {
      cudaEventRecord(e0);
      cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float t;
      cudaEventElapsedTime(&t, e0, e1);
      v.push_back(t);
    }
    std::sort(v.begin(), v.end());
    printf("D2D copy %.0f GB/s (read+write)\n", 2.0 * n / (v[2] * 1e-3) / 1e9);
    cudaFree(a);
    cudaFree(b);
  }
  fill<<<64, 256>>>(reinterpret_cast<uint4*>(x), 28672 / 8, 5);
  const Run run{dl, layers, x, y, counter, sms, bytes};
  // Consumer warps loading W into registers (calls 3-4 of bench/results/h200-fused-decode-s8-20261130.txt).
  run.registers<16, 8, 0>();
  run.registers<16, 8, 1>();
  run.registers<16, 8, 2>();
  run.registers<16, 4, 0>();
  run.registers<16, 16, 0>();
  run.registers<32, 4, 0>();
  run.registers<32, 4, 2>();
  run.registers<8, 16, 0>();
  // A TMA ring whose piece p is consumed by warp p % kWarps (calls 5 and 10).
  run.tma_warp<16, 16, 8192, 0>();
  run.tma_warp<16, 16, 8192, 2>();
  run.tma_warp<16, 16, 12288, 2>();
  run.tma_warp<16, 32, 4096, 2>();
  run.tma_warp<8, 24, 8192, 2>();
  return 0;
}
