// GPU <-> GPU copies (key "p2p"), nvbandwidth's device_to_device cases for every pair of GPUs:
//   ce_write / ce_read        cudaMemcpyPeerAsync issued on the source's stream (write: push) or
//                             the destination's stream (read: pull), one direction
//   sm_write / sm_read        a copy kernel on the source writing peer memory / on the destination
//                             reading peer memory
//   ce_bidir / sm_bidir       both directions at once (write flavour): each direction's rate while
//                             the other runs, and their sum ("total", nvbandwidth's _total matrix)
//   latency_sm                one GPU thread chasing pointers through the peer's memory (2 MiB
//                             chain, nvbandwidth device_to_device_latency_sm)
// plus one "p2p/matrix/<size>" record holding the bandwidth and latency matrices. Bytes cross the
// link once per copy, GB/s = 1e9 B/s. Without peer access the copy engine stages through host memory:
// labelled path "via_host", SM cases not_supported. Every copy is verified after timing.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gpuscout/bench/summary.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/case_outcome.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/copy_kernels.cuh"
#include "gpuscout/cuda/pointer_chase.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/cuda/topology.hpp"

namespace gpuscout::cuda {
namespace {

constexpr int kThreads = 512;
constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

// The shared 16-byte copy loop (copy_kernels.cuh); either side may be peer memory.
__global__ void __launch_bounds__(kThreads)
    p2p_copy_kernel(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n) {
  copy_range(in, out, n, blockIdx.x * std::size_t{blockDim.x} + threadIdx.x, std::size_t{gridDim.x} * blockDim.x);
}

// Buffers of one GPU for one size: a source (filled with its seed) and a destination.
struct GpuBuffers {
  int gpu = 0;
  std::uint32_t seed = 0;
  DeviceBuffer<std::uint32_t> src, dst;
  DeviceBuffer<unsigned long long> wrong;
  int grid = 0;
};

class P2pBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "p2p"; }
  std::string description() const override {
    return "GPU <-> GPU bandwidth for every pair (copy engine and SM, read and write, one way and both ways) and "
           "peer memory latency";
  }
  int min_gpus() const override { return 2; }

  std::vector<results::Record> run(const BenchEnv& env) override {
    std::vector<results::Record> records;
    if (env.gpus.size() < 2) {
      results::Record r;
      r.key = "p2p";
      r.benchmark = "p2p";
      r.gpus = env.gpus;
      r.outcome = results::Outcome::not_supported;
      r.reason = fmt::format("needs 2 or more GPUs; {} visible to this process", env.gpus.size());
      records.push_back(std::move(r));
      return records;
    }
    topo_ = topo::build_topology(read_topology());
    const auto sizes = sizes_for(env.options, "p2p-sizes", {256 * MiB}, {512 * MiB}, {64 * MiB, 512 * MiB, 2 * GiB});
    const std::size_t n = env.gpus.size();
    first_size_ = sizes.empty() ? 0 : sizes.front() - sizes.front() % 64;  // latency runs once, with it
    for (std::uint64_t requested : sizes) {
      const std::uint64_t size = requested - requested % 64;
      const std::string st = bench::format_bytes(size);
      // matrices[case][i][j], indexed by position in env.gpus.
      std::map<std::string, std::vector<std::vector<std::optional<double>>>> matrices;
      auto cell = [&](const std::string& c, std::size_t i, std::size_t j, double v) {
        auto& m = matrices[c];
        if (m.empty()) m.assign(n, std::vector<std::optional<double>>(n));
        m[i][j] = v;
      };
      for (std::size_t ia = 0; ia < n && !env.stop_requested(); ++ia) {
        for (std::size_t ib = ia + 1; ib < n && !env.stop_requested(); ++ib) {
          run_pair(env, env.gpus[ia], env.gpus[ib], size, st, records,
                   [&](const std::string& c, int s, int d, double v) {
                     cell(c, s == env.gpus[ia] ? ia : ib, d == env.gpus[ia] ? ia : ib, v);
                   });
        }
      }
      results::Record m;
      m.key = "p2p/matrix/" + st;
      m.benchmark = "p2p";
      m.gpus = env.gpus;
      m.params = {{"bytes", size}};
      m.extra["rows_are"] = "source GPU (data flows row -> column); latency: row GPU reads column GPU's memory";
      m.extra["gpus"] = env.gpus;
      for (const auto& [c, mat] : matrices) {
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        for (const auto& row : mat) {
          nlohmann::ordered_json r = nlohmann::ordered_json::array();
          for (const auto& v : row) r.push_back(v ? nlohmann::ordered_json(bench::round_significant(*v, 5)) : nullptr);
          rows.push_back(std::move(r));
        }
        m.extra[c == "latency_sm" ? "latency_us" : "bandwidth_gbps_" + c] = std::move(rows);
      }
      m.extra["units"] = "GB/s (1e9 B/s) medians; latency in us";
      records.push_back(std::move(m));
    }
    return records;
  }

