// gpuscout predict infer|train: the per-operator speed model (include/gpuscout/model/speed.hpp) for one
// model, GPU type, count and layout. Every figure is printed with its unit, the calibration it rests on
// and an error band. This file parses flags, checks them and prints; the model computes.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/model/calibration.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/model/serving_sim.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::cli {
namespace {

using report::Align;
using report::Cell;
using report::Table;

struct CommonOptions {
  std::string model, gpu, precision = "bf16", framework;
  std::int64_t gpus = 0;
  std::optional<std::int64_t> tp, pp, dp, ep;
  std::vector<std::string> calibration;
  bool cost = false;  // --cost: price the prediction with the TCO model
  std::optional<double> years;
  std::vector<std::string> sets;  // --set key=value (TCO inputs)
};

struct InferOptions : CommonOptions {
  std::int64_t isl = 0, osl = 0;
  std::optional<std::int64_t> batch;
  std::string mode;
  double ttft_ms = 0, tpot_ms = 0;
  std::string kv_precision = "bf16";
  std::optional<double> rate;      // server: simulate at this many requests/s
  std::optional<int> concurrency;  // server: simulate a closed loop of this many requests in flight
  double range_ratio = 0;          // server: lengths uniform in [L(1 - r), L(1 + r)]
  double sim_duration_s = 15;
  int max_running = 256, max_step_tokens = 8192;
};

struct TrainOptions : CommonOptions {
  std::int64_t global_batch = 0, seq = 0, micro_batch = 1, interleave = 1;
  std::string recompute = "selective";
  int zero = 0;
  bool distributed_optimizer = false;
  double train_tokens = 0;
};

void positive(std::int64_t value, const char* flag) {
  if (value < 1) throw UsageError(fmt::format("{}: must be at least 1, got {}", flag, value));
}

// The calibration for the target GPU: --calibration result files, else the embedded tables.
model::Calibration resolve_calibration(AppContext& ctx, const specs::GpuSpec& target,
                                       const std::vector<std::string>& files) {
  std::vector<model::Calibration> measured;
  if (!files.empty()) {
    measured.push_back(model::calibration_from_files(files, ctx.specs(), &target));
  } else {
    measured = model::load_calibrations(ctx.data());
  }
  return model::calibration_for(target, measured);
}

Table calibration_table(const model::SpeedContext& sc) {
  Table t;
  t.key = "calibration";
  t.title = "Calibration and framework profile";
  t.add_column("item", "Item");
  t.add_column("value", "Value");
  const auto& cal = sc.calibration;
  t.add_row({std::string("tier"), cal.tier});
  t.add_row({std::string("source"), cal.source});
  t.add_row({std::string("error_band_pct"), fmt::format("{:.0f}", cal.error_band() * 100)});
  t.add_row({std::string("gemm_efficiency_bf16_m4096"),
             fmt::format("{:.3f}", cal.gemm_efficiency(specs::Precision::bf16, 4096))});
  t.add_row({std::string("memory_efficiency"), fmt::format("{:.3f}", cal.memory_efficiency(1e9))});
  t.add_row({std::string("framework"), sc.framework.name});
  t.add_row({std::string("framework_source"), sc.framework.source});
  for (const auto& n : cal.notes) t.notes.push_back(n);
  return t;
}

Table ops_table(const model::StepTime& step, const std::string& key, const std::string& title) {
  Table t;
  t.key = key;
  t.title = title;
  t.add_column("op", "Operator");
  t.add_column("time_ms", "Time", "ms", 4, Align::right);
  t.add_column("share_pct", "Share", "%", 1, Align::right);
  t.add_column("gflop", "FLOP", "GFLOP", 2, Align::right);
  t.add_column("gbytes", "Bytes", "GB", 3, Align::right);
  t.add_column("bound", "Bound");
  for (const auto& op : step.ops) {
    t.add_row({op.key, op.seconds * 1e3, 100 * op.seconds / step.seconds, op.flops / 1e9, op.bytes / 1e9, op.bound});
  }
  return t;
}

Table figures_table(const std::string& title) {
  Table t;
  t.key = "prediction";
  t.title = title;
  t.add_column("figure", "Figure");
  t.add_column("value", "Value", "", 4, Align::right);
  t.add_column("unit", "Unit");
  t.add_column("low", "Low", "", 4, Align::right);
  t.add_column("high", "High", "", 4, Align::right);
  t.add_column("what", "What");
  return t;
}

void add_figure(Table& t, const std::string& name, double value, const std::string& unit, double band,
                const std::string& what) {
  const double v = std::round(value * 1e4) / 1e4;
  if (band > 0) {
    t.add_row(
        {name, v, unit, std::round(value * (1 - band) * 1e4) / 1e4, std::round(value * (1 + band) * 1e4) / 1e4, what});
  } else {
    t.add_row({name, v, unit, Cell{}, Cell{}, what});
  }
}

void check_cost_flags(const CommonOptions& o) {
  if (!o.cost && o.years) throw UsageError("--years: only with --cost (it sets the TCO horizon)");
  if (!o.cost && !o.sets.empty()) throw UsageError("--set: only with --cost (it overrides TCO inputs)");
  if (o.years && !(*o.years >= 1)) throw UsageError(fmt::format("--years: must be at least 1, got {}", *o.years));
}

// The TCO model for `gpus` GPUs of the predicted type: data/tco.toml, then --years, then --set.
tco::TcoResult tco_for(AppContext& ctx, const CommonOptions& o, const specs::GpuSpec& gpu, double gpus) {
  auto inputs = tco::TcoInputs::resolve(tco::TcoDefaults::load(ctx.data()), gpu);
  if (o.years) inputs.set("years", *o.years, "--years");
  for (const auto& assignment : o.sets) inputs.set_from_text(assignment);
  inputs.require_purchase_price();
  return tco::compute_tco(inputs, gpus);
}

Table pay_columns(const std::string& key, const std::string& title) {
  Table t;
  t.key = key;
  t.title = title;
  t.add_column("way", "Way to pay");
  t.add_column("usd_per_gpu_hr", "Per GPU-hour", "USD", 4, Align::right);
  t.add_column("usd_per_useful_gpu_hr", "Per useful GPU-hour", "USD", 4, Align::right);
  return t;
}

// USD per million input / output tokens from the predicted throughput (all GPUs together) and the
// prefill's share of the busy GPU time.
Table token_cost_table(const tco::TcoResult& r, double input_tps, double output_tps, double prefill_share) {
  auto t = pay_columns("cost", fmt::format("Cost per million tokens on {} GPU(s), {} years", r.gpus, r.years));
  t.add_column("input_usd_per_mtok", "Input", "USD/Mtok", 4, Align::right);
  t.add_column("output_usd_per_mtok", "Output", "USD/Mtok", 4, Align::right);
  t.add_column("total_usd_per_mtok", "Blended", "USD/Mtok", 4, Align::right);
  t.add_column("source", "Source");
  for (const auto& c : tco::token_costs(r, input_tps, output_tps, prefill_share)) {
    t.add_row({c.pay.way, c.pay.usd_per_gpu_hr, c.pay.usd_per_useful_gpu_hr, c.input_usd_per_mtok,
               c.output_usd_per_mtok, c.total_usd_per_mtok, c.pay.source});
  }
  t.notes.push_back(fmt::format(
      "At the predicted {:.1f} input + {:.1f} output tokens/s of all GPUs while busy. The GPU time splits by "
      "phase: input tokens carry prefill's {:.1f}% of it, output tokens decode's {:.1f}%; Blended = cost / all "
      "tokens.",
      input_tps, output_tps, prefill_share * 100, (1 - prefill_share) * 100));
  t.notes.push_back(
      "Per useful GPU-hour: owning and reserved contracts pay idle hours too (/ utilization); on-demand bills "
      "the hours used. Inputs and sources: gpuscout tco --gpu G (override with --set key=value, --years).");
  return t;
}

Table run_cost_table(const tco::TcoResult& r, double hours, double tokens) {
  auto t = pay_columns("cost", fmt::format("Cost of one training run of {:.3g} tokens on {} GPU(s)", tokens, r.gpus));
  t.add_column("gpu_hours", "GPU-hours", "h", 1, Align::right);
  t.add_column("usd_per_run", "Per run", "USD", 0, Align::right);
  t.add_column("source", "Source");
  for (const auto& c : tco::run_costs(r, hours)) {
    t.add_row(
        {c.pay.way, c.pay.usd_per_gpu_hr, c.pay.usd_per_useful_gpu_hr, c.gpu_hours, std::round(c.usd), c.pay.source});
  }
  t.notes.push_back(fmt::format(
      "Run: {:.3g} tokens / predicted tokens/s = {:.1f} hours on {} GPUs; owned GPUs are charged per useful hour "
      "(owner cost / utilization); a reserved contract runs for years and is not offered for one run.",
      tokens, hours, r.gpus));
  return t;
}

model::SpeedContext speed_context(AppContext& ctx, const CommonOptions& o, const std::string& default_framework) {
  model::SpeedContext sc;
  sc.gpu = &ctx.specs().get(o.gpu);
  sc.calibration = resolve_calibration(ctx, *sc.gpu, o.calibration);
  static std::vector<model::FrameworkProfile> frameworks;
  frameworks = model::load_frameworks(ctx.data());
  sc.framework =
      model::find_framework(frameworks, o.framework.empty() ? default_framework : o.framework, "--framework");
  return sc;
}

std::string expert_layout(const model::Parallelism& par) {
  return par.ep > 1 ? fmt::format(", EP {}", par.ep) : "";
}

model::Parallelism layout(const CommonOptions& o, const workloads::ModelArch& arch, bool train) {
  positive(o.gpus, "--gpus");
  for (auto [value, flag] :
       {std::pair{o.tp, "--tp"}, std::pair{o.pp, "--pp"}, std::pair{o.dp, "--dp"}, std::pair{o.ep, "--ep"}}) {
    if (value) positive(*value, flag);
  }
  model::Parallelism par;
  par.tp = o.tp.value_or(train ? 1 : o.gpus);
  par.pp = o.pp.value_or(1);
  if (o.gpus % (par.tp * par.pp) != 0) {
    throw UsageError(fmt::format("--gpus: {} GPUs do not split into TP {} x PP {}", o.gpus, par.tp, par.pp));
  }
  par.dp = o.dp.value_or(o.gpus / (par.tp * par.pp));
  if (par.gpus() != o.gpus) {
    throw UsageError(
        fmt::format("--gpus: {} GPUs != TP {} x PP {} x DP {} = {}", o.gpus, par.tp, par.pp, par.dp, par.gpus()));
  }
  par.ep = o.ep.value_or(1);
  model::check_parallelism(arch, par);
  return par;
}

// Server-mode queueing: the scheduler + load generator simulation (serving_sim.hpp) at --rate and the
// peak Poisson rate within the bounds, per replica and for all replicas.
std::vector<Table> queueing_tables(const model::SpeedContext& sc, const model::InferenceSetup& setup,
                                   const InferOptions& o, double guess_rate, double replicas, double band) {
  model::EngineLimits limits;
  limits.max_running = o.max_running;
  limits.max_step_tokens = o.max_step_tokens;
  model::QueueingSettings q;
  q.isl = static_cast<int>(o.isl);
  q.osl = static_cast<int>(o.osl);
  q.range_ratio = o.range_ratio;
  q.ttft_bound_ms = o.ttft_ms;
  q.tpot_bound_ms = o.tpot_ms;
  q.min_duration_s = o.sim_duration_s;
  std::vector<Table> tables;
  auto t = figures_table(
      fmt::format("Queueing (discrete-event simulation of the scheduler, Poisson arrivals or a closed loop, {} s "
                  "per probe), bounds p99 TTFT <= {} ms, p99 TPOT <= {} ms",
                  o.sim_duration_s, o.ttft_ms, o.tpot_ms));
  t.key = "queueing";
  if (o.rate) {
    const auto r = model::simulate_server(sc, setup, limits, q, *o.rate / replicas);
    const std::string at = fmt::format("at {} requests/s{}", *o.rate, replicas > 1 ? " spread over the replicas" : "");
    add_figure(t, "rate", *o.rate, "requests/s", 0, "offered Poisson rate, all replicas");
    add_figure(t, "ttft_p50", r.ttft_ms.p50, "ms", band, "median TTFT " + at + " (queueing included)");
    add_figure(t, "ttft_p99", r.ttft_ms.p99, "ms", band, "p99 TTFT " + at);
    add_figure(t, "tpot_p50", r.tpot_ms.p50, "ms", band, "median TPOT " + at);
    add_figure(t, "tpot_p99", r.tpot_ms.p99, "ms", band, "p99 TPOT " + at);
    add_figure(t, "achieved_output_throughput", r.output_tokens_per_s * replicas, "tokens/s", band, "all replicas");
    add_figure(t, "within_bounds", r.valid ? 1 : 0, "bool", 0,
               r.valid ? "VALID: p99 TTFT and TPOT within the bounds"
                       : fmt::format("INVALID: {}", fmt::join(r.invalid_reasons, "; ")));
  }
  if (o.concurrency) {
    // The clients spread evenly over the replicas (rounded up: a replica never has fewer than its share).
    const int per_replica = std::max(1, static_cast<int>(std::ceil(*o.concurrency / replicas)));
    model::QueueingSettings closed = q;
    closed.warmup_requests = serve::default_warmup(serve::Scenario::concurrency, per_replica);
    const auto r = model::simulate_concurrency(sc, setup, limits, closed, per_replica);
    const std::string at = fmt::format("with {} request{} in flight{}", *o.concurrency, *o.concurrency == 1 ? "" : "s",
                                       replicas > 1 ? fmt::format(" ({} per replica)", per_replica) : "");
    add_figure(t, "concurrency", *o.concurrency, "requests", 0,
               "closed loop: each finished request is replaced at once (all replicas)");
    add_figure(t, "concurrency_ttft_p50", r.ttft_ms.p50, "ms", band, "median TTFT " + at);
    add_figure(t, "concurrency_ttft_p99", r.ttft_ms.p99, "ms", band, "p99 TTFT " + at);
    add_figure(t, "concurrency_tpot_p50", r.tpot_ms.p50, "ms", band, "median TPOT " + at);
    add_figure(t, "concurrency_tpot_p99", r.tpot_ms.p99, "ms", band, "p99 TPOT " + at);
    add_figure(t, "concurrency_output_throughput", r.output_tokens_per_s * replicas, "tokens/s", band, "all replicas");
    add_figure(t, "concurrency_requests_per_s", r.requests_per_s * replicas, "requests/s", band, "all replicas");
    add_figure(t, "concurrency_within_bounds", r.valid ? 1 : 0, "bool", 0,
               r.valid ? "VALID: p99 TTFT and TPOT within the bounds"
                       : fmt::format("INVALID: {}", fmt::join(r.invalid_reasons, "; ")));
  }
  const auto peak = model::simulate_peak(sc, setup, limits, q, guess_rate);
  add_figure(t, "peak_rate", peak.peak_rate * replicas, "requests/s", band,
             peak.found ? fmt::format("highest Poisson rate within the bounds (find-peak, {} probes, all replicas)",
                                      peak.probes.size())
                        : "no rate down to 1/256 of the steady-state guess meets the bounds");
  add_figure(t, "peak_output_throughput", peak.peak_rate * replicas * static_cast<double>(o.osl), "tokens/s", band,
             "peak rate x OSL");
  t.notes.push_back(fmt::format(
      "Engine limits: {} running sequences, {}-token steps (chunked prefill), 16-token KV blocks, KV room from the "
      "memory model (ASSUMPTION: vLLM max_num_seqs and the gpuscout engine's step; --max-running, "
      "--max-step-tokens). Each probe: {} warm-up requests, then >= {} requests and >= {} s of arrivals.",
      o.max_running, o.max_step_tokens, q.warmup_requests, q.min_requests, o.sim_duration_s));
  tables.push_back(t);
  Table probes;
  probes.key = "peak_probes";
  probes.title = "Find-peak probes (one replica)";
  probes.add_column("requests_per_s", "Rate", "requests/s", 3, Align::right);
  probes.add_column("ttft_p99_ms", "p99 TTFT", "ms", 1, Align::right);
  probes.add_column("tpot_p99_ms", "p99 TPOT", "ms", 2, Align::right);
  probes.add_column("output_tokens_per_s", "Output", "tokens/s", 0, Align::right);
  probes.add_column("valid", "Valid");
  probes.add_column("why", "Why");
  for (const auto& p : peak.probes) {
    probes.add_row({p.target_rate, p.ttft_ms.p99, p.tpot_ms.p99, p.output_tokens_per_s, p.valid,
                    fmt::format("{}", fmt::join(p.invalid_reasons, "; "))});
  }
  tables.push_back(probes);
  return tables;
}

void run_infer(AppContext& ctx, const InferOptions& o, bool batch_given, bool mode_given) {
  positive(o.isl, "--isl");
  positive(o.osl, "--osl");
  check_cost_flags(o);
  if (batch_given && mode_given) throw UsageError("--batch: give either --batch or --mode, not both");
  if (o.batch) positive(*o.batch, "--batch");
  if (mode_given && o.mode != "offline" && o.mode != "server") {
    throw UsageError(fmt::format("--mode: '{}' is not offline or server", o.mode));
  }
  if (o.ttft_ms < 0) throw UsageError(fmt::format("--ttft-ms: must be >= 0, got {}", o.ttft_ms));
  if (o.tpot_ms < 0) throw UsageError(fmt::format("--tpot-ms: must be >= 0, got {}", o.tpot_ms));
  if (o.rate && o.mode != "server") throw UsageError("--rate: only with --mode server");
  if (o.rate && !(*o.rate > 0)) throw UsageError(fmt::format("--rate: must be above 0 requests/s, got {}", *o.rate));
  if (o.concurrency && o.mode != "server") throw UsageError("--concurrency: only with --mode server");
  if (o.range_ratio != 0 && o.mode != "server") throw UsageError("--range-ratio: only with --mode server");
  serve::validate_range_ratio(o.range_ratio);
  if (o.concurrency && *o.concurrency < 1) {
    throw UsageError(fmt::format("--concurrency: must be at least 1 request in flight, got {}", *o.concurrency));
  }
  if (!(o.sim_duration_s > 0)) {
    throw UsageError(fmt::format("--sim-duration-s: must be above 0, got {}", o.sim_duration_s));
  }
  if (o.mode == "server" && o.ttft_ms <= 0 && o.tpot_ms <= 0) {
    throw UsageError("--mode: server needs a latency bound: --ttft-ms and/or --tpot-ms");
  }
  if (o.precision != "bf16" && o.precision != "fp16" && o.precision != "fp8" && o.precision != "int8" &&
      o.precision != "int4") {
    throw UsageError(fmt::format("--precision: '{}' is not bf16, fp16, fp8, int8 or int4", o.precision));
  }
  const auto& info = ctx.models().get(o.model);
  if (info.arch.kind != workloads::ModelKind::decoder) {
    throw UsageError(fmt::format("--model: {} is an encoder; predict infer models decoders", info.name));
  }
  model::InferenceSetup setup;
  setup.arch = info.arch;
  setup.par = layout(o, info.arch, false);
  setup.weights = model::parse_quantization(o.precision, "--precision");
  setup.kv_bytes_per_element = o.kv_precision == "fp8" ? 1 : 2;
  auto sc = speed_context(ctx, o, "tensorrt-llm");
  // Memory: max batch from KV capacity at ISL + OSL tokens per sequence (memory.hpp).
  model::InferenceConfig mem_cfg;
  mem_cfg.weights = setup.weights;
  mem_cfg.kv_bytes_per_element = setup.kv_bytes_per_element;
  mem_cfg.context = o.isl + o.osl;
  mem_cfg.batch = o.batch.value_or(1);
  mem_cfg.runtime.memory_fraction = sc.framework.memory_fraction;
  model::Parallelism replica = setup.par;
  replica.dp = 1;
  const auto mem = model::inference_memory(setup.arch, replica, mem_cfg, model::gpu_capacity_bytes(*sc.gpu));
  if (mem.max_batch_at_context < 1) {
    throw UsageError(fmt::format(
        "--gpus: {} at TP {} x PP {} on {} leaves no room for one sequence of {} tokens (weights and reserve need "
        "{:.1f} GiB of {:.1f} GiB usable); use more GPUs or a smaller --precision",
        info.name, setup.par.tp, setup.par.pp, sc.gpu->name, o.isl + o.osl,
        (mem.breakdown.total_bytes - mem.breakdown.bytes_of("kv_cache")) / model::kGiB,
        mem.breakdown.usable_bytes / model::kGiB));
  }
  const double band = sc.calibration.error_band();
  const double replicas = static_cast<double>(setup.par.dp);
  const double gpus = static_cast<double>(setup.par.gpus());
  std::vector<Table> tables;
  auto t = figures_table(fmt::format("{} on {} x {} (TP {} x PP {} x DP {}{}), {}, ISL {} / OSL {}", info.name,
                                     setup.par.gpus(), sc.gpu->name, setup.par.tp, setup.par.pp, setup.par.dp,
                                     expert_layout(setup.par), o.precision, o.isl, o.osl));
  add_figure(t, "max_batch_kv", static_cast<double>(mem.max_batch_at_context), "sequences", 0,
             "sequences of ISL+OSL tokens whose KV cache fits one replica (memory model)");
  add_figure(t, "kv_capacity", mem.kv_tokens_capacity, "tokens", 0, "KV-cache room per replica");
  if (!mode_given) {
    const double b = static_cast<double>(o.batch.value_or(1));
    if (o.batch && *o.batch > mem.max_batch_at_context) {
      throw UsageError(fmt::format("--batch: {} sequences of {} tokens do not fit; the KV cache holds at most {}",
                                   *o.batch, o.isl + o.osl, mem.max_batch_at_context));
    }
    const auto r = model::static_batch(sc, setup, b, static_cast<double>(o.isl), static_cast<double>(o.osl));
    add_figure(t, "batch", b, "sequences", 0, "static batch per replica");
    add_figure(t, "ttft", r.ttft_s * 1e3, "ms", band, "prefill of the whole batch (first token)");
    add_figure(t, "tpot", r.tpot_s * 1e3, "ms", band, "mean decode step after the first token");
    add_figure(t, "request_latency", r.total_s * 1e3, "ms", band, "TTFT + (OSL-1) x TPOT");
    add_figure(t, "output_throughput", r.output_tokens_per_s * replicas, "tokens/s", band,
               "batch x OSL / request latency, all replicas");
    add_figure(t, "output_throughput_per_gpu", r.output_tokens_per_s * replicas / gpus, "tokens/s/GPU", band,
               "output throughput / GPUs");
    add_figure(t, "total_throughput", r.total_tokens_per_s * replicas, "tokens/s", band,
               "(ISL + OSL) x batch / request latency, all replicas");
    tables.push_back(t);
    if (o.cost) {
      tables.push_back(token_cost_table(tco_for(ctx, o, *sc.gpu, gpus), r.batch * o.isl / r.total_s * replicas,
                                        r.output_tokens_per_s * replicas, r.ttft_s / r.total_s));
    }
    tables.push_back(calibration_table(sc));
    tables.push_back(ops_table(r.prefill, "prefill_ops", "Prefill (TTFT) by operator, one GPU"));
    tables.push_back(ops_table(r.decode_mid, "decode_ops", "Decode step at the mean context, by operator, one GPU"));
  } else {
    const auto p = model::best_batch_under_bounds(sc, setup, static_cast<double>(o.isl), static_cast<double>(o.osl),
                                                  mem.max_batch_at_context, o.mode == "server" ? o.ttft_ms / 1e3 : 0,
                                                  o.mode == "server" ? o.tpot_ms / 1e3 : 0);
    if (p.batch < 1) {
      throw UsageError(
          fmt::format("--ttft-ms/--tpot-ms: even batch 1 misses the bound (TTFT {:.1f} ms, TPOT {:.2f} "
                      "ms)",
                      p.ttft_s * 1e3, p.tpot_s * 1e3));
    }
    add_figure(t, "batch", p.batch, "sequences", 0,
               o.mode == "offline" ? "KV-capacity batch (continuous batching)" : "largest batch within the bounds");
    add_figure(t, "ttft", p.ttft_s * 1e3, "ms", band, "prefill of one request + one step (steady state)");
    add_figure(t, "tpot", p.tpot_s * 1e3, "ms", band, "engine step: decode of the batch + its share of prefill");
    add_figure(t, "output_throughput", p.output_tokens_per_s * replicas, "tokens/s", band,
               "batch / step, all replicas");
    add_figure(t, "output_throughput_per_gpu", p.output_tokens_per_s * replicas / gpus, "tokens/s/GPU", band,
               "output throughput / GPUs");
    tables.push_back(t);
    if (o.mode == "server") {
      for (auto& q :
           queueing_tables(sc, setup, o, p.output_tokens_per_s / static_cast<double>(o.osl), replicas, band)) {
        tables.push_back(std::move(q));
      }
    }
    if (o.cost) {
      const double out_tps = p.output_tokens_per_s * replicas;
      tables.push_back(token_cost_table(tco_for(ctx, o, *sc.gpu, gpus), out_tps * static_cast<double>(o.isl) / o.osl,
                                        out_tps, p.prefill_s / p.step_s));
    }
    tables.push_back(calibration_table(sc));
  }
  tables[0].notes.push_back(
      "TTFT includes the first token; TPOT excludes it (mean over the later tokens). Low/high: "
      "the calibration's error band.");
  ctx.out << report::render(tables, ctx.format());
}

void run_train(AppContext& ctx, const TrainOptions& o) {
  positive(o.global_batch, "--global-batch");
  check_cost_flags(o);
  positive(o.seq, "--seq");
  positive(o.micro_batch, "--micro-batch");
  positive(o.interleave, "--interleave");
  if (o.precision != "bf16" && o.precision != "fp8") {
    throw UsageError(fmt::format("--precision: '{}' is not a training precision; expected bf16 or fp8", o.precision));
  }
  if (o.zero < 0 || o.zero > 3) throw UsageError(fmt::format("--zero: stage must be 0-3, got {}", o.zero));
  if (o.train_tokens < 0) throw UsageError(fmt::format("--train-tokens: must be >= 0, got {}", o.train_tokens));
  if (o.cost && !(o.train_tokens > 0)) throw UsageError("--train-tokens: --cost prices a run of that many tokens");
  const auto& info = ctx.models().get(o.model);
  model::TrainingSetup setup;
  setup.arch = info.arch;
  setup.par = layout(o, info.arch, true);
  setup.global_batch = o.global_batch;
  setup.config.precision = o.precision;
  setup.config.seq = o.seq;
  setup.config.micro_batch = o.micro_batch;
  setup.config.recompute = model::parse_recompute(o.recompute, "--recompute");
  setup.config.zero_stage = o.zero;
  setup.config.distributed_optimizer = o.distributed_optimizer;
  if (o.interleave > 1) {
    setup.config.schedule = model::PipelineSchedule::interleaved;
    setup.config.virtual_stages = o.interleave;
  }
  auto sc = speed_context(ctx, o, "megatron");
  const auto mem = model::training_memory(setup.arch, setup.par, setup.config, model::gpu_capacity_bytes(*sc.gpu));
  const auto r = model::training_step(sc, setup);
  const double band = sc.calibration.error_band();
  auto t = figures_table(fmt::format("Train {} on {} x {} (TP {} x PP {} x DP {}{}), {}, GBS {} x seq {}", info.name,
                                     setup.par.gpus(), sc.gpu->name, setup.par.tp, setup.par.pp, setup.par.dp,
                                     expert_layout(setup.par), o.precision, o.global_batch, o.seq));
  add_figure(t, "memory_per_gpu", mem.breakdown.total_bytes / model::kGiB, "GiB", 0,
             mem.breakdown.fits() ? "fits (memory model)" : "DOES NOT FIT (memory model)");
  add_figure(t, "step_time", r.step_s, "s", band, "one optimizer step");
  add_figure(t, "tokens_per_s", r.tokens_per_s, "tokens/s", band, "GBS x seq / step time");
  add_figure(t, "mfu", r.mfu * 100, "%", band, "model FLOPs / (GPUs x " + r.peak_label + " x step)");
  add_figure(t, "hfu", r.hfu * 100, "%", band, "with recomputed FLOPs");
  add_figure(t, "micro_batches", r.micro_batches, "micro-batches", 0, "per pipeline per step");
  add_figure(t, "forward_per_micro_batch", r.forward_s * 1e3, "ms", band, "one stage");
  add_figure(t, "backward_per_micro_batch", r.backward_s * 1e3, "ms", band, "one stage, recompute included");
  add_figure(t, "recompute_per_micro_batch", r.recompute_s * 1e3, "ms", band, o.recompute);
  add_figure(t, "tp_comm_per_micro_batch", r.tp_comm_s * 1e3, "ms", band, "exposed TP all-reduces, fwd + bwd");
  if (setup.par.ep > 1) {
    add_figure(t, "ep_comm_per_micro_batch", r.ep_comm_s * 1e3, "ms", band,
               fmt::format("EP {} all-to-alls (dispatch + combine), fwd + bwd", setup.par.ep));
  }
  add_figure(t, "pipeline_bubble", r.bubble_s * 1e3, "ms", band,
             fmt::format("bubble fraction {:.3f} = (p-1)/(v·m)", r.bubble_fraction));
  add_figure(t, "pp_comm", r.pp_comm_s * 1e3, "ms", band, "p2p activations and gradients");
  add_figure(t, "dp_allreduce", r.dp_comm_s * 1e3, "ms", band, "gradient reduction");
  add_figure(t, "dp_exposed", r.dp_exposed_s * 1e3, "ms", band, "not hidden behind backward");
  add_figure(t, "optimizer", r.optimizer_s * 1e3, "ms", band, "Adam update, memory-bound");
  if (o.train_tokens > 0) {
    add_figure(t, "time_to_train", o.train_tokens / r.tokens_per_s / 86400, "days", band,
               fmt::format("{:.3g} tokens", o.train_tokens));
  }
  t.notes.push_back("MFU counts 6·N·tokens + causal attention FLOPs (no recompute); " + r.peak_label + ".");
  std::vector<Table> tables{t};
  if (o.cost) {
    const double gpus = static_cast<double>(setup.par.gpus());
    tables.push_back(
        run_cost_table(tco_for(ctx, o, *sc.gpu, gpus), o.train_tokens / r.tokens_per_s / 3600, o.train_tokens));
  }
  tables.push_back(calibration_table(sc));
  tables.push_back(ops_table(r.forward, "forward_ops", "Forward of one micro-batch, one stage"));
  ctx.out << report::render(tables, ctx.format());
}

void add_common(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--model", o.model, "Model name or alias (gpuscout models list)")->required();
  cmd->add_option("--gpu", o.gpu, "GPU type (gpuscout gpus list)")->required();
  cmd->add_option("--gpus", o.gpus, "GPU count")->required();
  cmd->add_option("--tp", o.tp, "Tensor-parallel degree");
  cmd->add_option("--pp", o.pp, "Pipeline-parallel degree");
  cmd->add_option("--dp", o.dp, "Data-parallel degree (default: GPUs / (TP x PP))");
  cmd->add_option("--ep", o.ep, "Expert-parallel degree (MoE): whole experts spread over this many GPUs");
  cmd->add_option("--framework", o.framework, "Framework profile (data/frameworks.toml)");
  cmd->add_option("--calibration", o.calibration, "Result JSON files to calibrate from (default: embedded H200 table)");
  cmd->add_flag("--cost", o.cost, "Price the prediction with the TCO model (own, on-demand, reserved)");
  cmd->add_option("--years", o.years, "--cost: horizon and useful life in years (TCO 'years')");
  cmd->add_option("--set", o.sets, "--cost: TCO input override key=value, repeatable (keys: gpuscout tco)");
}

}  // namespace

