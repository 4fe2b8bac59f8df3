// Device memory bandwidth (key "memory"): our own STREAM-like kernels and the copy engine.
//   read   sum = sum(b)          bytes read S,  written 0
//   write  a = pattern           bytes read 0,  written S
//   copy   a = b                 bytes read S,  written S
//   triad  a = b + 3 c           bytes read 2S, written S
//   ce_copy cudaMemcpyAsync D2D  bytes read S,  written S
// S is the size of one array. Bandwidth counts bytes read + bytes written (BabelStream's and
// nvbandwidth's device_local_copy convention). Kernels move 16-byte vectors. Two grid styles:
// "tiled" (one block per tile of 256 x 2 vectors, as many blocks as tiles, like PyTorch's elementwise
// kernels and BabelStream) and "persistent" (SM count x occupancy blocks, grid-stride, 4 vectors in
// flight per thread). Default: persistent for read, tiled for the others, the faster of each on an
// H200 (bench/NOTES.md); --memory-grid forces one. Sizes whose bytes per pass fit in L2 are timed
// differently: one persistent-grid launch repeats the pass many times (see l2_kernel), and time and
// bandwidth are per pass, the same convention as for HBM sizes. Every case is verified after
// timing: the output is poisoned, one more launch runs, and every element is compared exactly on
// the GPU (inputs are small integers stored as float, so the arithmetic is exact).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "gpuscout/bench/summary.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"

namespace gpuscout::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr float kScalar = 3.0f;

// Index-dependent patterns, exact in float: b[i] = i mod 1024, c[i] = (i / 1024) mod 8.
__host__ __device__ inline float pattern_b(std::size_t i) {
  return static_cast<float>(i & 1023u);
}
__host__ __device__ inline float pattern_c(std::size_t i) {
  return static_cast<float>((i >> 10) & 7u);
}

enum Pattern : int { kPatternB = 0, kPatternC = 1, kPatternTriad = 2 };

__device__ inline float4 pattern4(int which, std::size_t v) {
  const std::size_t i = 4 * v;
  float4 r;
  if (which == kPatternB) {
    r = make_float4(pattern_b(i), pattern_b(i + 1), pattern_b(i + 2), pattern_b(i + 3));
  } else if (which == kPatternC) {
    r = make_float4(pattern_c(i), pattern_c(i + 1), pattern_c(i + 2), pattern_c(i + 3));
  } else {
    r = make_float4(pattern_b(i) + kScalar * pattern_c(i), pattern_b(i + 1) + kScalar * pattern_c(i + 1),
                    pattern_b(i + 2) + kScalar * pattern_c(i + 2), pattern_b(i + 3) + kScalar * pattern_c(i + 3));
  }
  return r;
}

__global__ void init_kernel(float4* out, std::size_t n, int which) {
  for (std::size_t v = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; v < n;
       v += std::size_t{gridDim.x} * blockDim.x) {
    out[v] = pattern4(which, v);
  }
}

__global__ void verify_kernel(const float4* in, std::size_t n, int which, unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (std::size_t v = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; v < n;
       v += std::size_t{gridDim.x} * blockDim.x) {
    const float4 got = in[v];
    const float4 want = pattern4(which, v);
    bad += (got.x != want.x) + (got.y != want.y) + (got.z != want.z) + (got.w != want.w);
  }
  if (bad != 0) atomicAdd(wrong, bad);
}

__device__ inline unsigned long long word_sum(const float4& f) {
  return static_cast<unsigned long long>(__float_as_uint(f.x)) + __float_as_uint(f.y) + __float_as_uint(f.z) +
         __float_as_uint(f.w);
}

// Sums the bit patterns of all words (exact, modulo 2^64) so the loads cannot be optimised away
// and the result can be checked.
// Adds every thread's `acc` of the block into *sum: warp shuffles, then one atomic per block, not
// per warp (thousands of atomics on one address would cost microseconds).
__device__ __forceinline__ void add_block_sum(unsigned long long acc, unsigned long long* sum) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  __shared__ unsigned long long warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long block_sum = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) block_sum += warp_sums[w];
    atomicAdd(sum, block_sum);
  }
}