 private:
  topo::Topology topo_;

  std::string path_label(int a, int b) const {
    const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
    if (ua >= topo_.p2p_path.size() || ub >= topo_.p2p_path.size()) return "unknown";
    std::string p = topo_.p2p_path[ua][ub];
    if (p == "nvlink") p = fmt::format("nvlink (NV{})", topo_.nvlink_count[ua][ub]);
    if (p == "pcie_p2p") p = fmt::format("pcie_p2p ({})", topo_.matrix[ua][ub]);
    if (p == "via_host") p = "via_host (no peer access: the copy is staged through host memory)";
    return p;
  }

  static int copy_grid(int gpu) {
    int blocks_per_sm = 0, sms = 0;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(gpu));
    GPUSCOUT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, p2p_copy_kernel, kThreads, 0));
    GPUSCOUT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
    return std::max(1, blocks_per_sm) * std::max(1, sms);
  }

  static std::uint64_t wrong_words(GpuBuffers& b, std::size_t words, std::uint32_t seed, cudaStream_t s) {
    unsigned long long host = 0;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(b.gpu));
    GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(b.wrong.get(), 0, sizeof(host), s));
    count_pattern_mismatches_kernel<<<b.grid, kThreads, 0, s>>>(b.dst.get(), words, seed, b.wrong.get());
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(&host, b.wrong.get(), sizeof(host), cudaMemcpyDeviceToHost, s));
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(s));
    return host;
  }

  results::Record base(const std::string& c, int src, int dst, const std::string& st, std::uint64_t size,
                       const std::string& direction) const {
    results::Record r;
    r.key = fmt::format("p2p/{}/gpu{}_to_gpu{}/{}", c, src, dst, st);
    r.benchmark = "p2p";
    r.gpus = {src, dst};
    r.params = {{"source_gpu", src},
                {"destination_gpu", dst},
                {"bytes", size},
                {"direction", direction},
                {"path", path_label(src, dst)}};
    return r;
  }

  using CellFn = std::function<void(const std::string&, int, int, double)>;

  void run_pair(const BenchEnv& env, int a, int b, std::uint64_t size, const std::string& st,
                std::vector<results::Record>& records, const CellFn& cell) {
    int ab = 0, ba = 0;
    GPUSCOUT_CUDA_CHECK(cudaDeviceCanAccessPeer(&ab, a, b));
    GPUSCOUT_CUDA_CHECK(cudaDeviceCanAccessPeer(&ba, b, a));
    const bool peer = ab != 0 && ba != 0;
    if (peer) {
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        GPUSCOUT_CUDA_CHECK(cudaSetDevice(x));
        const cudaError_t rc = cudaDeviceEnablePeerAccess(y, 0);
        if (rc != cudaSuccess && rc != cudaErrorPeerAccessAlreadyEnabled) GPUSCOUT_CUDA_CHECK(rc);
        (void)cudaGetLastError();
      }
    }
    GpuBuffers bufs[2];
    const std::size_t words = size / 4;
    try {
      for (int k = 0; k < 2; ++k) {
        const int g = k == 0 ? a : b;
        GPUSCOUT_CUDA_CHECK(cudaSetDevice(g));
        if (auto shortfall = memory_shortfall(2 * size)) throw std::runtime_error(*shortfall);
        bufs[k].gpu = g;
        bufs[k].seed = 0x51u + 0x1000u * static_cast<std::uint32_t>(g);
        bufs[k].src = DeviceBuffer<std::uint32_t>(words);
        bufs[k].dst = DeviceBuffer<std::uint32_t>(words);
        bufs[k].wrong = DeviceBuffer<unsigned long long>(1);
        bufs[k].grid = copy_grid(g);
        fill_pattern_kernel<<<bufs[k].grid, kThreads>>>(bufs[k].src.get(), words, bufs[k].seed);
        GPUSCOUT_CUDA_CHECK_LAUNCH();
        GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
      }
    } catch (const std::exception& e) {
      for (const char* c : {"ce_write", "ce_read", "sm_write", "sm_read", "ce_bidir", "sm_bidir"}) {
        records.push_back(unrun_record(fmt::format("p2p/{}/gpu{}_to_gpu{}/{}", c, a, b, st), "p2p", a,
                                       {{"bytes", size}}, results::Outcome::skipped, e.what()));
      }
      return;
    }
    // One direction at a time.
    for (int k = 0; k < 2; ++k) {
      GpuBuffers& s = bufs[k];
      GpuBuffers& d = bufs[1 - k];
      for (const char* c : {"ce_write", "ce_read", "sm_write", "sm_read"}) {
        if (env.stop_requested()) return;
        const std::string key = fmt::format("p2p/{}/gpu{}_to_gpu{}/{}", c, s.gpu, d.gpu, st);
        if (!wanted(env.options, key)) continue;
        const bool ce = c[0] == 'c';
        const bool write = std::string(c).find("write") != std::string::npos;
        results::Record rec = base(c, s.gpu, d.gpu, st, size, "one_way");
        if (!runnable(rec, ce, peer, write ? "source GPU (write, push)" : "destination GPU (read, pull)")) {
          records.push_back(std::move(rec));
          continue;
        }
        record_case(rec, [&] {
          const int launcher = write ? s.gpu : d.gpu;
          const int grid = write ? s.grid : d.grid;
          GPUSCOUT_CUDA_CHECK(cudaSetDevice(launcher));
          Stream stream;
          const std::uint32_t* in = s.src.get();
          std::uint32_t* out = d.dst.get();
          const int sg = s.gpu, dg = d.gpu;
          std::function<void(cudaStream_t)> launch = [=](cudaStream_t st_) {
            if (ce) {
              GPUSCOUT_CUDA_CHECK(cudaMemcpyPeerAsync(out, dg, in, sg, size, st_));
            } else {
              p2p_copy_kernel<<<grid, kThreads, 0, st_>>>(reinterpret_cast<const uint4*>(in),
                                                          reinterpret_cast<uint4*>(out), size / 16);
            }
          };
          TelemetryScope telemetry(env.telemetry);
          TimingPlan plan;
          plan.min_sample_s = 0.02;
          plan.max_reps = 64;
          plan.hide_enqueue = true;
          const TimedRun run = time_launches(stream.get(), launch, plan, env.options.timing, env.interrupted);
          rec.telemetry = telemetry.finish();
          if (run.seconds.empty()) throw std::runtime_error("interrupted");
          const auto times = bench::summarize(run.seconds);
          rec.metrics.push_back(bench::rate_metric("bandwidth", "GB/s", size / 1e9, times,
                                                   "bytes crossing the GPU-GPU link once per second, one direction "
                                                   "(nvbandwidth convention), 1 GB = 1e9 B"));
          rec.metrics.push_back(bench::time_metric("time", "us", 1e6, times, "time per copy"));
          rec.params["reps_per_sample"] = run.reps_per_sample;
          rec.extra["timing"] =
              "CUDA events around back-to-back copies enqueued behind a latch kernel (nvbandwidth); median of samples";
          if (run.latch_timed_out) rec.extra["latch_timed_out"] = true;
          // Verify one fresh copy.
          GPUSCOUT_CUDA_CHECK(cudaSetDevice(d.gpu));
          GPUSCOUT_CUDA_CHECK(cudaMemset(d.dst.get(), 0xff, size));
          GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());  // the copy below runs on another device's stream
          GPUSCOUT_CUDA_CHECK(cudaSetDevice(launcher));
          launch(stream.get());
          GPUSCOUT_CUDA_CHECK_LAUNCH();
          GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
          const std::uint64_t bad = verify(d, words, s.seed);
          finish_verified(rec, bad);
          cell(c, s.gpu, d.gpu, rec.metrics[0].value);
          env.report(fmt::format("{}: {:.1f} GB/s", rec.key, rec.metrics[0].value));
        });
        records.push_back(std::move(rec));
      }
    }
    for (const char* c : {"ce_bidir", "sm_bidir"}) {
      if (env.stop_requested()) return;
      const std::string key = fmt::format("p2p/{}/gpu{}_to_gpu{}/{}", c, a, b, st);
      if (!wanted(env.options, key)) continue;
      results::Record rec = base(c, a, b, st, size, "both_ways");
      const bool ce = c[0] == 'c';
      if (!runnable(rec, ce, peer, "each source GPU (write, push)")) {
        records.push_back(std::move(rec));
        continue;
      }
      record_case(rec, [&] {
        time_bidirectional(env, ce, bufs[0], bufs[1], size, rec);
        const std::uint64_t bad = verify(bufs[1], words, bufs[0].seed) + verify(bufs[0], words, bufs[1].seed);
        finish_verified(rec, bad);
        if (const auto* t = rec.find_metric("total_bandwidth")) {
          cell(std::string(c) + "_total", a, b, t->value);
          cell(std::string(c) + "_total", b, a, t->value);
        }
        for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
          if (const auto* m = rec.find_metric(fmt::format("bandwidth_gpu{}_to_gpu{}", x, y))) {
            cell(std::string(c) + "_each", x, y, m->value);
          }
        }
        env.report(fmt::format("{}: {:.1f} GB/s total", rec.key, rec.metrics[0].value));
      });
      records.push_back(std::move(rec));
    }
    for (auto [reader, owner] : {std::pair{a, b}, std::pair{b, a}}) {
      if (env.stop_requested()) return;
      const std::string key = fmt::format("p2p/latency_sm/gpu{}_reads_gpu{}", reader, owner);
      if (!wanted(env.options, key) || size != first_size_) continue;
      records.push_back(latency(env, reader, owner, peer, key, cell));
    }
  }

  std::uint64_t first_size_ = 0;

  // Labels a copy case's engine and issuer; an SM copy without peer access cannot run: the record
  // says so (not_supported) and this returns false.
  static bool runnable(results::Record& rec, bool ce, bool peer, const char* issued_by) {
    rec.params["engine"] = ce ? "copy engine (cudaMemcpyPeerAsync)" : "SM copy kernel (16-byte loads/stores)";
    rec.params["issued_by"] = issued_by;
    if (ce || peer) return true;
    rec.outcome = results::Outcome::not_supported;
    rec.reason =
        fmt::format("no peer access between GPU {} and GPU {}: SM copies need it", rec.gpus.at(0), rec.gpus.at(1));
    return false;
  }

  static std::uint64_t verify(GpuBuffers& d, std::size_t words, std::uint32_t seed) {
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(d.gpu));
    Stream s;
    return wrong_words(d, words, seed, s.get());
  }

  static void finish_verified(results::Record& rec, std::uint64_t bad) {
    rec.extra["verified"] = bad == 0;
    rec.extra["wrong_values"] = bad;
    rec.extra["verification"] = "destination poisoned, one more copy, every 32-bit word compared on the GPU";
    if (bad != 0) {
      rec.outcome = results::Outcome::incorrect;
      rec.reason = fmt::format("{} wrong 32-bit words", bad);
    }
  }

  // Both directions at once: a -> b on a stream of the source a, b -> a on a stream of b, started
  // together behind a latch; each direction timed by its own events (nvbandwidth).
  void time_bidirectional(const BenchEnv& env, bool ce, GpuBuffers& A, GpuBuffers& B, std::uint64_t size,
                          results::Record& rec) {
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(A.gpu));
    Stream sa;
    Event start_a, end_a;
    StreamLatch latch;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(B.gpu));
    Stream sb;
    Event start_b, end_b;
    auto issue = [&](int reps) {
      for (int r = 0; r < reps; ++r) {
        for (int k = 0; k < 2; ++k) {
          GpuBuffers& s = k == 0 ? A : B;
          GpuBuffers& d = k == 0 ? B : A;
          cudaStream_t st = k == 0 ? sa.get() : sb.get();
          GPUSCOUT_CUDA_CHECK(cudaSetDevice(s.gpu));
          if (ce) {
            GPUSCOUT_CUDA_CHECK(cudaMemcpyPeerAsync(d.dst.get(), d.gpu, s.src.get(), s.gpu, size, st));
          } else {
            p2p_copy_kernel<<<s.grid, kThreads, 0, st>>>(reinterpret_cast<const uint4*>(s.src.get()),
                                                         reinterpret_cast<uint4*>(d.dst.get()), size / 16);
            GPUSCOUT_CUDA_CHECK_LAUNCH();
          }
        }
      }
    };
    // Warm-up and one round to size the samples.
    issue(4);
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(A.gpu));
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(start_a.get(), sa.get()));
    issue(1);
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(A.gpu));
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(end_a.get(), sa.get()));
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end_a.get()));
    GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(sb.get()));
    const int reps =
        std::clamp(static_cast<int>(std::ceil(0.02 / std::max(end_a.seconds_since(start_a), 1e-6))), 1, 32);
    std::vector<double> ta, tb, total_rate;
    TelemetryScope telemetry(env.telemetry);
    const auto t0 = std::chrono::steady_clock::now();
    while (!env.stop_requested()) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(A.gpu));
      latch.block(sa.get());
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(start_a.get(), sa.get()));
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(B.gpu));
      GPUSCOUT_CUDA_CHECK(cudaStreamWaitEvent(sb.get(), start_a.get(), 0));
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(start_b.get(), sb.get()));
      issue(reps);
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(A.gpu));
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(end_a.get(), sa.get()));
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(B.gpu));
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(end_b.get(), sb.get()));
      latch.release();
      GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end_a.get()));
      GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(end_b.get()));
      const double a_s = end_a.seconds_since(start_a) / reps;
      const double b_s = end_b.seconds_since(start_b) / reps;
      ta.push_back(a_s);
      tb.push_back(b_s);
      total_rate.push_back(size / 1e9 / a_s + size / 1e9 / b_s);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (bench::should_stop(env.options.timing, ta, elapsed)) break;
    }
    rec.telemetry = telemetry.finish();
    if (ta.empty()) throw std::runtime_error("interrupted");
    const auto rates = bench::summarize(total_rate);
    results::Metric total;
    total.name = "total_bandwidth";
    total.unit = "GB/s";
    total.statistic = "median";
    total.samples = static_cast<std::int64_t>(rates.count);
    total.value = rates.median;
    if (rates.count > 1) total.spread = bench::value_spread(rates);
    total.note = "sum of both directions' rates, each measured while the other ran (nvbandwidth _total)";
    rec.metrics.push_back(total);
    const char* each = "bytes this direction moved over its own stream's time while the other direction ran";
    rec.metrics.push_back(bench::rate_metric(fmt::format("bandwidth_gpu{}_to_gpu{}", A.gpu, B.gpu), "GB/s", size / 1e9,
                                             bench::summarize(ta), each));
    rec.metrics.push_back(bench::rate_metric(fmt::format("bandwidth_gpu{}_to_gpu{}", B.gpu, A.gpu), "GB/s", size / 1e9,
                                             bench::summarize(tb), each));
    rec.params["reps_per_sample"] = reps;
    rec.extra["timing"] =
        "two streams (one per source GPU) started together behind a latch kernel; each direction timed by its own "
        "events; median of samples";
    // Verification: poison both destinations, one more round.
    for (GpuBuffers* d : {&A, &B}) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(d->gpu));
      GPUSCOUT_CUDA_CHECK(cudaMemset(d->dst.get(), 0xff, size));
      GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
    }
    issue(1);
    for (int g : {A.gpu, B.gpu}) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(g));
      GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

  results::Record latency(const BenchEnv& env, int reader, int owner, bool peer, const std::string& key,
                          const CellFn& cell) {
    const std::size_t buffer_bytes = 2 * MiB;
    const std::size_t nodes = buffer_bytes / sizeof(ChaseNode);
    const int accesses = 100000;
    results::Record rec;
    rec.key = key;
    rec.benchmark = "p2p";
    rec.gpus = {reader, owner};
    rec.params = {{"reader_gpu", reader},
                  {"owner_gpu", owner},
                  {"path", path_label(owner, reader)},
                  {"method", "one GPU thread, dependent 8-byte loads from the peer's memory (pointer chase)"},
                  {"buffer_bytes", buffer_bytes},
                  {"node_bytes", sizeof(ChaseNode)},
                  {"accesses_per_launch", accesses}};
    if (!peer) {
      rec.outcome = results::Outcome::not_supported;
      rec.reason = "no peer access: the GPU cannot load the peer's memory";
      return rec;
    }
    record_case(rec, [&] {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(owner));
      DeviceBuffer<ChaseNode> chain(nodes);
      std::vector<ChaseNode> host(nodes);
      link_chase_chain(host.data(), chain.get(), nodes);
      GPUSCOUT_CUDA_CHECK(cudaMemcpy(chain.get(), host.data(), buffer_bytes, cudaMemcpyHostToDevice));
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(reader));
      const auto per_access = time_pointer_chase(env, chain.get(), accesses, rec);
      rec.metrics.push_back(bench::time_metric("latency", "us", 1e6, per_access,
                                               "time per dependent load from the peer GPU's memory (nvbandwidth "
                                               "device_to_device_latency_sm method)"));
      rec.extra["timing"] = "CUDA events around one kernel of 100000 dependent loads; median of samples";
      // The chain must be intact (the reader only loaded it).
      std::vector<ChaseNode> back(nodes);
      GPUSCOUT_CUDA_CHECK(cudaMemcpy(back.data(), chain.get(), buffer_bytes, cudaMemcpyDeviceToHost));
      const std::size_t broken = broken_chase_links(back.data(), chain.get(), nodes);
      rec.extra["verified"] = broken == 0;
      if (broken != 0) {
        rec.outcome = results::Outcome::incorrect;
        rec.reason = fmt::format("{} pointers changed", broken);
      }
      cell("latency_sm", reader, owner, rec.metrics[0].value);
      env.report(fmt::format("{}: {:.3f} us", rec.key, rec.metrics[0].value));
    });
    return rec;
  }
};

}  // namespace

std::unique_ptr<Benchmark> make_p2p_benchmark() {
  return std::make_unique<P2pBenchmark>();
}

}  // namespace gpuscout::cuda
