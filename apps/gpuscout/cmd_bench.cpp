// gpuscout bench: runs the measurement backend's benchmarks on local GPUs, prints a summary table
// (stdout), progress (stderr, only on a terminal or with -v) and writes the full result JSON
// atomically. Exit 1 when any record failed or the run was interrupted (Ctrl-C writes what was
// measured so far, marked complete=false). Built without CUDA it says so and exits 1.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "context.hpp"
#include "doctor_facts.hpp"
#include "gpuscout/bench/selection.hpp"
#include "gpuscout/bench/serve_options.hpp"
#include "gpuscout/bench/summary.hpp"
#include "gpuscout/bench/train_options.hpp"
#include "gpuscout/report/table.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"
#include "history_cli.hpp"
#include "local_gpus.hpp"
#if defined(GPUSCOUT_HAVE_CUDA)
#include <unistd.h>

#include "gpuscout/bench/rank_merge.hpp"
#include "gpuscout/cuda/benchmark.hpp"
#include "gpuscout/cuda/device_info.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/topology.hpp"
#include "gpuscout/topo/topology.hpp"
#include "mpi_world.hpp"
#endif

namespace gpuscout::cli {
namespace {

// Sweep flags (llama-bench style comma lists), passed to the benchmarks by name.
constexpr const char* kListFlags[][2] = {
    {"memory-sizes", "memory: array sizes, e.g. 8MiB,1GiB,4GiB"},
    {"memory-grid", "memory: force the kernel grid style, tiled or persistent (default: per op)"},
    {"transfer-sizes", "transfer: host<->device copy sizes, e.g. 64MiB,512MiB"},
    {"gemm-sizes", "gemm: square sizes m=n=k, e.g. 4096,8192"},
    {"gemm-m", "gemm: token counts m for the model-shaped cases, e.g. 1,128,4096"},
    {"gemm-shapes",
     "gemm: explicit shapes m x n x k, e.g. 4096x4096x4096, and/or layers of --gemm-model: qkv, o, gate_up, gate, up, "
     "down, lm_head (default qkv,o,gate_up,down)"},
    {"gemm-model", "gemm: the catalog model whose layer shapes --gemm-shapes names (default llama-3.1-8b)"},
    {"precisions", "gemm: precisions, e.g. bf16,fp8"},
    {"p2p-sizes", "p2p: GPU-to-GPU copy sizes, e.g. 64MiB,512MiB"},
    {"coll-sizes", "collectives: message sizes (nccl-tests' size column), e.g. 8,1MiB,1GiB (default 8B..8GiB x2)"},
    {"coll-ops", "collectives: all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv (default all)"},
    {"coll-dtypes", "collectives: data types, e.g. float,bf16,half,double,int32 (default float)"},
    {"coll-iters", "collectives: back-to-back ops per timed sample (default 20, as nccl-tests -n)"},
    {"coll-inject-hang", "collectives (testing the watchdog): 1 = leave one rank out of the first collective"},
    {"coll-nccl-profiler",
     "collectives: on (default) = record the algorithm/protocol NCCL chose through gpuscout's NCCL profiler plugin; "
     "off = do not load it"},
};

// Whether the flag `name` among `options` was given on the command line.
bool flag_given(const std::vector<std::pair<std::string, CLI::Option*>>& options, const std::string& name) {
  for (const auto& [n, o] : options) {
    if (n == name) return o->count() > 0;
  }
  return false;
}

// The serve benchmark's flags as typed; serve_options() validates them.
struct ServeFlags {
  std::string model, scenario, lengths, batches, prefills, weights, engine_tuning, stepping, rates, concurrencies;
  int tp = 0, requests = 0, isl = 0, osl = 0, max_batch = 0, warmup = 0, max_step_tokens = 0, static_repeats = 0;
  std::int64_t kv_blocks = 0;
  std::uint64_t seed = 1;
  double duration_s = 0, ttft_ms = 0, tpot_ms = 0, max_run_s = 0, range_ratio = 0;
  bool find_peak = false;
  std::vector<std::pair<std::string, CLI::Option*>> options;  // flag name -> option, to see which were given
  bool given(const std::string& name) const { return flag_given(options, name); }
};

// The train-step benchmark's flags as typed (--model is the serve flag's); train_options() validates them.
struct TrainFlags {
  std::string micro_batches, seqs, precision;
  int layers = 0;
  std::vector<std::pair<std::string, CLI::Option*>> options;
  bool given(const std::string& name) const { return flag_given(options, name); }
};

struct BenchFlags {
  bool quick = false, full = false, list = false;
  std::string only, gpus, out, tags;
  std::map<std::string, std::string> lists;
  double max_time_per_case = 0;
  double coll_timeout = 60;
  ServeFlags serve;
  bench::ServeOptions serve_options;  // validated from `serve` before any GPU is touched
  TrainFlags train;
  bench::TrainStepOptions train_options;  // validated from `train` (and --model) before any GPU is touched
};

// "1,8,32" -> {1, 8, 32}; each item a whole number >= 1.
std::vector<int> positive_int_list(const std::string& text, const std::string& flag, const char* example) {
  std::vector<int> out;
  for (const std::string& item : bench::split_list(text)) {
    int value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || value < 1) {
      throw UsageError(
          fmt::format("--{}: '{}' is not a whole number >= 1 (expected a comma list, e.g. {})", flag, item, example));
    }
    out.push_back(value);
  }
  if (out.empty()) throw UsageError(fmt::format("--{}: empty list (expected e.g. {})", flag, example));
  return out;
}

// "2.5,5,10" -> {2.5, 5, 10}; each item a finite number > 0.
std::vector<double> positive_number_list(const std::string& text, const std::string& flag, const char* unit,
                                         const char* example) {
  std::vector<double> out;
  for (const std::string& item : bench::split_list(text)) {
    double value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || !(value > 0) || !std::isfinite(value)) {
      throw UsageError(fmt::format("--{} must be a positive number of {}, got '{}' (a comma list sweeps, e.g. {})",
                                   flag, unit, item, example));
    }
    out.push_back(value);
  }
  if (out.empty()) throw UsageError(fmt::format("--{}: empty list (expected e.g. {})", flag, example));
  return out;
}

