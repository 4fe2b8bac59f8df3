#pragma once
// The interface every benchmark implements (one file per benchmark under benchmarks/, all listed
// in registry.cpp). A benchmark measures and returns plain Records; it never prints. Progress
// lines go through BenchEnv::progress, which the CLI shows on stderr.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/bench/serve_options.hpp"
#include "gpuscout/bench/stats.hpp"
#include "gpuscout/bench/train_options.hpp"
#include "gpuscout/bench/world.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::specs {
struct GpuSpec;
}

namespace gpuscout::cuda {

// What a benchmark needs to know about the GPU it runs on (filled from the CUDA runtime).
struct DeviceContext {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t total_memory_bytes = 0;
  std::size_t l2_bytes = 0;
  const specs::GpuSpec* spec = nullptr;  // matched spec entry, for % of dense peak; may be null
};

enum class BenchMode { quick, standard, full };

struct BenchOptions {
  BenchMode mode = BenchMode::standard;
  bench::StoppingRule timing;
  // List-valued flags (llama-bench style sweeps), by flag name without dashes:
  // "gemm-sizes" -> {"4096","8192"}, "precisions" -> {"bf16","fp8"} ... Empty: the benchmark's defaults.
  std::map<std::string, std::vector<std::string>> lists;
  // Collectives: a collective not finished after this many seconds is aborted (outcome timeout).
  double coll_timeout_s = 60;
  // The serve benchmark: model, tensor parallelism, its cases and the load scenario (validated by the CLI).
  bench::ServeOptions serve;
  // The train-step benchmark: model, layers, micro-batches and sequence lengths (validated by the CLI).
  bench::TrainStepOptions train;
};

class TelemetrySampler;  // telemetry.hpp: NVML sampling on a background thread

struct BenchEnv {
  const DeviceContext& device;
  const BenchOptions& options;
  TelemetrySampler* telemetry = nullptr;             // may be null (no NVML)
  const std::atomic<bool>* interrupted = nullptr;    // set by Ctrl-C: stop early, return what was measured
  std::function<void(const std::string&)> progress;  // one short line per case; may be empty
  // Multi-GPU benchmarks (min_gpus() > 1): the local GPUs they span, and the ranks of the run
  // (single process, or one process per GPU under MPI; never null for them).
  std::vector<int> gpus;
  bench::World* world = nullptr;

  bool stop_requested() const { return interrupted != nullptr && interrupted->load(); }
  void report(const std::string& line) const {
    if (progress) progress(line);
  }
};

class Benchmark {
 public:
  virtual ~Benchmark() = default;
  // Stable snake_case key used by --only (by key or prefix) and in record keys: "gemm", "memory".
  virtual std::string key() const = 0;
  virtual std::string description() const = 0;
  // nullopt when the benchmark can run on this device; otherwise why not ("needs compute capability 8.9+").
  virtual std::optional<std::string> not_supported_reason(const DeviceContext& device) const {
    (void)device;
    return std::nullopt;
  }
  // More than 1: the benchmark spans GPUs and runs once per run (env.gpus), not once per GPU.
  virtual int min_gpus() const { return 1; }
  // GPUs one run of it spans with these options (serve: its tensor-parallel degree); more than 1
  // runs it once per run over env.gpus, like min_gpus().
  virtual int gpus_per_run(const BenchOptions& options) const {
    (void)options;
    return min_gpus();
  }
  // Opt-in benchmarks (serve: minutes, and a model's worth of memory) run only when --only names
  // them (their key or one of their case keys), never by default or through a key prefix.
  virtual bool opt_in() const { return false; }
  // True when every rank of an MPI run takes part (collectives); false: only rank 0 runs it.
  virtual bool spans_ranks() const { return false; }
  // Runs every case. A failing case becomes a Record with outcome failed/incorrect/skipped and a
  // reason, and the run goes on; only programming errors throw.
  virtual std::vector<results::Record> run(const BenchEnv& env) = 0;
};

// All benchmarks, in the order `bench` runs them (registry.cpp: one explicit list, no static registration).
std::vector<std::unique_ptr<Benchmark>> make_benchmarks();

}  // namespace gpuscout::cuda
