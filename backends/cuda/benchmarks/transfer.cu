// Host <-> device transfers (key "transfer"), nvbandwidth's host cases:
//   h2d_ce_pinned / d2h_ce_pinned     cudaMemcpyAsync, pinned host memory, one direction
//   bidir_ce_pinned                   both directions at once on two streams: each direction's
//                                     rate while the other runs, and their sum
//   h2d_ce_pageable / d2h_ce_pageable cudaMemcpyAsync from/to ordinary (pageable) memory
//   h2d_sm_pinned / d2h_sm_pinned     a copy kernel reading/writing mapped pinned host memory
//   bidir_sm_pinned                   one kernel, half its blocks each way
//   latency_sm_pinned                 dependent loads by one GPU thread from host memory (pointer chase)
// Bandwidth counts the bytes crossing the link once (a copy of S bytes moves S bytes), GB/s = 1e9 B/s,
// as nvbandwidth and bandwidthTest do. Pinned buffers live on the GPU's NUMA node when it is known.
// Every case is verified after timing: destination poisoned, one more transfer, every 32-bit word
// compared with the pattern.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "gpuscout/bench/summary.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/case_outcome.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/copy_kernels.cuh"
#include "gpuscout/cuda/host_memory.hpp"
#include "gpuscout/cuda/nvml.hpp"
#include "gpuscout/cuda/pointer_chase.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"

namespace gpuscout::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

__global__ void __launch_bounds__(kThreads)
    sm_copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n) {
  copy_range(in, out, n, blockIdx.x * std::size_t{blockDim.x} + threadIdx.x, std::size_t{gridDim.x} * blockDim.x);
}

// Even blocks copy in0 -> out0 (host to device), odd blocks in1 -> out1 (device to host).
__global__ void __launch_bounds__(kThreads)
    sm_bidir_kernel(const uint4* __restrict__ in0, uint4* __restrict__ out0, const uint4* __restrict__ in1,
                    uint4* __restrict__ out1, std::size_t n) {
  const std::size_t half_grid = gridDim.x / 2;
  const std::size_t block = blockIdx.x / 2;
  const std::size_t first = block * blockDim.x + threadIdx.x;
  const std::size_t stride = half_grid * blockDim.x;
  if (blockIdx.x % 2 == 0) {
    copy_range(in0, out0, n, first, stride);
  } else {
    copy_range(in1, out1, n, first, stride);
  }
}

std::uint64_t host_wrong_words(const void* p, std::size_t bytes, std::uint32_t seed) {
  const auto* w = static_cast<const std::uint32_t*>(p);
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < bytes / 4; ++i) bad += w[i] != pattern_word(i, seed);
  return bad;
}

void host_fill(void* p, std::size_t bytes, std::uint32_t seed) {
  auto* w = static_cast<std::uint32_t*>(p);
  for (std::size_t i = 0; i < bytes / 4; ++i) w[i] = pattern_word(i, seed);
}

constexpr std::uint32_t kSeedH2D = 0x1234567u, kSeedD2H = 0x89abcdeu;

class TransferBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "transfer"; }
  std::string description() const override {
    return "Host <-> device bandwidth (copy engine and SM, pinned and pageable, each way and both at once) and "
           "host memory latency from the GPU";
  }

  std::vector<results::Record> run(const BenchEnv& env) override {
    std::vector<results::Record> records;
    gpu_ = env.device.index;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(gpu_));
    numa_node_ = gpu_numa_node();
    ScopedNodeAffinity affinity(numa_node_);
    affinity_cpus_ = affinity.cpus();
    link_ = link_description();
    int blocks_per_sm = 0;
    GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, sm_copy_kernel, kThreads, 0));
    grid_ = std::max(1, blocks_per_sm) * std::max(1, env.device.sm_count);
    grid_ += grid_ % 2;

    const auto sizes = sizes_for(env.options, "transfer-sizes", {64 * MiB}, {64 * MiB, 512 * MiB},
                                 {1 * MiB, 8 * MiB, 64 * MiB, 512 * MiB, 2 * GiB});
    for (std::uint64_t requested : sizes) {
      if (env.stop_requested()) break;
      run_size(env, requested - requested % 64, records);
    }
    if (!env.stop_requested() && wanted(env.options, "transfer/latency_sm_pinned")) records.push_back(latency(env));
    return records;
  }

 private:
  int gpu_ = 0;
  int grid_ = 0;
  std::optional<int> numa_node_;
  std::string affinity_cpus_;
  std::string link_;

  std::optional<int> gpu_numa_node() const {
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), gpu_) != cudaSuccess) return std::nullopt;
    std::string id = bus;
    for (char& ch : id) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::ifstream in("/sys/bus/pci/devices/" + id + "/numa_node");
    int node = -1;
    if (in >> node && node >= 0) return node;
    int attr = -1;
    if (cudaDeviceGetAttribute(&attr, cudaDevAttrHostNumaId, gpu_) == cudaSuccess && attr >= 0) return attr;
    (void)cudaGetLastError();
    return std::nullopt;
  }

  std::string link_description() const {
    const nvml::Library* nvml = nvml::Library::get();
    char bus[32] = {};
    if (nvml == nullptr || cudaDeviceGetPCIBusId(bus, sizeof(bus), gpu_) != cudaSuccess) return "";
    auto dev = nvml->device_by_pci_bus_id(bus);
    if (!dev) return "";
    auto gen = nvml->pcie_link_generation(*dev, false), width = nvml->pcie_link_width(*dev, false);
    if (!gen || !width) return "";
    return fmt::format("PCIe gen{} x{}", *gen, *width);
  }

  nlohmann::ordered_json base_params(const std::string& direction, const std::string& path,
                                     const std::string& host_memory, std::uint64_t size) const {
    nlohmann::ordered_json p;
    p["direction"] = direction;
    p["path"] = path;
    p["host_memory"] = host_memory;
    p["bytes"] = size;
    if (!link_.empty()) p["link"] = link_;
    return p;
  }

  void finish(results::Record& rec, const HostPlacement* placement) const {
    if (placement != nullptr) {
      rec.extra["host_placement"] = {
          {"requested_numa_node", placement->requested_node ? nlohmann::json(*placement->requested_node) : nullptr},
          {"actual_numa_node", placement->actual_node ? nlohmann::json(*placement->actual_node) : nullptr},
          {"method", placement->method}};
    }
    rec.extra["timing_thread_cpus"] = affinity_cpus_.empty() ? "not bound" : affinity_cpus_;
  }

  static constexpr const char* kNote =
      "bytes crossing the host link once per second (nvbandwidth convention), 1 GB = 1e9 B";

  void run_size(const BenchEnv& env, std::uint64_t size, std::vector<results::Record>& records) {
    const std::string st = bench::format_bytes(size);
    auto key = [&](const char* name) { return fmt::format("transfer/{}/{}", name, st); };
    const char* all[] = {"h2d_ce_pinned",   "d2h_ce_pinned", "bidir_ce_pinned", "h2d_ce_pageable",
                         "d2h_ce_pageable", "h2d_sm_pinned", "d2h_sm_pinned",   "bidir_sm_pinned"};
    std::vector<std::string> cases;
    for (const char* c : all) {
      if (wanted(env.options, key(c))) cases.emplace_back(c);
    }
    if (cases.empty() || size == 0) return;
    bool pageable = false;
    for (const auto& c : cases) pageable = pageable || c.find("pageable") != std::string::npos;

    if (auto shortfall = memory_shortfall(2 * size)) {
      for (const auto& c : cases) {
        records.push_back(unrun_record(key(c.c_str()), "transfer", gpu_, base_params("", "", "", size),
                                       results::Outcome::skipped, *shortfall));
      }
      return;
    }
    DeviceBuffer<std::uint32_t> dev_dst(size / 4), dev_src(size / 4);
    DeviceBuffer<unsigned long long> wrong(1);
    HostBuffer host_src(size, HostMemoryKind::pinned_mapped, gpu_, numa_node_);
    HostBuffer host_dst(size, HostMemoryKind::pinned_mapped, gpu_, numa_node_);
    std::optional<HostBuffer> page_src, page_dst;
    if (pageable) {
      page_src.emplace(size, HostMemoryKind::pageable, gpu_, numa_node_);
      page_dst.emplace(size, HostMemoryKind::pageable, gpu_, numa_node_);
      host_fill(page_src->get(), size, kSeedH2D);
    }
    host_fill(host_src.get(), size, kSeedH2D);
    Stream s1, s2;
    fill_pattern_kernel<<<grid_, kThreads, 0, s1.get()>>>(dev_src.get(), size / 4, kSeedD2H);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s1.get()));

    // Checks: device destination (H2D) on the GPU, host destination (D2H) on the CPU.
    auto device_wrong = [&](cudaStream_t s) {
      unsigned long long host = 0;
      GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(wrong.get(), 0, sizeof(host), s));
      count_pattern_mismatches_kernel<<<grid_, kThreads, 0, s>>>(dev_dst.get(), size / 4, kSeedH2D, wrong.get());
      GPUSCOUT_CUDA_CHECK_LAUNCH();
      GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(&host, wrong.get(), sizeof(host), cudaMemcpyDeviceToHost, s));
      GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s));
      return static_cast<std::uint64_t>(host);
    };

    for (const std::string& c : cases) {
      if (env.stop_requested()) break;
      const bool h2d = (c.rfind("h2d", 0) == 0);
      const bool bidir = (c.rfind("bidir", 0) == 0);
      const bool sm = c.find("_sm_") != std::string::npos;
      const bool is_pageable = c.find("pageable") != std::string::npos;
      const std::string direction = bidir ? "both" : (h2d ? "host_to_device" : "device_to_host");
      results::Record rec;
      rec.key = key(c.c_str());
      rec.benchmark = "transfer";
      rec.gpus = {gpu_};
      rec.params = base_params(direction, sm ? "SM copy kernel on mapped host memory" : "copy engine (cudaMemcpyAsync)",
                               is_pageable ? "pageable" : "pinned", size);
      record_case(rec, [&] {
        const HostBuffer& hs = is_pageable ? *page_src : host_src;
        const HostBuffer& hd = is_pageable ? *page_dst : host_dst;
        void* d_dst = dev_dst.get();
        const void* d_src = dev_src.get();
        const int grid = grid_;
        const std::size_t n16 = size / 16;
        std::uint64_t bad = 0;
        if (!bidir) {
          std::function<void(cudaStream_t)> launch;
          if (!sm) {
            launch = [=, &hs, &hd](cudaStream_t s) {
              if (h2d) {
                GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(d_dst, hs.get(), size, cudaMemcpyHostToDevice, s));
              } else {
                GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(hd.get(), d_src, size, cudaMemcpyDeviceToHost, s));
              }
            };
          } else {
            const uint4* in = static_cast<const uint4*>(h2d ? hs.device_pointer() : d_src);
            uint4* out = static_cast<uint4*>(h2d ? d_dst : hd.device_pointer());
            launch = [=](cudaStream_t s) { sm_copy_kernel<<<grid, kThreads, 0, s>>>(in, out, n16); };
          }
          TelemetryScope telemetry(env.telemetry);
          TimingPlan plan;
          plan.min_sample_s = 0.02;
          plan.max_reps = 64;
          // A pageable copy stages through the driver's pinned buffer and returns only when staged:
          // it would stall behind a latch, so its enqueue stays in the timed region.
          plan.hide_enqueue = !is_pageable;
          const TimedRun run = time_launches(s1.get(), launch, plan, env.options.timing, env.interrupted);
          rec.telemetry = telemetry.finish();
          if (run.seconds.empty()) throw std::runtime_error("interrupted");
          const auto times = bench::summarize(run.seconds);
          rec.metrics.push_back(bench::rate_metric("bandwidth", "GB/s", size / 1e9, times, kNote));
          rec.metrics.push_back(bench::time_metric("time", "us", 1e6, times, "time per transfer"));
          rec.params["reps_per_sample"] = run.reps_per_sample;
          rec.extra["timing"] = is_pageable ? "CUDA events around back-to-back copies (enqueue included: pageable "
                                              "copies block the CPU); median of samples"
                                            : "CUDA events around back-to-back transfers enqueued behind a latch "
                                              "kernel; median of samples";
          bench::set_peak_reference(rec, "bandwidth", "host_link_gbps");
          // Verify one fresh transfer.
          if (h2d) {
            GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(d_dst, 0xff, size, s1.get()));
            launch(s1.get());
            GPUSCOUT_CUDA_CHECK_LAUNCH();
            bad = device_wrong(s1.get());
          } else {
            std::memset(hd.get(), 0xff, size);
            launch(s1.get());
            GPUSCOUT_CUDA_CHECK_LAUNCH();
            GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s1.get()));
            bad = host_wrong_words(hd.get(), size, kSeedD2H);
          }
        } else {
          bad = time_bidirectional(env, sm, size, host_src, host_dst, dev_dst.get(), dev_src.get(), s1.get(), s2.get(),
                                   rec);
          if (!rec.metrics.empty()) bad += device_wrong(s1.get());
        }
        if (rec.metrics.empty()) throw std::runtime_error("interrupted");
        rec.extra["verified"] = bad == 0;
        rec.extra["wrong_values"] = bad;
        rec.extra["verification"] = "destination poisoned, one more transfer, every 32-bit word compared";
        if (bad != 0) {
          rec.outcome = results::Outcome::incorrect;
          rec.reason = fmt::format("{} wrong words of {}", bad, (bidir ? 2 : 1) * size / 4);
        }
        finish(rec, is_pageable ? &hs.placement() : &host_src.placement());
        env.report(fmt::format("{}: {:.1f} GB/s{}", rec.key, rec.metrics[0].value,
                               rec.outcome == results::Outcome::passed ? "" : " " + results::to_string(rec.outcome)));
      });
      records.push_back(std::move(rec));
    }
  }

  // Both directions at once. CE: H2D on s1 and D2H on s2, both released by one latch through an
  // event, each timed by its own events. SM: one kernel, half the blocks each way. Returns the
  // number of wrong words in the host destination after a verification run (the device side is
  // checked by the caller).
  std::uint64_t time_bidirectional(const BenchEnv& env, bool sm, std::uint64_t size, const HostBuffer& hs,
                                   const HostBuffer& hd, void* d_dst, const void* d_src, cudaStream_t s1,
                                   cudaStream_t s2, results::Record& rec) {
    auto issue = [&](int reps) {
      for (int r = 0; r < reps; ++r) {
        if (sm) {
          sm_bidir_kernel<<<grid_, kThreads, 0, s1>>>(static_cast<const uint4*>(hs.device_pointer()),
                                                      static_cast<uint4*>(d_dst), static_cast<const uint4*>(d_src),
                                                      static_cast<uint4*>(hd.device_pointer()), size / 16);
          GPUSCOUT_CUDA_CHECK_LAUNCH();
        } else {
          GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(d_dst, hs.get(), size, cudaMemcpyHostToDevice, s1));
          GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(hd.get(), d_src, size, cudaMemcpyDeviceToHost, s2));
        }
      }
    };
    Event start, end1, end2;
    StreamLatch latch;
    // Warm-up, and one timed round to size the samples.
    issue(2);
    GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), s1));
    issue(1);
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(end1.get(), s1));
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end1.get()));
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s2));
    const int reps = std::clamp(static_cast<int>(std::ceil(0.02 / std::max(end1.seconds_since(start), 1e-6))), 1, 32);

    std::vector<double> total_s, h2d_s, d2h_s;
    TelemetryScope telemetry(env.telemetry);
    const auto t0 = std::chrono::steady_clock::now();
    while (!env.stop_requested()) {
      latch.block(s1);
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), s1));
      GPUSCOUT_CUDA_CHECK(cudaStreamWaitEvent(s2, start.get(), 0));
      issue(reps);
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(end1.get(), s1));
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(end2.get(), s2));
      latch.release();
      GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end1.get()));
      GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end2.get()));
      const double a = end1.seconds_since(start) / reps;
      const double b = sm ? a : end2.seconds_since(start) / reps;
      h2d_s.push_back(a);
      d2h_s.push_back(b);
      total_s.push_back(std::max(a, b));
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (bench::should_stop(env.options.timing, total_s, elapsed)) break;
    }
    rec.telemetry = telemetry.finish();
    if (total_s.empty()) return 0;
    const double gb = size / 1e9;
    const char* each_note = sm ? "bytes this direction moved over the kernel's time (both directions in one kernel), "
                                 "1 GB = 1e9 B"
                               : "bytes this direction moved over its own stream's time while the other direction "
                                 "ran, 1 GB = 1e9 B";
    rec.metrics.push_back(bench::rate_metric("total_bandwidth", "GB/s", 2 * gb, bench::summarize(total_s),
                                             "sum of both directions: 2 x bytes over the time until both finished"));
    rec.metrics.push_back(bench::rate_metric("h2d_bandwidth", "GB/s", gb, bench::summarize(h2d_s), each_note));
    rec.metrics.push_back(bench::rate_metric("d2h_bandwidth", "GB/s", gb, bench::summarize(d2h_s), each_note));
    rec.params["reps_per_sample"] = reps;
    rec.extra["timing"] = sm ? "CUDA events around back-to-back kernels behind a latch kernel; median of samples"
                             : "two streams started together (second waits on the first's start event) behind a "
                               "latch kernel; each direction timed by its own end event; median of samples";
    bench::set_peak_reference(rec, "total_bandwidth", "host_link_bidirectional_gbps");
    // Verification run of both directions.
    GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(d_dst, 0xff, size, s1));
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s1));
    std::memset(hd.get(), 0xff, size);
    issue(1);
    GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
    return host_wrong_words(hd.get(), size, kSeedD2H);
  }

  results::Record latency(const BenchEnv& env) {
    const std::size_t buffer_bytes = 2 * MiB;
    const std::size_t nodes = buffer_bytes / sizeof(ChaseNode);
    const int accesses = 10000;
    results::Record rec;
    rec.key = "transfer/latency_sm_pinned";
    rec.benchmark = "transfer";
    rec.gpus = {gpu_};
    rec.params = {{"direction", "device_reads_host"},
                  {"path", "one GPU thread, dependent 8-byte loads from mapped pinned host memory"},
                  {"buffer_bytes", buffer_bytes},
                  {"node_bytes", sizeof(ChaseNode)},
                  {"accesses_per_launch", accesses}};
    if (!link_.empty()) rec.params["link"] = link_;
    record_case(rec, [&] {
      HostBuffer host(buffer_bytes, HostMemoryKind::pinned_mapped, gpu_, numa_node_);
      auto* h = static_cast<ChaseNode*>(host.get());
      auto* d = static_cast<ChaseNode*>(host.device_pointer());
      link_chase_chain(h, d, nodes);
      const auto times = time_pointer_chase(env, d, accesses, rec);
      rec.metrics.push_back(bench::time_metric("latency", "us", 1e6, times,
                                               "time per dependent load from host memory (nvbandwidth "
                                               "host_device_latency_sm method)"));
      rec.extra["timing"] = "CUDA events around one kernel of 10000 dependent loads; median of samples";
      // The chain must still be intact (the GPU only read it).
      const std::size_t broken = broken_chase_links(h, d, nodes);
      rec.extra["verified"] = broken == 0;
      if (broken != 0) {
        rec.outcome = results::Outcome::incorrect;
        rec.reason = fmt::format("{} pointers changed", broken);
      }
      finish(rec, &host.placement());
      env.report(fmt::format("{}: {:.2f} us", rec.key, rec.metrics[0].value));
    });
    return rec;
  }
};

}  // namespace

std::unique_ptr<Benchmark> make_transfer_benchmark() {
  return std::make_unique<TransferBenchmark>();
}

}  // namespace gpuscout::cuda