// Validates the serve flags on any machine, before the "no GPU" and "built without CUDA" paths,
// so a bad command line is a usage error (exit 2) everywhere.
bench::ServeOptions serve_options(AppContext& ctx, const BenchFlags& f) {
  const ServeFlags& s = f.serve;
  bench::ServeOptions o;
  const std::vector<std::string> selectors = bench::split_list(f.only);
  if (f.list || !bench::names_benchmark(selectors, "serve")) {
    const bool train_named = bench::names_benchmark(selectors, "train-step");
    for (const auto& [name, option] : s.options) {
      if (option->count() > 0 && !f.list && !(name == "model" && train_named)) {
        if (name == "model") {
          throw UsageError(
              "--model: a flag of the serve and train-step benchmarks, which run only when --only names them (e.g. "
              "--only serve or --only train-step)");
        }
        throw UsageError(fmt::format(
            "--{}: a flag of the serve benchmark, which runs only when --only names it (e.g. --only serve)", name));
      }
    }
    return o;
  }
  auto positive_int = [&](const char* name, int value) {
    if (s.given(name) && value < 1) {
      throw UsageError(fmt::format("--{} must be a whole number >= 1, got {}", name, value));
    }
  };
  positive_int("tp", s.tp);
  positive_int("isl", s.isl);
  positive_int("osl", s.osl);
  positive_int("requests", s.requests);
  positive_int("max-batch", s.max_batch);
  positive_int("max-step-tokens", s.max_step_tokens);
  if (s.given("kv-blocks") && s.kv_blocks < 1) {
    throw UsageError(fmt::format("--kv-blocks must be a whole number >= 1, got {}", s.kv_blocks));
  }

  // Tensor parallelism: --tp, else one rank per GPU of --gpus.
  o.tp = s.given("tp") ? s.tp : (f.gpus.empty() ? 1 : static_cast<int>(bench::parse_index_list(f.gpus, "gpus").size()));
  const workloads::ModelInfo& info = ctx.models().get(s.model.empty() ? bench::kDefaultServeModel : s.model);
  o.model = infer::TransformerConfig::from_model(info);
  o.model_slug = bench::model_slug(info.name);
  o.model.check_tensor_parallel(o.tp);

  if (s.given("weights")) o.weights = infer::parse_weight_format(s.weights, "--weights");
  if (s.given("serve-batch")) o.decode_batches = positive_int_list(s.batches, "serve-batch", "1,8,32");
  if (s.given("serve-prefill")) o.prefill_tokens = positive_int_list(s.prefills, "serve-prefill", "2048,8192");
  if (s.given("isl")) o.isl = s.isl;
  if (s.given("osl")) o.osl = s.osl;
  o.kv_blocks = s.kv_blocks;
  o.max_batch = s.max_batch;
  if (s.given("static-repeats")) {
    if (s.static_repeats < 1) {
      throw UsageError(fmt::format("--static-repeats: expected a whole number >= 1 (runs of the static batch), got {}",
                                   s.static_repeats));
    }
    o.static_repeats = s.static_repeats;
  }
  if (s.given("engine-tuning")) {
    if (s.engine_tuning != "steps" && s.engine_tuning != "alone") {
      throw UsageError(fmt::format("--engine-tuning: expected steps or alone, got '{}'", s.engine_tuning));
    }
    o.gemm_ties_in_steps = s.engine_tuning == "steps";
  }
  if (s.given("stepping")) {
    if (s.stepping != "pipelined" && s.stepping != "synchronous") {
      throw UsageError(fmt::format("--stepping: expected pipelined or synchronous, got '{}'", s.stepping));
    }
    o.pipelined_steps = s.stepping == "pipelined";
  }
  o.max_step_tokens = s.max_step_tokens;
  if (o.max_step_tokens > 0) {
    // Every running sequence's decode token must fit a step (vLLM asks the same of its budget).
    const int largest = *std::max_element(o.decode_batches.begin(), o.decode_batches.end());
    if (o.max_step_tokens < largest) {
      throw UsageError(fmt::format(
          "--max-step-tokens {} is below the largest --serve-batch {}: a step must hold one decode token per sequence",
          o.max_step_tokens, largest));
    }
  }
  if (o.max_batch > 0) {
    for (int b : o.decode_batches) {
      if (b > o.max_batch) {
        throw UsageError(
            fmt::format("--serve-batch {} exceeds --max-batch {} (the engine's largest batch)", b, o.max_batch));
      }
    }
  }

  // The load scenario: --scenario, or --find-peak or --rate alone (Server), or --concurrency alone.
  const bool any_load_flag = s.given("scenario") || s.find_peak || s.given("rate") || s.given("concurrency");
  if (!any_load_flag) {
    for (const char* name :
         {"requests", "duration-s", "lengths", "range-ratio", "ttft-ms", "tpot-ms", "warmup", "seed", "max-run-s"}) {
      if (s.given(name)) {
        throw UsageError(fmt::format(
            "--{}: applies to the load scenario; add --scenario offline|server|single-stream|concurrency (or "
            "--find-peak)",
            name));
      }
    }
  } else {
    serve::LoadSettings load;
    if (s.given("rate") && s.given("concurrency")) {
      throw UsageError(
          "--rate and --concurrency: one load scenario per run; --rate sets Server arrivals, --concurrency the "
          "requests in flight of the closed loop");
    }
    load.scenario = s.given("scenario")      ? serve::scenario_from_string(s.scenario)
                    : s.given("concurrency") ? serve::Scenario::concurrency
                                             : serve::Scenario::server;
    const std::string scenario = serve::to_string(load.scenario);
    if (s.find_peak && load.scenario != serve::Scenario::server) {
      throw UsageError(fmt::format(
          "--find-peak searches the Server scenario's highest valid rate; it does not apply to --scenario {}",
          scenario));
    }
    if (s.given("rate")) {
      o.rates = positive_number_list(s.rates, "rate", "requests/s", "5,10,20");
      if (load.scenario != serve::Scenario::server) {
        throw UsageError(
            fmt::format("--rate: the arrival rate of the Server scenario; it does not apply to "
                        "--scenario {}",
                        scenario));
      }
      if (s.find_peak && o.rates.size() > 1) {
        throw UsageError(
            fmt::format("--find-peak takes one --rate, its first probe (got {} rates: '{}')", o.rates.size(), s.rates));
      }
    } else if (load.scenario == serve::Scenario::server && !s.find_peak) {
      throw UsageError("--scenario server needs --rate R (requests/s; a comma list sweeps) or --find-peak");
    }
    if (s.given("concurrency")) {
      o.concurrencies = positive_int_list(s.concurrencies, "concurrency", "1,8,32,64");
      if (load.scenario != serve::Scenario::concurrency) {
        throw UsageError(fmt::format(
            "--concurrency: the requests in flight of the Concurrency scenario; it does not apply to --scenario {}",
            scenario));
      }
    } else if (load.scenario == serve::Scenario::concurrency) {
      throw UsageError("--scenario concurrency needs --concurrency N (requests in flight; a comma list sweeps)");
    }
    for (const auto& [name, value] : {std::pair{"duration-s", s.duration_s}, std::pair{"ttft-ms", s.ttft_ms},
                                      std::pair{"tpot-ms", s.tpot_ms}, std::pair{"max-run-s", s.max_run_s}}) {
      if (s.given(name) && (!(value > 0) || !std::isfinite(value))) {
        throw UsageError(fmt::format("--{} must be a positive number, got {}", name, value));
      }
    }
    if (s.find_peak && !s.given("ttft-ms") && !s.given("tpot-ms")) {
      throw UsageError("--find-peak needs a latency bound to search against: --ttft-ms and/or --tpot-ms");
    }
    load.target_rate = o.rates.empty() ? 1.0 : o.rates.front();
    load.concurrency = o.concurrencies.empty() ? 1 : o.concurrencies.front();
    if (s.given("requests")) load.min_requests = s.requests;
    load.min_duration_s = s.duration_s;
    load.ttft_bound_ms = s.ttft_ms;
    load.tpot_bound_ms = s.tpot_ms;
    load.gpus = o.tp;
    // Arrival-driven scenarios skip their first requests by default (the engine warms up there), a
    // closed loop its first wave (each point of a sweep its own: load_case).
    o.default_warmup = !s.given("warmup");
    load.warmup_requests = s.given("warmup") ? s.warmup : serve::default_warmup(load.scenario, load.concurrency);
    load.seed = s.seed;
    if (s.given("max-run-s")) load.max_run_s = s.max_run_s;
    if (s.given("lengths")) {
      if (!std::filesystem::is_regular_file(s.lengths)) {
        throw UsageError(
            fmt::format("--lengths: no file '{}' (expected a CSV with columns input_tokens,output_tokens "
                        "or JSON Lines with those keys)",
                        s.lengths));
      }
      if (s.given("range-ratio")) {
        throw UsageError("--range-ratio: spreads --isl/--osl; the lengths of a --lengths file are used as they are");
      }
      load.lengths = serve::read_length_file(s.lengths);
    } else if (s.given("range-ratio")) {
      o.range_ratio = s.range_ratio;
      load.lengths = serve::uniform_lengths(o.isl, o.osl, s.range_ratio);
    } else {
      load.lengths.input_min = load.lengths.input_max = o.isl;
      load.lengths.output_min = load.lengths.output_max = o.osl;
    }
    serve::validate(load);
    if (s.find_peak) {
      o.find_peak = true;
      if (!o.rates.empty()) o.peak.high = std::max(o.rates.front(), 2 * o.peak.low);
      serve::validate(o.peak);
    }
    o.load = std::move(load);
  }
  if (o.max_sequence_tokens() > info.max_context) {
    throw UsageError(fmt::format(
        "{} sequences reach {} tokens (prompt + output of --isl/--osl, --serve-prefill or --lengths), more than "
        "{}'s context of {} tokens",
        info.name, o.max_sequence_tokens(), info.name, info.max_context));
  }
  return o;
}