void register_predict_command(CLI::App& app, AppContext& ctx) {
  CLI::App* predict = app.add_subcommand("predict", "Speed model: inference latency/throughput or training step time");
  predict->require_subcommand(1);
  auto io = std::make_shared<InferOptions>();
  CLI::App* infer = predict->add_subcommand("infer", "Inference: TTFT, TPOT, throughput, max batch");
  add_common(infer, *io);
  infer->add_option("--precision", io->precision, "bf16, fp16, fp8, int8 (W8A8) or int4 (W4A16)");
  infer->add_option("--isl", io->isl, "Input tokens per request")->required();
  infer->add_option("--osl", io->osl, "Output tokens per request")->required();
  infer->add_option("--batch", io->batch, "Static batch (default 1)");
  infer->add_option("--mode", io->mode, "offline (KV-capacity batch) or server (largest batch within the bounds)");
  infer->add_option("--ttft-ms", io->ttft_ms, "server: TTFT bound in ms");
  infer->add_option("--tpot-ms", io->tpot_ms, "server: TPOT bound in ms");
  infer->add_option("--kv-precision", io->kv_precision, "KV cache bf16 or fp8");
  infer->add_option("--rate", io->rate, "server: simulate Poisson arrivals at this many requests/s (all replicas)");
  infer->add_option("--concurrency", io->concurrency,
                    "server: simulate a closed loop of this many requests in flight (all replicas), as `bench "
                    "--concurrency` measures");
  infer->add_option("--range-ratio", io->range_ratio,
                    "server: simulated lengths uniform in [L(1 - R), L(1 + R)] around --isl/--osl, as `bench "
                    "--range-ratio` (default 0: fixed)");
  infer->add_option("--sim-duration-s", io->sim_duration_s, "server: seconds of arrivals per simulated probe (15)");
  infer->add_option("--max-running", io->max_running, "server: sequences the engine batches at most (256)");
  infer->add_option("--max-step-tokens", io->max_step_tokens, "server: tokens per engine step (8192)");
  infer->fallthrough();
  infer->callback([&ctx, io, infer] { run_infer(ctx, *io, infer->count("--batch") > 0, infer->count("--mode") > 0); });
  auto to = std::make_shared<TrainOptions>();
  CLI::App* train = predict->add_subcommand("train", "Training: step time, tokens/s, MFU, communication, bubble");
  add_common(train, *to);
  train->add_option("--precision", to->precision, "bf16 or fp8");
  train->add_option("--global-batch", to->global_batch, "Sequences per optimizer step")->required();
  train->add_option("--seq", to->seq, "Sequence length")->required();
  train->add_option("--micro-batch", to->micro_batch, "Micro-batch size (default 1)");
  train->add_option("--interleave", to->interleave, "Virtual pipeline stages (interleaved 1F1B)");
  train->add_option("--recompute", to->recompute, "none, selective or full");
  train->add_option("--zero", to->zero, "ZeRO stage 0-3");
  train->add_flag("--distributed-optimizer", to->distributed_optimizer, "Megatron distributed optimizer");
  train->add_option("--train-tokens,--tokens", to->train_tokens, "Tokens to train, for the time to train and --cost");
  train->fallthrough();
  train->callback([&ctx, to] { run_train(ctx, *to); });
}

}  // namespace gpuscout::cli
