// NCCL collectives (key "collectives"), measured the way nccl-tests measures them:
//   all_reduce, all_gather, reduce_scatter, broadcast (root 0), alltoall (grouped send/recv),
//   sendrecv (ring: rank r sends to r+1, receives from r-1); sum reduction; in place and out of place.
// One code path for both ways to run: one process driving every local GPU (one communicator per
// GPU, created together in a group, calls grouped like nccl-tests -g N), or one process per GPU
// under MPI (the NCCL id travels through bench::World). Timing: a host clock around `iters`
// back-to-back collectives and one wait (nccl-tests' BenchTime), after untimed warm-up ops; time per
// op = elapsed / iters, several samples, median reported; rank 0 of an MPI run averages the ranks'
// times (bench::merge_rank_records). algbw = S / time and busbw = algbw x factor with nccl-tests'
// byte counts (bench::coll_counts, bench::busbw_factor). After timing, buffers are refilled with
// deterministic data, outputs poisoned, one more op run and every output element compared with the
// value bench::expected_value computes: the wrong-value count of nccl-tests.
// What NCCL chose (algorithm, protocol, channels) is read from gpuscout's NCCL profiler plugin
// (backends/cuda/nccl_profiler), which records only during that untimed verification op: the plugin
// keeps NCCL's event mask at 0 while timing, so NCCL creates no profiler events then.
// Watchdog: every wait for the GPU polls the streams and ncclCommGetAsyncError and, past
// --coll-timeout, aborts every communicator (ncclCommAbort): the case is recorded as timeout and the
// sweep ends. Communicators are blocking (a non-blocking one hands every launch to a helper thread
// and makes small collectives several times slower: measured 78-90 us instead of 10-20 us for 8 B
// on 2x H200), so an NCCL call that blocks the host itself (init, a first connection to a dead
// peer) is guarded by a thread that ends the run with a message after the same timeout.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpuscout/bench/collectives.hpp"
#include "gpuscout/bench/nccl_choice.hpp"
#include "gpuscout/bench/summary.hpp"
#include "gpuscout/bench/watchdog.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/nccl_profiler_control.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"

extern char** environ;

namespace gpuscout::cuda {
namespace {

using bench::Collective;

template <typename T>
__device__ inline T from_u32(std::uint32_t v) {
  return static_cast<T>(v);
}
template <>
__device__ inline __half from_u32<__half>(std::uint32_t v) {
  return __float2half(static_cast<float>(v));
}
template <>
__device__ inline __nv_bfloat16 from_u32<__nv_bfloat16>(std::uint32_t v) {
  return __float2bfloat16(static_cast<float>(v));
}
template <typename T>
__device__ inline double to_double(T v) {
  return static_cast<double>(v);
}
template <>
__device__ inline double to_double<__half>(__half v) {
  return static_cast<double>(__half2float(v));
}
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}

template <typename T>
__global__ void coll_fill(T* out, std::size_t count, int rank) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    out[i] = from_u32<T>(bench::fill_value(rank, i));
  }
}

template <typename T>
__global__ void coll_check(const T* out, std::size_t count, int op, int rank, int nranks, std::uint64_t param,
                           unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const T expected = from_u32<T>(bench::expected_value(op, rank, nranks, param, i));
    bad += to_double(out[i]) != to_double(expected);
  }
  if (bad != 0) atomicAdd(wrong, bad);
}