// Validates the train-step flags (and --model) on any machine, before any GPU lookup.
bench::TrainStepOptions train_options(AppContext& ctx, const BenchFlags& f) {
  const TrainFlags& t = f.train;
  bench::TrainStepOptions o;
  if (f.list || !bench::names_benchmark(bench::split_list(f.only), "train-step")) {
    for (const auto& [name, option] : t.options) {
      if (option->count() > 0 && !f.list) {
        throw UsageError(fmt::format(
            "--{}: a flag of the train-step benchmark, which runs only when --only names it (e.g. --only train-step)",
            name));
      }
    }
    return o;
  }
  const workloads::ModelInfo& info =
      ctx.models().get(f.serve.model.empty() ? bench::kDefaultTrainModel : f.serve.model);
  o.model = infer::TransformerConfig::from_model(info);
  if (o.model.qkv_bias) {
    throw UsageError(
        fmt::format("--model {}: the train-step benchmark does not implement QKV biases (serve does); "
                    "give a model without them, e.g. {}",
                    info.name, bench::kDefaultTrainModel));
  }
  o.model_slug = bench::model_slug(info.name);
  if (t.given("train-layers")) {
    if (t.layers < 1 || t.layers > o.model.layers) {
      throw UsageError(fmt::format("--train-layers {}: {} has {} decoder layers (give 1 to {})", t.layers, info.name,
                                   o.model.layers, o.model.layers));
    }
    o.layers = t.layers;
  } else {
    o.layers = std::min(bench::kDefaultTrainLayers, o.model.layers);
  }
  if (t.given("micro-batch")) o.micro_batches = positive_int_list(t.micro_batches, "micro-batch", "1,4");
  if (t.given("seq")) o.seqs = positive_int_list(t.seqs, "seq", "2048,4096");
  if (t.given("train-precision")) {
    if (t.precision != "bf16" && t.precision != "fp8") {
      throw UsageError(fmt::format("--train-precision {}: expected bf16 or fp8", t.precision));
    }
    o.fp8 = t.precision == "fp8";
  }
  for (int seq : o.seqs) {
    if (seq > info.max_context) {
      throw UsageError(
          fmt::format("--seq {}: longer than {}'s context of {} tokens", seq, info.name, info.max_context));
    }
  }
  return o;
}

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