__global__ void __launch_bounds__(kThreads)
    read_kernel(const float4* __restrict__ in, std::size_t n, unsigned long long* sum) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  unsigned long long acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = in[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += word_sum(v[u]);
  }
  for (; i < n; i += stride) acc += word_sum(in[i]);
  add_block_sum(acc, sum);
}

__global__ void __launch_bounds__(kThreads) write_kernel(float4* __restrict__ out, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) out[i + u * stride] = pattern4(kPatternB, i + u * stride);
  }
  for (; i < n; i += stride) out[i] = pattern4(kPatternB, i);
}

__global__ void __launch_bounds__(kThreads)
    copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = in[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) out[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) out[i] = in[i];
}

__device__ inline float4 triad4(const float4& b, const float4& c) {
  return make_float4(b.x + kScalar * c.x, b.y + kScalar * c.y, b.z + kScalar * c.z, b.w + kScalar * c.w);
}

__global__ void __launch_bounds__(kThreads)
    triad_kernel(const float4* __restrict__ b, const float4* __restrict__ c, float4* __restrict__ a, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    float4 vb[kUnroll], vc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      vb[u] = b[i + u * stride];
      vc[u] = c[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) a[i + u * stride] = triad4(vb[u], vc[u]);
  }
  for (; i < n; i += stride) a[i] = triad4(b[i], c[i]);
}

// Tiled variants (PyTorch / BabelStream style): one tile of kThreads x kTile vectors per block and
// as many blocks as tiles, so the hardware scheduler streams blocks through the SMs; within a tile
// every load of a thread is issued before its first store.
constexpr int kTile = 2;

__global__ void __launch_bounds__(kThreads)
    read_tiled(const float4* __restrict__ in, std::size_t n, unsigned long long* sum) {
  const std::size_t base = blockIdx.x * std::size_t{kThreads * kTile} + threadIdx.x;
  unsigned long long acc = 0;
  float4 v[kTile];
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    v[u] = i < n ? in[i] : make_float4(0, 0, 0, 0);
  }
#pragma unroll
  for (int u = 0; u < kTile; ++u) acc += word_sum(v[u]);
  add_block_sum(acc, sum);
}

__global__ void __launch_bounds__(kThreads) write_tiled(float4* __restrict__ out, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t{kThreads * kTile} + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    if (i < n) out[i] = pattern4(kPatternB, i);
  }
}

__global__ void __launch_bounds__(kThreads)
    copy_tiled(const float4* __restrict__ in, float4* __restrict__ out, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t{kThreads * kTile} + threadIdx.x;
  float4 v[kTile];
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    if (i < n) v[u] = in[i];
  }
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    if (i < n) out[i] = v[u];
  }
}

__global__ void __launch_bounds__(kThreads)
    triad_tiled(const float4* __restrict__ b, const float4* __restrict__ c, float4* __restrict__ a, std::size_t n) {
  const std::size_t base = blockIdx.x * std::size_t{kThreads * kTile} + threadIdx.x;
  float4 vb[kTile], vc[kTile];
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    if (i < n) {
      vb[u] = b[i];
      vc[u] = c[i];
    }
  }
#pragma unroll
  for (int u = 0; u < kTile; ++u) {
    const std::size_t i = base + u * kThreads;
    if (i < n) a[i] = triad4(vb[u], vc[u]);
  }
}

// L2-resident sizes: one launch of an 8 MiB copy lasts about as long as launching and draining a
// kernel (~3.5 us back to back), so timing one pass per launch measures the launch, not the L2.
// As nvbench/BabelStream-style L2 tests do, one launch makes `passes` passes over the arrays
// (persistent grid, 4 vectors in flight per thread). Loads are ld.global.cg (cached in L2, not L1),
// and each pass moves every block to the next block's slice, so a repeat is not served by the L1 of
// the SM that loaded it the pass before (and cannot be hoisted out of the pass loop).
enum L2Op : int { kL2Read = 0, kL2Write = 1, kL2Copy = 2, kL2Triad = 3 };