template <typename T>
void launch_fill(void* p, std::size_t count, int rank, cudaStream_t s) {
  if (count == 0) return;
  const int grid = static_cast<int>(std::min<std::size_t>((count + 255) / 256, 4096));
  coll_fill<T><<<grid, 256, 0, s>>>(static_cast<T*>(p), count, rank);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_check(const void* p, std::size_t count, int op, int rank, int nranks, std::uint64_t param,
                  unsigned long long* wrong, cudaStream_t s) {
  if (count == 0) return;
  const int grid = static_cast<int>(std::min<std::size_t>((count + 255) / 256, 4096));
  coll_check<T><<<grid, 256, 0, s>>>(static_cast<const T*>(p), count, op, rank, nranks, param, wrong);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

struct TypeOps {
  ncclDataType_t nccl;
  void (*fill)(void*, std::size_t, int, cudaStream_t);
  void (*check)(const void*, std::size_t, int, int, int, std::uint64_t, unsigned long long*, cudaStream_t);
};

std::optional<TypeOps> type_ops(const std::string& name) {
  if (name == "float") return TypeOps{ncclFloat32, launch_fill<float>, launch_check<float>};
  if (name == "half") return TypeOps{ncclFloat16, launch_fill<__half>, launch_check<__half>};
  if (name == "bf16") return TypeOps{ncclBfloat16, launch_fill<__nv_bfloat16>, launch_check<__nv_bfloat16>};
  if (name == "double") return TypeOps{ncclFloat64, launch_fill<double>, launch_check<double>};
  if (name == "int8") return TypeOps{ncclInt8, launch_fill<std::int8_t>, launch_check<std::int8_t>};
  if (name == "uint8") return TypeOps{ncclUint8, launch_fill<std::uint8_t>, launch_check<std::uint8_t>};
  if (name == "int32") return TypeOps{ncclInt32, launch_fill<std::int32_t>, launch_check<std::int32_t>};
  if (name == "uint32") return TypeOps{ncclUint32, launch_fill<std::uint32_t>, launch_check<std::uint32_t>};
  if (name == "int64") return TypeOps{ncclInt64, launch_fill<std::int64_t>, launch_check<std::int64_t>};
  if (name == "uint64") return TypeOps{ncclUint64, launch_fill<std::uint64_t>, launch_check<std::uint64_t>};
  return std::nullopt;
}

class NcclError : public Error {
 public:
  using Error::Error;
};

std::string nccl_text(ncclResult_t rc) {
  return fmt::format("{} ({})", ncclGetErrorString(rc), static_cast<int>(rc));
}

// One GPU this process drives: its global rank, communicator, stream and buffers.
struct LocalRank {
  int rank = 0;
  int gpu = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  unsigned long long* wrong = nullptr;
};

std::string nccl_version_text(int v) {
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

class CollectivesBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "collectives"; }
  std::string description() const override {
    return "NCCL all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv: time, algbw and busbw as "
           "nccl-tests, in and out of place, data verified; one process for all GPUs or one per GPU under MPI";
  }
  int min_gpus() const override { return 2; }
  bool spans_ranks() const override { return true; }

  std::vector<results::Record> run(const BenchEnv& env) override {
    std::vector<results::Record> records;
    bench::SingleProcessWorld single;
    bench::World& world = env.world != nullptr ? *env.world : single;
    const int local = static_cast<int>(env.gpus.size());
    const int nranks = world.size() * local;
    timeout_s_ = env.options.coll_timeout_s;
    launcher_ = world.launcher();
    if (nranks < 2) {
      results::Record r;
      r.key = "collectives";
      r.benchmark = "collectives";
      r.gpus = env.gpus;
      r.outcome = results::Outcome::not_supported;
      r.reason = fmt::format("needs 2 or more ranks (GPUs); this run has {} ({} process, {} GPU visible)", nranks,
                             world.size(), local);
      records.push_back(std::move(r));
      return records;
    }
    int version = 0;
    ncclGetVersion(&version);
    nccl_version_ = nccl_version_text(version);
    nccl_env_ = nlohmann::ordered_json::object();
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string kv = *e;
      if (kv.rfind("NCCL_", 0) == 0) {
        const auto eq = kv.find('=');
        nccl_env_[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
      }
    }
    // What to run.
    std::vector<Collective> ops;
    for (const auto& name : option_list(env.options, "coll-ops")) {
      auto c = bench::collective_from_string(name);
      if (!c) throw UsageError("--coll-ops: unknown collective '" + name + "' (all_reduce, all_gather, ...)");
      ops.push_back(*c);
    }
    if (ops.empty()) ops = bench::all_collectives();
    std::vector<bench::DataType> types;
    for (const auto& name : option_list(env.options, "coll-dtypes")) {
      auto t = bench::data_type_from_string(name);
      if (!t) throw UsageError("--coll-dtypes: unknown type '" + name + "' (float, half, bf16, double, int8, ...)");
      types.push_back(*t);
    }
    if (types.empty()) types.push_back(*bench::data_type_from_string("float"));
    const auto& given_sizes = option_list(env.options, "coll-sizes");
    const std::vector<std::uint64_t> sizes = given_sizes.empty()
                                                 ? bench::default_coll_sizes(env.options.mode == BenchMode::quick)
                                                 : bench::parse_byte_list(given_sizes, "coll-sizes");
    iters_ = 20;
    if (const auto& it = option_list(env.options, "coll-iters"); !it.empty()) iters_ = std::max(1, std::stoi(it[0]));
    samples_ = env.options.mode == BenchMode::quick ? 2 : (env.options.mode == BenchMode::full ? 5 : 3);
    inject_hang_ = !option_list(env.options, "coll-inject-hang").empty();
    bool profiler_on = true;
    if (const auto& p = option_list(env.options, "coll-nccl-profiler"); !p.empty()) {
      if (p[0] != "on" && p[0] != "off") throw UsageError("--coll-nccl-profiler: on or off, not '" + p[0] + "'");
      profiler_on = p[0] == "on";
    }
    // Short timed windows make small-message times depend on clocks and scheduling of the moment:
    // every case gets at least this much timed work (quick runs excepted).
    min_timed_s_ = env.options.mode == BenchMode::quick ? 0.0 : 0.05;

    // Buffers: the largest send and receive over every case.
    std::uint64_t max_bytes = 0;
    for (Collective c : ops) {
      for (const auto& t : types) {
        for (std::uint64_t s : sizes) {
          const auto k = bench::coll_counts(c, s, t.size, nranks);
          max_bytes = std::max<std::uint64_t>(max_bytes, std::max(k.send_count, k.recv_count) * t.size);
        }
      }
    }
    max_bytes = std::max<std::uint64_t>(max_bytes, 256);

    ranks_.clear();
    for (int i = 0; i < local; ++i) {
      LocalRank r;
      r.rank = world.rank() * local + i;
      r.gpu = env.gpus[static_cast<std::size_t>(i)];
      ranks_.push_back(r);
    }
    try {
      for (LocalRank& r : ranks_) {
        GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.gpu));
        if (auto shortfall = memory_shortfall(2 * max_bytes)) throw std::runtime_error(*shortfall);
        GPUSCOUT_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
        GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.send, max_bytes));
        GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.recv, max_bytes));
        GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.wrong, sizeof(unsigned long long)));
      }
      start_guard(world);
      profiler_.prepare(profiler_on);  // before the first communicator: NCCL reads NCCL_PROFILER_PLUGIN then
      init_comms(world, nranks);
      choice_unavailable_ = profiler_.unavailable_reason(nccl_version_);
      if (!choice_unavailable_.empty()) env.report("NCCL algorithm/protocol not recorded: " + choice_unavailable_);
    } catch (const std::exception& e) {
      results::Record r;
      r.key = "collectives/init";
      r.benchmark = "collectives";
      r.gpus = env.gpus;
      r.outcome = aborted_ ? results::Outcome::timeout : results::Outcome::failed;
      r.reason = e.what();
      r.extra["distributed"] = true;
      records.push_back(std::move(r));
      release();
      stop_guard();
      return records;
    }

    for (const auto& t : types) {
      const auto ops_t = type_ops(t.name);
      for (Collective c : ops) {
        for (std::uint64_t size : sizes) {
          for (bool in_place : {false, true}) {
            if (aborted_ || env.stop_requested()) break;
            if (in_place && !bench::in_place_defined(c)) continue;
            const std::string key = fmt::format("collectives/{}/{}/{}/{}", bench::to_string(c), t.name,
                                                in_place ? "inplace" : "oop", bench::format_bytes(size));
            if (!wanted(env.options, key)) continue;
            records.push_back(run_case(env, world, key, c, t, *ops_t, size, in_place, nranks));
          }
        }
      }
    }
    release();
    stop_guard();
    return records;
  }

 private:
  std::vector<LocalRank> ranks_;
  double timeout_s_ = 60;
  // Host-call guard: a deadline (steady clock, ns; 0 = no NCCL call in progress) the guard thread checks.
  std::atomic<std::int64_t> host_deadline_ns_{0};
  std::atomic<const char*> host_what_{""};
  std::atomic<bool> guard_stop_{false};
  std::thread guard_;

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  struct HostCall {
    HostCall(CollectivesBenchmark* b, const char* what) : b_(b) {
      b_->host_what_ = what;
      b_->host_deadline_ns_ = now_ns() + static_cast<std::int64_t>(b_->timeout_s_ * 1e9);
    }
    ~HostCall() { b_->host_deadline_ns_ = 0; }
    CollectivesBenchmark* b_;
  };
  void start_guard(bench::World& world) {
    guard_stop_ = false;
    guard_ = std::thread([this, &world] {
      while (!guard_stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const std::int64_t d = host_deadline_ns_.load();
        if (d != 0 && now_ns() > d) {
          world.abort(1, fmt::format("NCCL call {} did not return within {:g} s (--coll-timeout) on ranks {}: the "
                                     "collective is hung; ending the run",
                                     host_what_.load(), timeout_s_, rank_list()));
        }
      }
    });
  }
  void stop_guard() {
    guard_stop_ = true;
    if (guard_.joinable()) guard_.join();
  }
  bool aborted_ = false;
  bool inject_hang_ = false;
  bool injected_ = false;
  int iters_ = 20, samples_ = 3;
  double min_timed_s_ = 0.05;
  static constexpr int kMaxSamples = 100;
  NcclProfilerControl profiler_;
  std::string choice_unavailable_;  // empty when the plugin reports NCCL's choices
  std::string nccl_version_, launcher_;
  nlohmann::ordered_json nccl_env_;

  std::string rank_list() const {
    std::string s;
    for (const auto& r : ranks_) s += (s.empty() ? "" : ",") + std::to_string(r.rank);
    return s;
  }

  void abort_all() {
    for (LocalRank& r : ranks_) {
      if (r.comm != nullptr) {
        ncclCommAbort(r.comm);
        r.comm = nullptr;
      }
    }
    aborted_ = true;
  }

  // Polls until no communicator is in progress (non-blocking NCCL calls) or the deadline passes.
  void wait_comms_ready(const char* what) {
    bench::WatchdogOptions opt;
    opt.timeout_s = timeout_s_;
    const auto res = bench::wait_or_abort(
        [&](std::string& error) {
          bool pending = false;
          for (const LocalRank& r : ranks_) {
            ncclResult_t st = ncclSuccess;
            const ncclResult_t rc = ncclCommGetAsyncError(r.comm, &st);
            if (rc != ncclSuccess) st = rc;
            if (st == ncclInProgress) {
              pending = true;
            } else if (st != ncclSuccess) {
              error = fmt::format("rank {}: {}", r.rank, nccl_text(st));
              return bench::PollState::failed;
            }
          }
          return pending ? bench::PollState::pending : bench::PollState::done;
        },
        [&] { abort_all(); }, opt);
    if (res.status == bench::WatchdogResult::Status::timeout) {
      throw NcclError(bench::timeout_message(what, timeout_s_, rank_list()));
    }
    if (res.status == bench::WatchdogResult::Status::failed) {
      abort_all();
      throw NcclError(fmt::format("{}: {}", what, res.error));
    }
  }

  void check_call(ncclResult_t rc, const char* what) {
    if (rc == ncclSuccess) return;
    if (rc == ncclInProgress) {
      wait_comms_ready(what);
      return;
    }
    abort_all();
    throw NcclError(fmt::format("{} failed: {}", what, nccl_text(rc)));
  }

  void init_comms(bench::World& world, int nranks) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (world.rank() == 0) {
      const ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess) throw NcclError("ncclGetUniqueId failed: " + nccl_text(rc));
    }
    world.broadcast(&id, sizeof(id), 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;  // see the header comment; the host-call guard covers a hung init
    HostCall guard(this, "ncclCommInitRankConfig");
    ncclResult_t rc = ncclGroupStart();
    for (LocalRank& r : ranks_) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.gpu));
      const ncclResult_t irc = ncclCommInitRankConfig(&r.comm, nranks, id, r.rank, &config);
      if (irc != ncclSuccess && irc != ncclInProgress) rc = irc;
    }
    const ncclResult_t grc = ncclGroupEnd();
    if (rc != ncclSuccess) throw NcclError("ncclCommInitRankConfig failed: " + nccl_text(rc));
    if (grc != ncclSuccess && grc != ncclInProgress) throw NcclError("ncclCommInitRankConfig: " + nccl_text(grc));
    wait_comms_ready("communicator initialisation");
  }

  void release() {
    if (!aborted_) {
      HostCall guard(this, "ncclCommFinalize");
      ncclGroupStart();
      for (LocalRank& r : ranks_) {
        if (r.comm != nullptr) ncclCommFinalize(r.comm);
      }
      ncclGroupEnd();
      try {
        if (!ranks_.empty() && ranks_.front().comm != nullptr) wait_comms_ready("communicator finalisation");
      } catch (const std::exception&) {
      }
    }
    for (LocalRank& r : ranks_) {
      if (r.comm != nullptr) ncclCommDestroy(r.comm);
      r.comm = nullptr;
      cudaSetDevice(r.gpu);
      if (r.stream != nullptr) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamDestroy(r.stream));
      if (r.send != nullptr) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFree(r.send));
      if (r.recv != nullptr) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFree(r.recv));
      if (r.wrong != nullptr) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFree(r.wrong));
      r = LocalRank{};
    }
    ranks_.clear();
  }

  // Buffers of one call for rank r.
  std::pair<void*, void*> buffers(const LocalRank& r, Collective c, const bench::CollCounts& k, std::size_t elt,
                                  bool in_place) const {
    char* recv = static_cast<char*>(r.recv);
    if (!in_place) return {r.send, r.recv};
    switch (c) {
      case Collective::all_gather:
        return {recv + static_cast<std::size_t>(r.rank) * k.send_inplace_offset * elt, recv};
      case Collective::reduce_scatter:
        return {recv, recv + static_cast<std::size_t>(r.rank) * k.recv_inplace_offset * elt};
      default:
        return {recv, recv};
    }
  }

  // Enqueues one collective on every local rank (grouped). `skip_last` leaves the last local rank
  // out: the hang the watchdog test injects.
  void enqueue(Collective c, const bench::CollCounts& k, std::size_t elt, ncclDataType_t type, bool in_place,
               int nranks, bool skip_last = false) {
    HostCall guard(this, "enqueue (ncclGroupEnd)");
    check_call(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t rc = ncclSuccess;
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      if (skip_last && i + 1 == ranks_.size()) break;
      const LocalRank& r = ranks_[i];
      auto [send, recv] = buffers(r, c, k, elt, in_place);
      ncclResult_t x = ncclSuccess;
      switch (c) {
        case Collective::all_reduce:
          x = ncclAllReduce(send, recv, k.param_count, type, ncclSum, r.comm, r.stream);
          break;
        case Collective::all_gather:
          x = ncclAllGather(send, recv, k.param_count, type, r.comm, r.stream);
          break;
        case Collective::reduce_scatter:
          x = ncclReduceScatter(send, recv, k.param_count, type, ncclSum, r.comm, r.stream);
          break;
        case Collective::broadcast:
          x = ncclBroadcast(send, recv, k.param_count, type, 0, r.comm, r.stream);
          break;
        case Collective::alltoall:
          if (k.param_count == 0) break;
          for (int peer = 0; peer < nranks && x == ncclSuccess; ++peer) {
            const std::size_t off = static_cast<std::size_t>(peer) * k.param_count * elt;
            x = ncclSend(static_cast<char*>(send) + off, k.param_count, type, peer, r.comm, r.stream);
            if (x == ncclSuccess || x == ncclInProgress) {
              x = ncclRecv(static_cast<char*>(recv) + off, k.param_count, type, peer, r.comm, r.stream);
            }
          }
          break;
        case Collective::sendrecv:
          x = ncclSend(send, k.param_count, type, (r.rank + 1) % nranks, r.comm, r.stream);
          if (x == ncclSuccess || x == ncclInProgress) {
            x = ncclRecv(recv, k.param_count, type, (r.rank + nranks - 1) % nranks, r.comm, r.stream);
          }
          break;
      }
      if (x != ncclSuccess && x != ncclInProgress) rc = x;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (rc != ncclSuccess) {
      abort_all();
      throw NcclError("enqueueing the collective failed: " + nccl_text(rc));
    }
    check_call(end, "ncclGroupEnd");
  }

  // Waits for every local stream under the watchdog. Throws NcclError (after aborting) on timeout or error.
  void wait_streams(const std::string& what, const std::atomic<bool>* interrupted) {
    bench::WatchdogOptions opt;
    opt.timeout_s = timeout_s_;
    int polls = 0;
    const auto res = bench::wait_or_abort(
        [&](std::string& error) {
          bool done = true;
          for (const LocalRank& r : ranks_) {
            const cudaError_t q = cudaStreamQuery(r.stream);
            if (q == cudaErrorNotReady) {
              done = false;
            } else if (q != cudaSuccess) {
              error = fmt::format("rank {}: CUDA {}", r.rank, cudaGetErrorString(q));
              return bench::PollState::failed;
            }
          }
          if (done) return bench::PollState::done;
          if (++polls % 64 == 0) {
            for (const LocalRank& r : ranks_) {
              ncclResult_t st = ncclSuccess;
              ncclCommGetAsyncError(r.comm, &st);
              if (st != ncclSuccess && st != ncclInProgress) {
                error = fmt::format("rank {}: {}", r.rank, nccl_text(st));
                return bench::PollState::failed;
              }
            }
          }
          return bench::PollState::pending;
        },
        [&] { abort_all(); }, opt, interrupted);
    switch (res.status) {
      case bench::WatchdogResult::Status::completed:
        return;
      case bench::WatchdogResult::Status::timeout:
        throw NcclError(bench::timeout_message(what, timeout_s_, rank_list()));
      case bench::WatchdogResult::Status::interrupted:
        throw NcclError("interrupted: communicators aborted");
      case bench::WatchdogResult::Status::failed:
        abort_all();
        throw NcclError(what + ": " + res.error);
    }
  }

  results::Record run_case(const BenchEnv& env, bench::World& world, const std::string& key, Collective c,
                           const bench::DataType& t, const TypeOps& ops, std::uint64_t size, bool in_place,
                           int nranks) {
    const auto k = bench::coll_counts(c, size, t.size, nranks);
    const double factor = bench::busbw_factor(c, nranks);
    results::Record rec;
    rec.key = key;
    rec.benchmark = "collectives";
    for (const auto& r : ranks_) rec.gpus.push_back(r.gpu);
    rec.params = {{"op", bench::to_string(c)},
                  {"dtype", t.name},
                  {"bytes", size},
                  {"count", k.param_count},
                  {"bus_bytes", k.bus_bytes},
                  {"size_meaning", bench::size_meaning(c)},
                  {"in_place", in_place},
                  {"redop", c == Collective::all_reduce || c == Collective::reduce_scatter ? "sum" : ""},
                  {"root", c == Collective::broadcast ? 0 : -1},
                  {"ranks", nranks},
                  {"busbw_factor", factor},
                  {"iters_per_sample", iters_},
                  {"launcher", launcher_}};
    rec.extra["distributed"] = true;
    rec.extra["nccl_version"] = nccl_version_;
    rec.extra["nccl_env"] = nccl_env_;
    const std::string what = fmt::format("{} {} ({}, {})", bench::to_string(c), bench::format_bytes(size), t.name,
                                         in_place ? "in place" : "out of place");
    try {
      const bool hang_now = inject_hang_ && !injected_;
      if (hang_now) {
        injected_ = true;
        if (world.size() > 1 && world.rank() == world.size() - 1) {
          std::fprintf(stderr, "gpuscout: rank %d exits on purpose (--coll-inject-hang): a dead rank\n", world.rank());
          std::fflush(stderr);
          std::_Exit(3);
        }
      }
      // Deterministic data for the warm-up (and so that timing never runs on zeros).
      fill(c, k, t, ops, in_place, false);
      TelemetryScope telemetry(env.telemetry);
      // Warm-up: untimed ops (the first also builds NCCL's connections for this pattern).
      for (int w = 0; w < 2; ++w) {
        enqueue(c, k, t.size, ops.nccl, in_place, nranks);
        wait_streams(what, env.interrupted);
      }
      if (hang_now && world.size() == 1) {
        // Connections exist now: rank 0's kernel waits for a peer that never joins (a GPU-side hang).
        enqueue(c, k, t.size, ops.nccl, in_place, nranks, true);
        wait_streams(what, env.interrupted);
      }
      // Samples of iters_ back-to-back ops, each timed as nccl-tests times its one loop per size; at
      // least samples_ of them and min_timed_s_ of timed work, at most kMaxSamples. Every rank
      // decides alike from its own clock, so rank 0's verdict is broadcast under MPI.
      std::vector<double> per_op;
      double timed_s = 0;
      for (int s = 0; s < kMaxSamples; ++s) {
        world.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < iters_; ++it) enqueue(c, k, t.size, ops.nccl, in_place, nranks);
        wait_streams(what, env.interrupted);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        per_op.push_back(sec / iters_);
        timed_s += sec;
        int more = s + 1 < samples_ || timed_s < min_timed_s_;
        if (s >= 1 && sec > 2.0) more = 0;  // large sizes: two samples of >= 2 s are enough
        world.broadcast(&more, sizeof(more), 0);
        if (more == 0) break;
      }
      rec.telemetry = telemetry.finish();
      const auto times = bench::summarize(per_op);
      rec.metrics.push_back(bench::time_metric("time", "us", 1e6, times,
                                               "time per collective: host clock around back-to-back ops / ops "
                                               "(nccl-tests)"));
      rec.metrics.push_back(
          bench::rate_metric("algbw", "GB/s", k.bus_bytes / 1e9, times, "S / time, S as nccl-tests (size_meaning)"));
      rec.metrics.push_back(
          bench::rate_metric("busbw", "GB/s", k.bus_bytes / 1e9 * factor, times,
                             fmt::format("algbw x {:.4g} (nccl-tests factor for {} ranks)", factor, nranks)));
      rec.extra["timing"] = fmt::format(
          "2 untimed ops, then {} samples of {} back-to-back ops between host clock reads (ranks aligned by a "
          "barrier before each sample; at least {:g} s timed in all), no CUDA graph; time = median of samples, "
          "spread.mean = nccl-tests' statistic (mean time per op over its timed loop)",
          per_op.size(), iters_, min_timed_s_);
      // Verification: fresh data, poisoned output, one more op, every output element compared. The
      // plugin records what NCCL chose for this op only.
      fill(c, k, t, ops, in_place, true);
      {
        RecordingScope recording(profiler_, choice_unavailable_.empty());
        enqueue(c, k, t.size, ops.nccl, in_place, nranks);
      }
      wait_streams(what, env.interrupted);
      record_nccl_choice(rec, c, k, t);
      std::uint64_t wrong = 0;
      for (const LocalRank& r : ranks_) {
        GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.gpu));
        auto [send, recv] = buffers(r, c, k, t.size, in_place);
        (void)send;
        unsigned long long host = 0;
        GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(r.wrong, 0, sizeof(host), r.stream));
        ops.check(recv, bench::checked_elements(c, k), static_cast<int>(c), r.rank, nranks, k.param_count, r.wrong,
                  r.stream);
        GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(&host, r.wrong, sizeof(host), cudaMemcpyDeviceToHost, r.stream));
        GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(r.stream));
        wrong += host;
      }
      rec.extra["wrong_values"] = wrong;
      rec.extra["verified"] = wrong == 0;
      rec.extra["verification"] =
          "inputs refilled with small integers, output poisoned, one more op, every output element compared with the "
          "exact expected value";
      if (wrong != 0) {
        rec.outcome = results::Outcome::incorrect;
        rec.reason = fmt::format("{} wrong values", wrong);
      }
      env.report(fmt::format("{}: {:.1f} us, busbw {:.1f} GB/s, wrong {}", key, rec.metrics[0].value,
                             rec.metrics[2].value, wrong));
    } catch (const NcclError& e) {
      rec.outcome = aborted_ && std::string(e.what()).find("did not finish") != std::string::npos
                        ? results::Outcome::timeout
                        : results::Outcome::failed;
      rec.reason = e.what();
      rec.extra["ranks_involved"] = rank_list();
      rec.extra["timeout_s"] = timeout_s_;
      rec.extra["aborted"] = aborted_;
    } catch (const CudaError& e) {
      rec.outcome = results::Outcome::failed;
      rec.reason = e.what();
      abort_all();
    }
    return rec;
  }

  // Recording on for one scope only, so that an exception cannot leave it on for timed ops.
  struct RecordingScope {
    RecordingScope(const NcclProfilerControl& p, bool on) : p_(p), on_(on) {
      if (on_) {
        p_.clear();
        p_.set_recording(true);
      }
    }
    ~RecordingScope() {
      if (on_) p_.set_recording(false);
    }
    const NcclProfilerControl& p_;
    bool on_;
  };

  // extra: algorithm, protocol, channels as each local rank's communicator reported them.
  void record_nccl_choice(results::Record& rec, Collective c, const bench::CollCounts& k,
                          const bench::DataType& t) const {
    nlohmann::ordered_json by_rank = nlohmann::ordered_json::array();
    for (const LocalRank& r : ranks_) {
      const bench::NcclCallKey key = bench::nccl_event_key(c, r.rank, k.param_count, t);
      std::optional<bench::NcclChoice> found;
      std::string why = choice_unavailable_;
      if (why.empty()) {
        found = profiler_.find(key);
        if (!found) found = profiler_.find_any_count(key.rank, key.func, key.datatype);
        if (!found) {
          why = fmt::format("NCCL's profiler reported no {} event of {} for this call", key.func, key.datatype);
        }
      }
      by_rank.push_back(bench::nccl_rank_choice(r.rank, found, bench::nccl_has_algorithm(c), why));
    }
    rec.extra["nccl_choice_by_rank"] = std::move(by_rank);
    bench::summarize_nccl_choice(rec.extra);
    if (choice_unavailable_.empty()) rec.extra["nccl_choice_source"] = profiler_.source();
  }

  void fill(Collective c, const bench::CollCounts& k, const bench::DataType& t, const TypeOps& ops, bool in_place,
            bool poison) {
    for (const LocalRank& r : ranks_) {
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.gpu));
      auto [send, recv] = buffers(r, c, k, t.size, in_place);
      if (poison && k.recv_count > 0) GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(recv, 0xff, k.recv_count * t.size, r.stream));
      ops.fill(send, k.send_count, r.rank, r.stream);
      GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    }
  }
};

}  // namespace

std::unique_ptr<Benchmark> make_collectives_benchmark() {
  return std::make_unique<CollectivesBenchmark>();
}

}  // namespace gpuscout::cuda