#if defined(GPUSCOUT_HAVE_CUDA)

bench::StoppingRule timing_rule(cuda::BenchMode mode, double max_time_per_case) {
  bench::StoppingRule rule;
  if (mode == cuda::BenchMode::quick) {
    rule.min_samples = 5;
    rule.max_time_s = 0.5;
    rule.target_relative_spread = 0.03;
  } else if (mode == cuda::BenchMode::full) {
    rule.min_samples = 20;
    rule.max_time_s = 5.0;
    rule.target_relative_spread = 0.01;
  }
  if (max_time_per_case > 0) rule.max_time_s = max_time_per_case;
  return rule;
}

std::map<std::string, std::string> captured_environment() {
  // NCCL settings (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE ...) decide collective results, and the
  // engine's kernel switches (GPUSCOUT_RING_GEMV=0, GPUSCOUT_SMEM_OPTIN_LIMIT ...) its kernels.
  return environment_variables({"NCCL_", "GPUSCOUT_"},
                               {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
                                "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_LAUNCH_BLOCKING"});
}

class SigintGuard {
 public:
  SigintGuard() {
    g_interrupted.store(false);
    previous_ = std::signal(SIGINT, on_sigint);
  }
  ~SigintGuard() { std::signal(SIGINT, previous_ == SIG_ERR ? SIG_DFL : previous_); }

 private:
  void (*previous_)(int) = nullptr;
};

void run_bench_in(AppContext& ctx, const BenchFlags& f, bench::World& world);

void run_bench(AppContext& ctx, const BenchFlags& f) {
  std::unique_ptr<bench::World> world = f.list ? std::make_unique<bench::SingleProcessWorld>() : make_world();
  if (world->size() == 1) {
    run_bench_in(ctx, f, *world);
    return;
  }
  // Under MPI an error on one rank must not leave the others waiting in a collective or barrier.
  try {
    run_bench_in(ctx, f, *world);
  } catch (const std::exception& e) {
    world->abort(1, e.what());
  }
}