template <int Op>
__device__ __forceinline__ float4 l2_value(const float4* b, const float4* c, std::size_t i) {
  if constexpr (Op == kL2Write) {
    return pattern4(kPatternB, i);
  } else if constexpr (Op == kL2Triad) {
    return triad4(__ldcg(b + i), __ldcg(c + i));
  } else {
    return __ldcg(b + i);
  }
}

template <int Op>
__global__ void __launch_bounds__(kThreads)
    l2_kernel(const float4* __restrict__ b, const float4* __restrict__ c, float4* __restrict__ a, std::size_t n,
              int passes, unsigned long long* sum) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  unsigned long long acc = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const std::size_t block = (blockIdx.x + static_cast<unsigned>(pass)) % gridDim.x;
    std::size_t i = block * blockDim.x + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = l2_value<Op>(b, c, i + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if constexpr (Op == kL2Read) {
          acc += word_sum(v[u]);
        } else {
          a[i + u * stride] = v[u];
        }
      }
    }
    for (; i < n; i += stride) {
      if constexpr (Op == kL2Read) {
        acc += word_sum(l2_value<Op>(b, c, i));
      } else {
        a[i] = l2_value<Op>(b, c, i);
      }
    }
  }
  if constexpr (Op == kL2Read) add_block_sum(acc, sum);
}

// Bytes one L2 launch should move: ~0.5 ms at the ~8 TB/s expected of Hopper's L2, so the few
// microseconds of launch and drain are under 1% of the time.
constexpr double kL2BytesPerLaunch = 4.0 * (1ull << 30);

// Expected read_kernel result: the word sum of pattern b over n4 vectors (period 1024 words).
unsigned long long expected_word_sum(std::size_t n4) {
  const std::size_t words = 4 * n4;
  auto bits = [](float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return static_cast<unsigned long long>(u);
  };
  unsigned long long period = 0;
  for (std::size_t i = 0; i < 1024; ++i) period += bits(pattern_b(i));
  unsigned long long total = period * static_cast<unsigned long long>(words / 1024);
  for (std::size_t i = 0; i < words % 1024; ++i) total += bits(pattern_b(i));
  return total;
}

struct Op {
  const char* name;
  int reads;   // arrays read
  int writes;  // arrays written
  const char* formula;
};
constexpr Op kOps[] = {
    {"read", 1, 0, "sum = sum(b) (SM kernel, 16-byte loads)"},
    {"write", 0, 1, "a = pattern (SM kernel, 16-byte stores)"},
    {"copy", 1, 1, "a = b (SM kernel, 16-byte loads and stores)"},
    {"triad", 2, 1, "a = b + 3 c (SM kernel, 16-byte loads and stores)"},
    {"ce_copy", 1, 1, "cudaMemcpyAsync device to device (copy engine)"},
};

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

class MemoryBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "memory"; }
  std::string description() const override {
    return "Device memory bandwidth: read, write, copy, triad kernels and copy-engine D2D copy, L2-resident to "
           "several GiB (GB/s of bytes read + written)";
  }

  std::vector<results::Record> run(const BenchEnv& env) override {
    std::vector<results::Record> records;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(env.device.index));
    const auto sizes = sizes_for(env.options, "memory-sizes", {8 * MiB, 1 * GiB},
                                 {8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB, 1 * GiB, 4 * GiB},
                                 {4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB,
                                  1 * GiB, 2 * GiB, 4 * GiB, 8 * GiB});
    int blocks_per_sm = 0;
    GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, copy_kernel, kThreads, 0));
    grid_ = std::max(1, blocks_per_sm) * std::max(1, env.device.sm_count);
    const auto& style = option_list(env.options, "memory-grid");
    if (!style.empty()) force_tiled_ = style.front() != "persistent";
    for (std::uint64_t requested : sizes) {
      if (env.stop_requested()) break;
      run_size(env, requested - requested % 16, records);
    }
    return records;
  }

 private:
  int grid_ = 0;  // persistent grid: SM count x occupancy
  // --memory-grid tiled | persistent forces one style; by default each op uses the style that was
  // faster on an H200 (bench/NOTES.md): persistent for read, tiled for write, copy and triad.
  std::optional<bool> force_tiled_;

  std::function<void(cudaStream_t)> l2_launch(const std::string& name, int grid, const float4* b, const float4* c,
                                              float4* a, std::size_t n, int passes, unsigned long long* sum) const {
    auto make = [=](auto kernel) {
      return std::function<void(cudaStream_t)>(
          [=](cudaStream_t s) { kernel<<<grid, kThreads, 0, s>>>(b, c, a, n, passes, sum); });
    };
    if (name == "read") return make(l2_kernel<kL2Read>);
    if (name == "write") return make(l2_kernel<kL2Write>);
    if (name == "copy") return make(l2_kernel<kL2Copy>);
    return make(l2_kernel<kL2Triad>);
  }

  void run_size(const BenchEnv& env, std::uint64_t size, std::vector<results::Record>& records) {
    const std::string size_text = bench::format_bytes(size);
    std::vector<const Op*> ops;
    for (const Op& op : kOps) {
      if (wanted(env.options, fmt::format("memory/{}/{}", op.name, size_text))) ops.push_back(&op);
    }
    if (ops.empty() || size < 16) return;
    const int gpu = env.device.index;
    auto params_for = [&](const Op& op) {
      nlohmann::ordered_json p;
      p["op"] = op.name;
      p["array_bytes"] = size;
      p["bytes_read"] = size * op.reads;
      p["bytes_written"] = size * op.writes;
      p["path"] = std::string(op.name) == "ce_copy" ? "copy engine" : "SM kernel";
      p["formula"] = op.formula;
      return p;
    };
    // Three arrays for triad; fewer when triad is not selected.
    bool need_c = false;
    for (const Op* op : ops) need_c = need_c || std::string(op->name) == "triad";
    const std::uint64_t total = size * (need_c ? 3 : 2);
    if (auto shortfall = memory_shortfall(total)) {
      for (const Op* op : ops) {
        records.push_back(unrun_record(fmt::format("memory/{}/{}", op->name, size_text), "memory", gpu, params_for(*op),
                                       results::Outcome::skipped, *shortfall));
      }
      return;
    }
    const std::size_t n4 = size / 16;
    std::optional<DeviceBuffer<float4>> a, b, c;
    DeviceBuffer<unsigned long long> scratch(1);
    try {
      a.emplace(n4);
      b.emplace(n4);
      if (need_c) c.emplace(n4);
    } catch (const CudaError& e) {
      if (!e.out_of_memory()) throw;
      (void)cudaGetLastError();
      for (const Op* op : ops) {
        records.push_back(unrun_record(fmt::format("memory/{}/{}", op->name, size_text), "memory", gpu, params_for(*op),
                                       results::Outcome::skipped,
                                       memory_shortfall(total, 0).value_or("allocation failed")));
      }
      return;
    }
    Stream stream;
    init_kernel<<<grid_, kThreads, 0, stream.get()>>>(b->get(), n4, kPatternB);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    if (c) {
      init_kernel<<<grid_, kThreads, 0, stream.get()>>>(c->get(), n4, kPatternC);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
    }
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

    for (const Op* op : ops) {
      if (env.stop_requested()) break;
      const std::string key = fmt::format("memory/{}/{}", op->name, size_text);
      const std::string name = op->name;
      std::function<void(cudaStream_t)> launch;
      float4* pa = a->get();
      const float4* pb = b->get();
      const float4* pc = c ? c->get() : nullptr;
      unsigned long long* sum = scratch.get();
      const double bytes_per_pass = static_cast<double>(size) * (op->reads + op->writes);
      const bool l2_resident = bytes_per_pass <= static_cast<double>(env.device.l2_bytes);
      const bool repeat = l2_resident && name != "ce_copy";  // a copy engine cannot repeat in place
      const int passes = repeat ? static_cast<int>(std::ceil(kL2BytesPerLaunch / bytes_per_pass)) : 1;
      const bool tiled = !repeat && force_tiled_.value_or(name != "read");
      const int grid = tiled ? static_cast<int>((n4 + kThreads * kTile - 1) / (kThreads * kTile)) : grid_;
      if (repeat) {
        launch = l2_launch(name, grid, pb, pc, pa, n4, passes, sum);
      } else if (name == "read") {
        launch = tiled ? std::function<void(cudaStream_t)>(
                             [=](cudaStream_t s) { read_tiled<<<grid, kThreads, 0, s>>>(pb, n4, sum); })
                       : [=](cudaStream_t s) { read_kernel<<<grid, kThreads, 0, s>>>(pb, n4, sum); };
      } else if (name == "write") {
        launch = tiled ? std::function<void(cudaStream_t)>(
                             [=](cudaStream_t s) { write_tiled<<<grid, kThreads, 0, s>>>(pa, n4); })
                       : [=](cudaStream_t s) { write_kernel<<<grid, kThreads, 0, s>>>(pa, n4); };
      } else if (name == "copy") {
        launch = tiled ? std::function<void(cudaStream_t)>(
                             [=](cudaStream_t s) { copy_tiled<<<grid, kThreads, 0, s>>>(pb, pa, n4); })
                       : [=](cudaStream_t s) { copy_kernel<<<grid, kThreads, 0, s>>>(pb, pa, n4); };
      } else if (name == "triad") {
        launch = tiled ? std::function<void(cudaStream_t)>(
                             [=](cudaStream_t s) { triad_tiled<<<grid, kThreads, 0, s>>>(pb, pc, pa, n4); })
                       : [=](cudaStream_t s) { triad_kernel<<<grid, kThreads, 0, s>>>(pb, pc, pa, n4); };
      } else {
        launch = [=](cudaStream_t s) {
          GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(pa, pb, size, cudaMemcpyDeviceToDevice, s));
        };
      }
      results::Record rec;
      rec.key = key;
      rec.benchmark = "memory";
      rec.gpus = {gpu};
      rec.params = params_for(*op);
      try {
        TelemetryScope telemetry(env.telemetry);
        TimingPlan plan;
        const TimedRun run = time_launches(stream.get(), launch, plan, env.options.timing, env.interrupted);
        rec.telemetry = telemetry.finish();
        GPUSCOUT_CUDA_CHECK_LAUNCH();
        if (run.seconds.empty()) {
          rec.outcome = results::Outcome::skipped;
          rec.reason = "interrupted";
          records.push_back(std::move(rec));
          break;
        }
        // Per pass over the arrays: an L2 launch makes `passes` of them.
        std::vector<double> per_pass = run.seconds;
        for (double& s : per_pass) s /= passes;
        const auto times = bench::summarize(per_pass);
        const double bytes = bytes_per_pass;
        rec.metrics.push_back(bench::rate_metric("bandwidth", "GB/s", bytes / 1e9, times,
                                                 "bytes read + written per second (BabelStream / nvbandwidth "
                                                 "convention), 1 GB = 1e9 B"));
        rec.metrics.push_back(bench::time_metric("time", "us", 1e6, times, "time per operation"));
        if (name != "ce_copy") {
          rec.params["grid"] = grid;
          rec.params["block"] = kThreads;
          rec.params["grid_style"] =
              repeat  ? "persistent, repeated: SM count x occupancy blocks, grid-stride, 4 vectors in flight, "
                        "L2-only loads (ld.global.cg), each pass shifted by one block"
              : tiled ? fmt::format("tiled: one block per {} vectors of 16 B", kThreads * kTile)
                      : "persistent: SM count x occupancy blocks, grid-stride, 4 vectors in flight";
        }
        rec.params["reps_per_sample"] = run.reps_per_sample;
        rec.params["passes_per_launch"] = passes;
        rec.params["l2_resident"] = l2_resident;
        rec.extra["timing"] =
            repeat ? fmt::format(
                         "L2-resident: each launch makes {} passes over the arrays inside the kernel (launch and "
                         "drain amortised over {:.1f} GB); CUDA events around {} back-to-back launches per sample, "
                         "enqueued behind a latch kernel; {} untimed warm-up; time and bandwidth per pass, median "
                         "of samples",
                         passes, bytes_per_pass * passes / 1e9, run.reps_per_sample, plan.warmup + 2)
                   : fmt::format(
                         "CUDA events around {} back-to-back operations per sample, enqueued behind a latch kernel; {} "
                         "untimed warm-up; median of samples{}",
                         run.reps_per_sample, plan.warmup + 2,
                         l2_resident ? " (copy engine at an L2-resident size: includes each copy's launch cost)" : "");
        if (!l2_resident && size >= 4 * env.device.l2_bytes)
          bench::set_peak_reference(rec, "bandwidth", "hbm_bandwidth_gbps");
        if (run.latch_timed_out) rec.extra["warning"] = "enqueue outlasted the latch: samples include launch overhead";
        verify(*op, launch, stream.get(), pa, n4, passes, sum, rec);
        if (run.interrupted) rec.reason = rec.reason.empty() ? "interrupted: fewer samples" : rec.reason;
        env.report(fmt::format("{}: {:.0f} GB/s ({} samples){}", key, rec.metrics[0].value, times.count,
                               rec.outcome == results::Outcome::passed ? "" : " " + results::to_string(rec.outcome)));
      } catch (const CudaError& e) {
        rec.outcome = results::Outcome::failed;
        rec.reason = e.what();
        (void)cudaGetLastError();
      }
      records.push_back(std::move(rec));
    }
  }

  void verify(const Op& op, const std::function<void(cudaStream_t)>& launch, cudaStream_t stream, float4* a,
              std::size_t n4, int passes, unsigned long long* sum, results::Record& rec) {
    const std::string name = op.name;
    unsigned long long host = 0;
    if (name == "read") {
      GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(unsigned long long), stream));
      launch(stream);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
      GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(&host, sum, sizeof(host), cudaMemcpyDeviceToHost, stream));
      GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream));
      // Every pass adds the same sum (modulo 2^64, as the kernel's unsigned arithmetic wraps).
      const unsigned long long want = expected_word_sum(n4) * static_cast<unsigned long long>(passes);
      rec.extra["verified"] = host == want;
      rec.extra["verification"] = "sum of every 32-bit word read compared exactly with the host's sum";
      if (host != want) {
        rec.outcome = results::Outcome::incorrect;
        rec.reason = fmt::format("read sum {} differs from expected {}", host, want);
      }
      return;
    }
    // Poison the output (NaN), run once more, compare every element exactly.
    GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(a, 0xff, n4 * sizeof(float4), stream));
    launch(stream);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(unsigned long long), stream));
    const int which = name == "triad" ? kPatternTriad : kPatternB;
    verify_kernel<<<grid_, kThreads, 0, stream>>>(a, n4, which, sum);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(&host, sum, sizeof(host), cudaMemcpyDeviceToHost, stream));
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream));
    rec.extra["verified"] = host == 0;
    rec.extra["wrong_values"] = host;
    rec.extra["verification"] = "output poisoned with NaN, one more run, every element compared exactly";
    if (host != 0) {
      rec.outcome = results::Outcome::incorrect;
      rec.reason = fmt::format("{} wrong values of {}", host, 4 * n4);
    }
  }
};

}  // namespace

std::unique_ptr<Benchmark> make_memory_benchmark() {
  return std::make_unique<MemoryBenchmark>();
}

}  // namespace gpuscout::cuda