void run_bench_in(AppContext& ctx, const BenchFlags& f, bench::World& world) {
  auto benchmarks = cuda::make_benchmarks();
  std::vector<std::string> keys;
  for (const auto& b : benchmarks) keys.push_back(b->key());
  const std::vector<std::string> selectors = bench::split_list(f.only);
  std::vector<std::size_t> chosen = bench::select_benchmarks(keys, selectors);
  // Opt-in benchmarks (serve) run only when --only names them; --list shows them all.
  if (!f.list) {
    std::erase_if(chosen, [&](std::size_t i) {
      return benchmarks[i]->opt_in() && !bench::names_benchmark(selectors, benchmarks[i]->key());
    });
  }

  if (f.list) {
    report::Table t;
    t.key = "benchmarks";
    t.add_column("key", "Key");
    t.add_column("description", "Description");
    for (std::size_t i : chosen) {
      t.add_row({benchmarks[i]->key(),
                 benchmarks[i]->description() + (benchmarks[i]->opt_in() ? " [opt-in: --only " + keys[i] + "]" : "")});
    }
    t.notes.push_back("Select with --only KEY or a prefix of a case key, e.g. --only memory/copy,gemm/bf16");
    t.notes.push_back("Opt-in benchmarks run only when --only names them (not by default, not by a key prefix)");
    ctx.out << report::render(t, ctx.format());
    return;
  }

  const specs::SpecDb* db = nullptr;
  try {
    db = &ctx.specs();
  } catch (const Error& e) {
    fmt::print(stderr, "gpuscout: warning: spec database not loaded ({}); no % of peak\n", e.what());
  }
  LocalGpus local = discover_local_gpus(db);
  if (local.gpus.empty()) throw Error("bench: no local GPU to measure: " + local.unavailable_reason);

  const int local_count = static_cast<int>(local.gpus.size());
  // Under MPI each rank drives one GPU: its rank on this host, modulo the GPUs it sees.
  const int rank_gpu = world.local_rank() % local_count;
  std::vector<int> gpu_indices =
      f.gpus.empty() ? std::vector<int>{world.size() > 1 ? rank_gpu : 0} : bench::parse_index_list(f.gpus, "gpus");
  for (int g : gpu_indices) {
    if (g >= local_count) {
      throw UsageError(fmt::format("--gpus: no GPU {} (this machine has {})", g, local.gpus.size()));
    }
  }
  // Multi-GPU benchmarks (p2p, collectives) span: this rank's GPU under MPI, else the --gpus list
  // when it names several, else every local GPU.
  std::vector<int> span_gpus;
  if (world.size() > 1) {
    span_gpus = gpu_indices;
  } else if (gpu_indices.size() > 1) {
    span_gpus = gpu_indices;
  } else {
    for (int g = 0; g < local_count; ++g) span_gpus.push_back(g);
  }

  cuda::BenchOptions options;
  options.mode = f.quick ? cuda::BenchMode::quick : (f.full ? cuda::BenchMode::full : cuda::BenchMode::standard);
  options.timing = timing_rule(options.mode, f.max_time_per_case);
  for (const auto& [name, text] : f.lists) {
    auto items = bench::split_list(text);
    if (!items.empty()) options.lists[name] = std::move(items);
  }
  if (!selectors.empty()) options.lists["only"] = selectors;
  options.coll_timeout_s = f.coll_timeout;
  options.serve = f.serve_options;
  options.train = f.train_options;
  for (std::size_t i : chosen) {
    const int needed = benchmarks[i]->gpus_per_run(options);
    if (benchmarks[i]->min_gpus() <= 1 && needed > static_cast<int>(span_gpus.size())) {
      throw UsageError(fmt::format("--tp {}: {} needs {} GPUs, {} available{}", options.serve.tp, keys[i], needed,
                                   span_gpus.size(), f.gpus.empty() ? "" : " in --gpus"));
    }
  }

  results::ResultSet result;
  result.kind = "bench";
  result.provenance = results::local_provenance(static_cast<int>(ctx.argv.size()), ctx.raw_argv);
  for (const auto& [k, v] : local.software) result.provenance.software[k] = v;
  // What `gpuscout doctor` would warn about or fail now goes into the result, so that a figure taken
  // with a lowered power limit or another process on the GPU says so.
  for (const doctor::Finding& x : doctor::examine(gather_doctor_facts(ctx, local))) {
    if (x.status != doctor::Status::warn && x.status != doctor::Status::fail) continue;
    const std::string message = fmt::format("{}: {}: {}", x.subject, x.check, x.observed);
    fmt::print(stderr, "gpuscout: warning: doctor {}: {}\n", x.key, message);
    result.provenance.checks.push_back({x.key, std::string(doctor::to_string(x.status)), message});
  }
  result.provenance.environment = captured_environment();
  result.provenance.tags = bench::parse_tags(f.tags);
  if (db != nullptr) result.provenance.data_source = ctx.data().describe();
  result.gpus = local.gpus;
  result.topology["gpus"] = local.details;
  result.topology["mode"] = options.mode == cuda::BenchMode::quick  ? "quick"
                            : options.mode == cuda::BenchMode::full ? "full"
                                                                    : "standard";
  result.topology["links"] = topo::to_json(topo::build_topology(cuda::read_topology()));
  result.topology["launcher"] = world.launcher();

  const bool show_progress = ::isatty(STDERR_FILENO) != 0 || ctx.options.verbosity > 0;
  SigintGuard sigint;
  for (int g : gpu_indices) {
    if (g_interrupted.load()) break;
    cuda::DeviceContext device = cuda::make_device_context(g);
    device.spec = local.specs[static_cast<std::size_t>(g)];
    const bench::PeakFigures peaks = peak_figures(device.spec, local.details[static_cast<std::size_t>(g)]);
    auto telemetry = cuda::TelemetrySampler::create(g);
    cuda::BenchEnv env{device, options, telemetry.get(), &g_interrupted, {}, {}, nullptr};
    if (show_progress) {
      env.progress = [g](const std::string& line) { fmt::print(stderr, "[gpu{}] {}\n", g, line); };
    }
    for (std::size_t i : chosen) {
      if (g_interrupted.load()) break;
      cuda::Benchmark& b = *benchmarks[i];
      if (b.gpus_per_run(options) > 1) continue;  // run once below, over span_gpus
      std::vector<results::Record> records;
      if (auto why = b.not_supported_reason(device)) {
        results::Record r;
        r.key = b.key();
        r.benchmark = b.key();
        r.gpus = {g};
        r.outcome = results::Outcome::not_supported;
        r.reason = *why;
        records.push_back(std::move(r));
      } else {
        try {
          records = b.run(env);
        } catch (const std::exception& e) {
          results::Record r;
          r.key = b.key();
          r.benchmark = b.key();
          r.gpus = {g};
          r.outcome = results::Outcome::failed;
          r.reason = e.what();
          records.push_back(std::move(r));
        }
      }
      for (results::Record& r : records) {
        bench::annotate_percent_of_peak(r, peaks);
        bench::annotate_efficiency(r);
        result.records.push_back(std::move(r));
      }
    }
  }
  // Multi-GPU benchmarks: once per run. Under MPI, those that span ranks run on every rank;
  // the others (p2p: peers of one process) on rank 0 only.
  bool timed_out = false;
  for (std::size_t i : chosen) {
    cuda::Benchmark& b = *benchmarks[i];
    if (b.gpus_per_run(options) <= 1 || g_interrupted.load() || timed_out) continue;
    if (world.size() > 1 && !b.spans_ranks() && world.rank() != 0) continue;
    const int g = span_gpus.front();
    cuda::DeviceContext device = cuda::make_device_context(g);
    device.spec = local.specs[static_cast<std::size_t>(g)];
    auto telemetry = cuda::TelemetrySampler::create(g);
    cuda::BenchEnv env{device, options, telemetry.get(), &g_interrupted, {}, {}, nullptr};
    env.gpus = span_gpus;
    env.world = &world;
    if (show_progress) {
      const int rank = world.rank();
      env.progress = [rank](const std::string& line) { fmt::print(stderr, "[rank{}] {}\n", rank, line); };
    }
    std::vector<results::Record> records;
    try {
      records = b.run(env);
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      results::Record r;
      r.key = b.key();
      r.benchmark = b.key();
      r.gpus = span_gpus;
      r.outcome = results::Outcome::failed;
      r.reason = e.what();
      if (b.spans_ranks()) r.extra["distributed"] = true;
      records.push_back(std::move(r));
    }
    for (results::Record& r : records) {
      if (r.outcome == results::Outcome::timeout) {
        timed_out = true;
        fmt::print(stderr, "gpuscout bench: rank {}: {}: {}\n", world.rank(), r.key, r.reason);
      }
      if (r.extra.contains("nccl_version")) result.provenance.software["nccl"] = r.extra["nccl_version"];
      result.records.push_back(std::move(r));
    }
  }
  if (timed_out) {
    fmt::print(stderr,
               "gpuscout bench: a collective timed out (--coll-timeout {:g} s); communicators aborted, "
               "later cases not run\n",
               options.coll_timeout_s);
  }
  result.complete = !g_interrupted.load() && !timed_out;

  // MPI: rank 0 gathers every rank's records and a per-rank host/GPU/bus-id table.
  if (world.size() > 1) {
    bench::RankInfo me;
    me.rank = world.rank();
    me.local_rank = world.local_rank();
    me.host = result.provenance.hostname;
    me.pid = static_cast<long>(::getpid());
    me.gpu = gpu_indices.front();
    const auto& info = local.gpus[static_cast<std::size_t>(me.gpu)];
    me.gpu_name = info.name;
    me.pci_bus_id = info.pci_bus_id;
    me.uuid = info.uuid;
    results::ResultSet mine;
    mine.kind = "bench";
    mine.complete = result.complete;
    mine.records = std::move(result.records);
    mine.provenance.checks = result.provenance.checks;
    nlohmann::ordered_json doc;
    doc["rank"] = bench::to_json(me);
    doc["result"] = results::to_json(mine);
    const auto all = world.gather(doc.dump(), 0);
    if (world.rank() != 0) return;  // rank 0 writes the file and prints
    std::vector<std::vector<results::Record>> by_rank;
    std::vector<bench::RankInfo> ranks;
    nlohmann::ordered_json rank_json = nlohmann::ordered_json::array();
    for (std::size_t r = 0; r < all.size(); ++r) {
      const auto d = nlohmann::ordered_json::parse(all[r]);
      ranks.push_back(bench::rank_info_from_json(d["rank"]));
      rank_json.push_back(d["rank"]);
      results::ResultSet part = results::result_from_json(d["result"], fmt::format("rank {}", r));
      result.complete = result.complete && part.complete;
      by_rank.push_back(std::move(part.records));
      // Rank 0's own checks are in the result already; another rank's GPU and host may differ.
      if (r > 0) {
        for (const auto& c : part.provenance.checks) {
          result.provenance.checks.push_back(
              {fmt::format("rank{}/{}", r, c.key), c.status, fmt::format("rank {}: {}", r, c.message)});
        }
      }
    }
    result.records = bench::merge_rank_records(by_rank);
    for (const auto& r : result.records) {
      if (r.extra.contains("nccl_version")) result.provenance.software["nccl"] = r.extra["nccl_version"];
    }
    result.topology["ranks"] = rank_json;
    result.topology["world_size"] = world.size();
    if (ctx.format() == report::Format::table || ctx.format() == report::Format::md) {
      ctx.out << report::render(bench::rank_table(ranks), ctx.format()) << "\n";
    }
  }

  bench::annotate_prefill_vs_gemm(result.records);  // serve prefill vs the BF16 GEMM rate of this run

  const std::string path =
      f.out.empty() ? bench::default_output_name(result.provenance.hostname,
                                                 local.gpus[static_cast<std::size_t>(gpu_indices.front())].name,
                                                 std::time(nullptr))
                    : f.out;
  results::write_result_file(path, result);
  ctx.out << report::render(bench::summary_table(result.records), ctx.format());
  ctx.out.flush();
  if (!result.complete) fmt::print(stderr, "gpuscout bench: interrupted; partial results (complete=false)\n");
  fmt::print(stderr, "gpuscout bench: wrote {}\n", path);
  append_to_history(ctx, result, "gpuscout bench: " + path);  // run history; a failure only warns
  if (result.any_failure()) ctx.raise_exit_code(ExitCode::failure);
}

#else

void run_bench(AppContext&, const BenchFlags&) {
  throw Error("bench: built without CUDA: this gpuscout cannot measure GPUs (rebuild with a CUDA toolkit)");
}

#endif

}  // namespace

void register_bench_command(CLI::App& app, AppContext& ctx) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Measure the local GPUs: memory, host transfers, GEMM (--list shows all)");
  auto* quick = cmd->add_flag("--quick", flags->quick, "Fewer sizes and samples (about a minute)");
  auto* full = cmd->add_flag("--full", flags->full, "More sizes, more samples, tighter spread");
  quick->excludes(full);
  cmd->add_option("--only", flags->only,
                  "Comma list of benchmark keys or case-key prefixes: memory, transfer/h2d, gemm/bf16 ...");
  cmd->add_flag("--list", flags->list, "List the benchmarks and exit");
  cmd->add_option("--gpus", flags->gpus, "Comma list of local GPU indices to measure, one after another (default 0)");
  cmd->add_option("--out", flags->out, "Result file (default gpuscout-<host>-<gpu>-<yyyymmdd-hhmmss>.json)");
  cmd->add_option("--tags", flags->tags, "key:value,... recorded in the result so runs from many machines concatenate");
  cmd->add_option("--max-time-per-case", flags->max_time_per_case, "Seconds of timed samples per case at most")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--coll-timeout", flags->coll_timeout,
                  "collectives, and serve at --tp > 1: seconds a collective (a TP engine step) may take before every "
                  "communicator is aborted (collectives: outcome timeout, the run ends; serve: the case fails)")
      ->check(CLI::PositiveNumber);
  for (const auto& [name, help] : kListFlags) {
    cmd->add_option(std::string("--") + name, flags->lists[name], help);
  }
  // The serve benchmark (opt-in: --only serve). docs/serving.md, "The serve benchmark".
  ServeFlags& sf = flags->serve;
  auto serve_flag = [&](const char* name, auto& target, const std::string& help) {
    sf.options.emplace_back(name, cmd->add_option(std::string("--") + name, target, help)->group("Serve"));
  };
  serve_flag(
      "model", sf.model,
      fmt::format("serve, train-step: catalog model (default {}; `gpuscout models list`)", bench::kDefaultServeModel));
  serve_flag("tp", sf.tp, "serve: tensor-parallel GPUs (default: the number of --gpus, else 1)");
  serve_flag("weights", sf.weights,
             "serve: projection weights bf16 or fp8 (E4M3 per-tensor scales, compute capability 8.9+; default bf16)");
  serve_flag("serve-batch", sf.batches, "serve: decode batch sizes of the roofline cases (default 1,8,32)");
  serve_flag("serve-prefill", sf.prefills, "serve: prompt lengths of the prefill cases (default 8192)");
  serve_flag("isl", sf.isl, "serve: input tokens per request: decode context, static batch, load (default 512)");
  serve_flag("osl", sf.osl, "serve: output tokens per request (default 128)");
  serve_flag("static-repeats", sf.static_repeats,
             fmt::format("serve: runs of the static batch on one engine; its tokens/s are their median, with the "
                         "spread over the runs (default {})",
                         bench::kDefaultStaticRepeats));
  serve_flag("scenario", sf.scenario,
             "serve: load scenario offline|server|single-stream|concurrency (default: none run)");
  serve_flag("rate", sf.rates,
             "serve: Server scenario arrival rate, requests/s (Poisson); a comma list sweeps, e.g. 5,10,20 "
             "(latency vs throughput, one record per rate)");
  serve_flag("concurrency", sf.concurrencies,
             "serve: Concurrency scenario: requests in flight, each client issuing its next request when the last "
             "one finishes (as vLLM's --max-concurrency); a comma list sweeps, e.g. 1,8,32,64");
  serve_flag("requests", sf.requests, "serve: measured requests of the load scenario at least (default 64)");
  serve_flag("duration-s", sf.duration_s, "serve: measured seconds of the load scenario at least");
  serve_flag("lengths", sf.lengths, "serve: request lengths from a CSV (input_tokens,output_tokens) or JSONL file");
  serve_flag("range-ratio", sf.range_ratio,
             "serve: load-run lengths uniform in [L(1 - R), L(1 + R)] around --isl and --osl, seeded by --seed "
             "(vLLM's --random-range-ratio; default 0: fixed)");
  serve_flag("ttft-ms", sf.ttft_ms, "serve: p99 time-to-first-token bound, ms (VALID/INVALID, goodput)");
  serve_flag("tpot-ms", sf.tpot_ms, "serve: p99 time-per-output-token bound, ms");
  serve_flag("warmup", sf.warmup,
             "serve: warm-up requests issued first, not measured (default 4; offline 0; concurrency: the first wave, "
             "max(4, N))");
  serve_flag("seed", sf.seed, "serve: seed of the Poisson arrivals (default 1)");
  serve_flag("max-run-s", sf.max_run_s, "serve: a load run still busy after this many seconds stops, INVALID (600)");
  serve_flag("kv-blocks", sf.kv_blocks, "serve: cap on the engine's KV-cache blocks (default: as memory allows)");
  serve_flag("max-batch", sf.max_batch, "serve: the engine's largest decode batch (default 256)");
  serve_flag("max-step-tokens", sf.max_step_tokens,
             "serve: the scheduler's token budget per step, decode plus prefill tokens, in the static batch and the "
             "load runs (default as vLLM's: on GPUs with >= 70 GiB but the A100, 16384 offline and 8192 in the "
             "online scenarios (server, single-stream, concurrency); else 8192 and 2048)");
  serve_flag("engine-tuning", sf.engine_tuning,
             "serve: steps (default): GEMM kernels within 25% per call are timed inside whole decode steps of each "
             "CUDA graph, the faster kept (start-up ~6 s for an 8B model, ~19 s for a 70B at TP2 on H200s); alone: "
             "per-call timing only (~1 s / ~4 s), and the step time can move between runs");
  serve_flag("stepping", sf.stepping,
             "serve: pipelined (default): each step is submitted before the previous one's tokens are collected, "
             "hiding the host's share of a step; synchronous: one step at a time (a step's time then includes the "
             "token copy, scheduling and launch)");
  sf.options.emplace_back(
      "find-peak", cmd->add_flag("--find-peak", sf.find_peak,
                                 "serve: bisect the highest Server rate that stays VALID under --ttft-ms/--tpot-ms")
                       ->group("Serve"));
  // The train-step benchmark (opt-in: --only train-step; --model as above). docs/train-step.md.
  TrainFlags& tf = flags->train;
  auto train_flag = [&](const char* name, auto& target, const std::string& help) {
    tf.options.emplace_back(name, cmd->add_option(std::string("--") + name, target, help)->group("Train step"));
  };
  train_flag(
      "train-layers", tf.layers,
      fmt::format("train-step: decoder layers run forward and backward (default {})", bench::kDefaultTrainLayers));
  train_flag("micro-batch", tf.micro_batches, "train-step: sequences per step, a comma list of cases (default 1)");
  train_flag("seq", tf.seqs, "train-step: tokens per sequence, a comma list of cases (default 4096)");
  train_flag("train-precision", tf.precision,
             "train-step: bf16 (default) or fp8 (the linear layers' GEMMs in E4M3/E5M2, compute capability 8.9+)");
  cmd->callback([&ctx, flags] {
    flags->serve_options = serve_options(ctx, *flags);
    flags->train_options = train_options(ctx, *flags);
    run_bench(ctx, *flags);
  });
}

}  // namespace gpuscout::cli
