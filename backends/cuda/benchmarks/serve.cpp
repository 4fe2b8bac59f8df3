// LLM serving on the gpuscout CUDA engine (key "serve", opt-in: --only serve). One engine per run
// (catalog model, default Llama-3.1-8B, BF16 random weights, TP over the GPUs given), then:
//   serve/copy/4GiB                              4 GiB D2D copy: the HBM roofline's bandwidth, same run
//   serve/engine/<model>/tp<N>                   what the engine took: weights, KV blocks, graphs, start-up
//   serve/decode/<model>/tp<N>/b<B>_ctx<C>       decode-only steps of B sequences at context C: ms/step,
//                                                tokens/s, % of the HBM roofline
//   serve/prefill/<model>/tp<N>/t<T>             one T-token prompt: TFLOP/s (% of the BF16 GEMM rate
//                                                of the same run is added by `bench`, see serve_options.hpp)
//   serve/static/<model>/tp<N>/b<B>_isl<I>_osl<O> B requests at once through the scheduler (Offline)
//   serve/load/<model>/tp<N>/<scenario>[...]     the --scenario run, or every --find-peak probe + the peak
// A step ends when the host has its sampled tokens, as in a server. Pipelined (--stepping, the
// default), the next step is already queued then, and a decode step's time is the interval between
// two steps' tokens reaching the host; synchronous, the wall time around Executor::execute().
// docs/serving.md defines every figure.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine.hpp"
#include "gpuscout/bench/serve_metrics.hpp"
#include "gpuscout/bench/serve_options.hpp"
#include "gpuscout/bench/summary.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/infer/engine_sut.hpp"
#include "gpuscout/infer/weights.hpp"
#include "gpuscout/serve/load_records.hpp"

namespace gpuscout::cuda {
namespace {

namespace core = gpuscout::infer;      // scheduler, config, weights, EngineSut
namespace ci = gpuscout::cuda::infer;  // the CUDA engine
using results::Outcome;
using results::Record;

constexpr std::uint64_t kCopyBytes = std::uint64_t{4} << 30;
constexpr std::uint64_t kPromptSeed = 1;  // prompts of the decode/prefill cases, as EngineSut's default

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class ServeBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "serve"; }
  std::string description() const override {
    return fmt::format(
        "LLM serving on the gpuscout CUDA engine (BF16 or --weights fp8, random weights; --model, default {}): decode "
        "ms/step and "
        "% of the HBM roofline at batch 1/8/32, 8k-token prefill TFLOP/s, a 32-request static batch end to end, "
        "and --scenario offline|server|single-stream|concurrency load runs with TTFT/TPOT/p99, sweeps over --rate or "
        "--concurrency lists, and --find-peak",
        bench::kDefaultServeModel);
  }
  std::optional<std::string> not_supported_reason(const DeviceContext& device) const override {
    if (device.cc_major < 8) {
      return fmt::format("needs compute capability 8.0+ for BF16 (this GPU is {}.{})", device.cc_major,
                         device.cc_minor);
    }
    return std::nullopt;
  }
  int gpus_per_run(const BenchOptions& options) const override { return options.serve.tp; }
  bool opt_in() const override { return true; }

  std::vector<Record> run(const BenchEnv& env) override;
};

// Everything the cases share.
struct Run {
  const BenchEnv& env;
  const bench::ServeOptions& o;
  std::vector<int> gpus;  // one per TP rank
  std::string tag;        // "<model>/tp<N>" ("-fp8" appended for FP8 weights), the middle of every key
  std::vector<Record> records;
  std::optional<double> copy_gbps;  // serve/copy, when measured
  ci::EngineInfo info;
  nlohmann::ordered_json engine_summary;

  // The scheduler's token budget per step in a load scenario (bench::step_token_budget).
  int step_budget(serve::Scenario scenario) const {
    return bench::step_token_budget(o, scenario, env.device.total_memory_bytes, env.device.name);
  }
  Record make(const std::string& key, nlohmann::ordered_json params) const {
    Record r;
    r.key = key;
    r.benchmark = "serve";
    r.gpus = gpus;
    r.params = std::move(params);
    r.params["model"] = o.model.name;
    r.params["tp"] = o.tp;
    r.params["dtype"] = core::to_string(o.weights);
    return r;
  }
  void skip(Record r, Outcome outcome, std::string reason) {
    r.outcome = outcome;
    r.reason = std::move(reason);
    env.report(fmt::format("{}: {} ({})", r.key, results::to_string(r.outcome), r.reason));
    records.push_back(std::move(r));
  }
};

// 4 GiB device-to-device copy (copy engine), bytes read + written: the bandwidth the decode cases'
// roofline divides by, measured in the same run as them (the memory benchmark's ce_copy convention).
void measure_copy(Run& run) {
  const std::string key = "serve/copy/" + bench::format_bytes(kCopyBytes);
  Record r = run.make(key, {{"array_bytes", kCopyBytes},
                            {"bytes_read", kCopyBytes},
                            {"bytes_written", kCopyBytes},
                            {"path", "copy engine"}});
  r.gpus = {run.gpus.front()};
  if (auto shortfall = memory_shortfall(2 * kCopyBytes)) return run.skip(std::move(r), Outcome::skipped, *shortfall);
  DeviceBuffer<std::uint8_t> a(kCopyBytes), b(kCopyBytes);
  GPUSCOUT_CUDA_CHECK(cudaMemset(b.get(), 1, kCopyBytes));
  Stream stream;
  std::uint8_t* dst = a.get();
  const std::uint8_t* src = b.get();
  TelemetryScope telemetry(run.env.telemetry);
  const TimedRun timed = time_launches(
      stream.get(),
      [=](cudaStream_t s) { GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice, s)); },
      TimingPlan{}, run.env.options.timing, run.env.interrupted);
  r.telemetry = telemetry.finish();
  if (timed.seconds.empty()) return run.skip(std::move(r), Outcome::skipped, "interrupted");
  const auto times = bench::summarize(timed.seconds);
  r.metrics.push_back(bench::rate_metric("bandwidth", "GB/s", 2.0 * kCopyBytes / 1e9, times,
                                         "bytes read + written per second, 1 GB = 1e9 B; the HBM roofline of "
                                         "the serve/decode records"));
  r.metrics.push_back(bench::time_metric("time", "ms", 1e3, times, "time per copy"));
  bench::set_peak_reference(r, "bandwidth", "hbm_bandwidth_gbps");
  run.copy_gbps = r.metrics.front().value;
  run.env.report(fmt::format("{}: {:.0f} GB/s", key, *run.copy_gbps));
  run.records.push_back(std::move(r));
}

// Block table of `tokens` positions for sequence number `seq` when every sequence owns
// `blocks_each` consecutive blocks.
std::vector<std::int32_t> block_table(int seq, int blocks_each, int tokens, int block_size) {
  std::vector<std::int32_t> table;
  const int need = (tokens + block_size - 1) / block_size;
  for (int i = 0; i < need; ++i) table.push_back(seq * blocks_each + i);
  return table;
}

// A chunk of sequence number `seq` (its slot too) starting at `start`.
core::SeqChunk make_chunk(int seq, int start, std::vector<std::int32_t> tokens, int blocks_each, int block_size,
                          bool samples) {
  core::SeqChunk c;
  c.seq_id = static_cast<std::uint64_t>(seq);
  c.slot = seq;
  c.start_position = start;
  c.block_table = block_table(seq, blocks_each, start + static_cast<int>(tokens.size()), block_size);
  c.tokens = std::move(tokens);
  c.samples = samples;
  return c;
}

std::vector<std::int32_t> prompt(int seq, int start, int size, int vocab) {
  std::vector<std::int32_t> tokens;
  for (int p = start; p < start + size; ++p) tokens.push_back(core::prompt_token(kPromptSeed, seq, p, vocab));
  return tokens;
}

// Fills the KV cache of `batch` sequences with prompts of `context` tokens (steps of at most the
// engine's token budget); returns each sequence's sampled token.
std::vector<std::int32_t> prefill_sequences(ci::CudaEngine& engine, int batch, int context, int blocks_each) {
  const int bs = engine.kv_block_size();
  const int budget = engine.max_step_tokens();
  const int vocab = engine.config().vocab;
  std::vector<std::int32_t> last(static_cast<std::size_t>(batch));
  core::StepPlan plan;
  std::vector<int> sampled_seq;
  auto flush = [&] {
    if (plan.empty()) return;
    const auto tokens = engine.execute(plan);
    for (std::size_t i = 0; i < tokens.size() && i < sampled_seq.size(); ++i) last[sampled_seq[i]] = tokens[i];
    plan = {};
    sampled_seq.clear();
  };
  for (int s = 0; s < batch; ++s) {
    for (int start = 0; start < context;) {
      if (plan.prefill_tokens >= budget) flush();
      const int size = std::min(context - start, budget - plan.prefill_tokens);
      const bool samples = start + size == context;
      if (samples) sampled_seq.push_back(s);
      plan.chunks.push_back(make_chunk(s, start, prompt(s, start, size, vocab), blocks_each, bs, samples));
      plan.prefill_tokens += size;
      start += size;
    }
  }
  flush();
  return last;
}

// Times `step` (one engine step) until the stopping rule is met, after `warmup` untimed steps.
std::vector<double> time_steps(const BenchEnv& env, int warmup, const std::function<void()>& step) {
  for (int i = 0; i < warmup && !env.stop_requested(); ++i) step();
  std::vector<double> samples;
  const auto t0 = Clock::now();
  while (!env.stop_requested() && !bench::should_stop(env.options.timing, samples, seconds_since(t0))) {
    const auto s0 = Clock::now();
    step();
    samples.push_back(seconds_since(s0));
  }
  return samples;
}

// Pipelined: one step of `plan` always queued behind the one running, as EngineSut runs a server's
// steps; a sample is the time from one step's tokens reaching the host to the next one's.
std::vector<double> time_steps_pipelined(const BenchEnv& env, int warmup, ci::CudaEngine& engine,
                                         const core::StepPlan& plan) {
  engine.submit(plan);
  std::vector<double> samples;
  try {
    for (int i = 0; i < warmup && !env.stop_requested(); ++i) {
      engine.submit(plan);
      (void)engine.collect();
    }
    const auto t0 = Clock::now();
    auto last = Clock::now();
    while (!env.stop_requested() && !bench::should_stop(env.options.timing, samples, seconds_since(t0))) {
      engine.submit(plan);
      (void)engine.collect();
      samples.push_back(seconds_since(last));
      last = Clock::now();
    }
  } catch (...) {
    // The step still queued is collected (or fails as well), so that a later case's synchronous
    // steps report their own error, not this one's leftover.
    try {
      (void)engine.collect();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one rethrown
    }
    throw;
  }
  (void)engine.collect();
  return samples;
}

// Times steps of `plan` under telemetry into `r` (pipelined or synchronous as --stepping says);
// nullopt (and `r` recorded as skipped) when interrupted before the first sample.
std::optional<bench::SampleSummary> time_plan(Run& run, Record& r, ci::CudaEngine& engine, const core::StepPlan& plan,
                                              int warmup) {
  TelemetryScope telemetry(run.env.telemetry);
  r.params["stepping"] = run.o.pipelined_steps ? "pipelined" : "synchronous";
  const auto samples = run.o.pipelined_steps ? time_steps_pipelined(run.env, warmup, engine, plan)
                                             : time_steps(run.env, warmup, [&] { (void)engine.execute(plan); });
  r.telemetry = telemetry.finish();
  if (samples.empty()) {
    run.skip(std::move(r), Outcome::skipped, "interrupted");
    return std::nullopt;
  }
  return bench::summarize(samples);
}

void decode_case(Run& run, ci::CudaEngine& engine, int batch) {
  const auto& m = run.o.model;
  const int context = run.o.isl;
  const std::string key = fmt::format("serve/decode/{}/b{}_ctx{}", run.tag, batch, context);
  if (!wanted(run.env.options, key)) return;
  // Bytes one step must read, over all GPUs (bench::decode_step_bytes says which).
  const bench::DecodeStepBytes bytes = bench::decode_step_bytes(m, batch, context, run.o.tp, run.o.weights);
  const std::int64_t weight_read = bytes.weight_bytes;
  const std::int64_t kv_read = bytes.kv_bytes;
  const double bytes_per_gpu = bytes.per_gpu;
  Record r = run.make(key, {{"batch", batch},
                            {"context_tokens", context},
                            {"weight_bytes_read_per_step", weight_read},
                            {"kv_bytes_read_per_step", kv_read},
                            {"bytes_read_per_step_per_gpu", bytes_per_gpu}});
  r.extra["engine"] = run.engine_summary;
  const int bs = engine.kv_block_size();
  const int blocks_each = static_cast<int>(bench::kv_blocks_for(context + 1, bs));
  if (batch > engine.max_running()) {
    return run.skip(
        std::move(r), Outcome::skipped,
        fmt::format("batch {} exceeds the engine's largest batch {} (--max-batch)", batch, engine.max_running()));
  }
  if (std::int64_t{batch} * blocks_each > engine.kv_blocks()) {
    return run.skip(
        std::move(r), Outcome::skipped,
        fmt::format("needs {} KV blocks of {} tokens, the engine has {}", batch * blocks_each, bs, engine.kv_blocks()));
  }
  const std::vector<std::int32_t> last = prefill_sequences(engine, batch, context, blocks_each);
  core::StepPlan plan;
  for (int s = 0; s < batch; ++s) {
    plan.chunks.push_back(make_chunk(s, context, {last[static_cast<std::size_t>(s)]}, blocks_each, bs, true));
  }
  plan.decode_tokens = batch;
  // The same step again and again: it rewrites the KV of position `context`, so every sample reads
  // and writes the same bytes.
  const auto timed = time_plan(run, r, engine, plan, 5);
  if (!timed) return;
  const bench::SampleSummary& times = *timed;
  r.metrics.push_back(
      bench::rate_metric("throughput", "tokens/s", batch, times, "decode tokens per second: batch / step time"));
  r.metrics.push_back(bench::time_metric(
      "step_time", "ms", 1e3, times,
      run.o.pipelined_steps ? "one decode-only engine step: from one step's sampled tokens on the "
                              "host to the next one's, with the next step always queued (pipelined)"
                            : "wall time of one decode-only engine step (execute() to sampled tokens)"));
  r.metrics.push_back(bench::rate_metric("bandwidth", "GB/s", bytes_per_gpu / 1e9, times,
                                         "bytes a step must read per GPU (weights but the embedding table, K/V of "
                                         "the context) / step time; 1 GB = 1e9 B"));
  std::string roofline;
  if (run.copy_gbps) {
    results::Metric pct;
    pct.name = "hbm_roofline_pct";
    pct.value = bench::hbm_roofline_pct(bytes_per_gpu, times.median, *run.copy_gbps);
    pct.unit = "%";
    pct.statistic = "value";
    pct.note =
        "bytes a step must read per GPU / median step time / the 4 GiB copy bandwidth of this run "
        "(serve/copy)";
    r.metrics.push_back(pct);
    r.params["copy_bandwidth_gbps"] = *run.copy_gbps;
    r.params["roofline_step_ms"] = bench::roofline_step_ms(bytes_per_gpu, *run.copy_gbps);
    roofline = fmt::format(", {:.1f}% of the HBM roofline", pct.value);
  }
  run.env.report(
      fmt::format("{}: {:.3f} ms/step, {:.0f} tokens/s{}", key, times.median * 1e3, batch / times.median, roofline));
  run.records.push_back(std::move(r));
}

void prefill_case(Run& run, ci::CudaEngine& engine, int tokens) {
  const std::string key = fmt::format("serve/prefill/{}/t{}", run.tag, tokens);
  if (!wanted(run.env.options, key)) return;
  // The FLOPs the engine executes: with the last layer pruned, its attention, o and MLP run for the
  // last token only (EngineOptions::prune_last_layer).
  const bool pruned = engine.info().last_layer_pruned;
  const double flops = bench::prefill_flops(run.o.model, tokens, pruned);
  Record r = run.make(
      key,
      {{"prompt_tokens", tokens},
       {"flops", flops},
       {"flops_formula", pruned ? "2 x layer params x tokens + causal attention 4 x heads x head_dim x T(T+1)/2 per "
                                  "layer but the last, where attention, o and the MLP run for the last token "
                                  "only (last_layer_pruned) + LM head of the last token"
                                : "2 x layer params x tokens + causal attention 4 x heads x head_dim x "
                                  "T(T+1)/2 per layer + LM head of the last token"}});
  r.extra["engine"] = run.engine_summary;
  const int bs = engine.kv_block_size();
  const int blocks = static_cast<int>(bench::kv_blocks_for(tokens + 1, bs));
  if (tokens > engine.max_step_tokens()) {
    return run.skip(std::move(r), Outcome::skipped,
                    fmt::format("{} tokens exceed the engine's step of {} tokens", tokens, engine.max_step_tokens()));
  }
  if (blocks > engine.kv_blocks()) {
    return run.skip(std::move(r), Outcome::skipped,
                    fmt::format("needs {} KV blocks, the engine has {}", blocks, engine.kv_blocks()));
  }
  core::StepPlan plan;
  plan.chunks.push_back(make_chunk(0, 0, prompt(0, 0, tokens, run.o.model.vocab), blocks, bs, true));
  plan.prefill_tokens = tokens;
  const auto timed = time_plan(run, r, engine, plan, 2);
  if (!timed) return;
  const bench::SampleSummary& times = *timed;
  // Per GPU, so it compares with one GPU's GEMM rate and dense peak.
  r.metrics.push_back(bench::rate_metric("throughput", "TFLOP/s", flops / run.o.tp / 1e12, times,
                                         "prefill FLOPs (params: flops_formula) per GPU per second"));
  r.metrics.push_back(bench::time_metric("time", "ms", 1e3, times, "wall time of the prefill step"));
  r.metrics.push_back(bench::rate_metric("prefill_throughput", "tokens/s", tokens, times, "prompt tokens per second"));
  bench::set_peak_reference(r, "throughput",
                            run.o.weights == core::WeightFormat::fp8_e4m3 ? "dense_tflops/fp8" : "dense_tflops/bf16");
  run.env.report(fmt::format("{}: {:.1f} ms, {:.0f} TFLOP/s per GPU", key, times.median * 1e3,
                             flops / run.o.tp / times.median / 1e12));
  run.records.push_back(std::move(r));
}

core::SchedulerConfig scheduler_config(const ci::CudaEngine& engine, int max_sequence_tokens, int step_budget) {
  core::SchedulerConfig c;
  c.block_size = engine.kv_block_size();
  c.num_blocks = engine.kv_blocks();
  c.max_step_tokens = step_budget;
  c.max_running = engine.max_running();
  c.max_sequence_tokens = max_sequence_tokens;
  return c;
}

// One load-generator run on a fresh scheduler (an empty KV cache) and clock.
serve::LoadSummary run_scenario(Run& run, ci::CudaEngine& engine, const serve::LoadSettings& settings) {
  core::EngineSut sut(engine, scheduler_config(engine, run.o.max_sequence_tokens(), run.step_budget(settings.scenario)),
                      run.o.model.vocab, kPromptSeed);
  sut.set_pipelined(run.o.pipelined_steps);
  serve::SteadyClock clock;
  return serve::run_load(sut, clock, settings);
}

nlohmann::ordered_json load_params(const Run& run, const serve::LoadSettings& s) {
  nlohmann::ordered_json p;
  p["model"] = run.o.model.name;
  p["tp"] = run.o.tp;
  p["dtype"] = core::to_string(run.o.weights);
  p["max_step_tokens"] = run.step_budget(s.scenario);
  if (s.lengths.kind == serve::LengthSpec::Kind::from_file) {
    p["lengths"] = s.lengths.source;
  } else {
    // Uniform lengths (--range-ratio) keep the nominal --isl/--osl here, their range beside them.
    p["input_tokens"] = run.o.isl;
    p["output_tokens"] = run.o.osl;
    if (s.lengths.kind == serve::LengthSpec::Kind::uniform) {
      p["lengths"] = "uniform";
      p["range_ratio"] = run.o.range_ratio;
      p["input_tokens_range"] = {s.lengths.input_min, s.lengths.input_max};
      p["output_tokens_range"] = {s.lengths.output_min, s.lengths.output_max};
    }
  }
  return p;
}

void finish_load_record(Run& run, Record r, std::optional<results::Telemetry> telemetry) {
  r.gpus = run.gpus;
  r.telemetry = std::move(telemetry);
  r.extra["engine"] = run.engine_summary;
  run.records.push_back(std::move(r));
}

int static_batch(const Run& run) {
  return *std::max_element(run.o.decode_batches.begin(), run.o.decode_batches.end());
}
std::string static_key(const Run& run) {
  return fmt::format("serve/static/{}/b{}_isl{}_osl{}", run.tag, static_batch(run), run.o.isl, run.o.osl);
}

// B requests of isl/osl all at once (Offline): the end-to-end static batch.
void static_case(Run& run, ci::CudaEngine& engine) {
  const int batch = static_batch(run);
  const std::string key = static_key(run);
  if (!wanted(run.env.options, key)) return;
  serve::LoadSettings s;
  s.scenario = serve::Scenario::offline;
  s.lengths.input_min = s.lengths.input_max = run.o.isl;
  s.lengths.output_min = s.lengths.output_max = run.o.osl;
  s.min_requests = s.max_requests = batch;
  s.gpus = run.o.tp;
  try {
    serve::LoadSettings warm = s;  // untimed: the same batch with short outputs (graphs, allocator)
    warm.lengths.output_min = warm.lengths.output_max = std::min(run.o.osl, 4);
    (void)run_scenario(run, engine, warm);
    // Repeated on the same engine, each run on a fresh scheduler: one end-to-end run is one sample, and
    // the card's clocks move between runs.
    TelemetryScope telemetry(run.env.telemetry);
    std::vector<serve::LoadSummary> runs;
    for (int i = 0; i < run.o.static_repeats && (i == 0 || !run.env.stop_requested()); ++i) {
      runs.push_back(run_scenario(run, engine, s));
    }
    auto tel = telemetry.finish();
    nlohmann::ordered_json params = load_params(run, s);
    params["batch"] = batch;
    Record r = serve::repeated_record(runs, key, params);
    const results::Metric* rate = r.find_metric("output_tokens_per_s");
    const results::Metric* ttft = r.find_metric("ttft");
    const results::Metric* tpot = r.find_metric("tpot");
    run.env.report(fmt::format(
        "{}: {:.0f} output tokens/s{}, TTFT p50 {:.0f} ms, TPOT p50 {:.2f} ms", key, rate ? rate->value : 0.0,
        rate && rate->spread
            ? fmt::format(" (median of {} runs, {:.0f}-{:.0f})", runs.size(), rate->spread->min, rate->spread->max)
            : std::string(),
        ttft ? ttft->value : 0.0, tpot ? tpot->value : 0.0));
    finish_load_record(run, std::move(r), std::move(tel));
  } catch (const UsageError& e) {  // the engine cannot hold these requests
    run.skip(run.make(key, load_params(run, s)), Outcome::skipped, e.what());
  }
}

// The --scenario run (one load point, or a sweep over --rate / --concurrency lists), or --find-peak's
// probes and peak.
void load_case(Run& run, ci::CudaEngine& engine) {
  const serve::LoadSettings& s = *run.o.load;
  const std::string prefix = fmt::format("serve/load/{}/{}", run.tag, serve::to_string(s.scenario));
  if (!wanted(run.env.options, prefix)) return;
  const nlohmann::ordered_json params = load_params(run, s);
  auto describe = [](const std::string& what, const serve::LoadSummary& summary) {
    return fmt::format(
        "{}: {} requests, {:.2f} requests/s, {:.0f} output tokens/s, p99 TTFT {:.0f} ms, p99 TPOT "
        "{:.2f} ms, {}",
        what, summary.requests, summary.requests_per_s, summary.output_tokens_per_s, summary.ttft_ms.p99,
        summary.tpot_ms.p99, summary.valid ? "VALID" : "INVALID");
  };
  try {
    // The load points: each rate, each client count, or the one run of the other scenarios.
    std::vector<serve::LoadSettings> points;
    if (s.scenario == serve::Scenario::server && run.o.rates.size() > 1) {
      for (double rate : run.o.rates) points.emplace_back(s).target_rate = rate;
    } else if (s.scenario == serve::Scenario::concurrency && run.o.concurrencies.size() > 1) {
      for (int clients : run.o.concurrencies) {
        serve::LoadSettings& point = points.emplace_back(s);
        point.concurrency = clients;
        if (run.o.default_warmup) point.warmup_requests = serve::default_warmup(point.scenario, clients);
      }
    }
    if (!run.o.find_peak && points.empty()) {
      const std::string key = s.scenario == serve::Scenario::server ? serve::server_rate_key(prefix, s.target_rate)
                              : s.scenario == serve::Scenario::concurrency
                                  ? fmt::format("{}/c{}", prefix, s.concurrency)
                                  : prefix;
      TelemetryScope telemetry(run.env.telemetry);
      const serve::LoadSummary summary = run_scenario(run, engine, s);
      auto tel = telemetry.finish();
      finish_load_record(run, serve::to_record(summary, key, params), std::move(tel));
      run.env.report(describe(key, summary));
      return;
    }
    if (!points.empty()) {
      // A sweep: every point on the same engine, in the order given; an INVALID point is part of the curve.
      std::vector<serve::LoadSummary> runs;
      std::vector<std::optional<results::Telemetry>> point_telemetry;
      for (const serve::LoadSettings& point : points) {
        if (run.env.stop_requested()) break;
        TelemetryScope telemetry(run.env.telemetry);
        runs.push_back(run_scenario(run, engine, point));
        point_telemetry.push_back(telemetry.finish());
        run.env.report(describe(point.scenario == serve::Scenario::server
                                    ? fmt::format("{} at {:g} requests/s", prefix, point.target_rate)
                                    : fmt::format("{} with {} in flight", prefix, point.concurrency),
                                runs.back()));
      }
      std::vector<Record> records = serve::sweep_records(runs, prefix, params);
      for (std::size_t i = 0; i < records.size(); ++i) {
        finish_load_record(run, std::move(records[i]), std::move(point_telemetry[i]));
      }
      return;
    }
    std::vector<std::optional<results::Telemetry>> probe_telemetry;
    const serve::PeakResult peak = serve::find_peak(
        [&](double rate) {
          serve::LoadSettings probe = s;
          probe.target_rate = rate;
          TelemetryScope telemetry(run.env.telemetry);
          serve::LoadSummary summary = run_scenario(run, engine, probe);
          probe_telemetry.push_back(telemetry.finish());
          run.env.report(fmt::format("{}: probe {:.3g} requests/s: p99 TTFT {:.0f} ms, p99 TPOT {:.2f} ms, {}", prefix,
                                     rate, summary.ttft_ms.p99, summary.tpot_ms.p99,
                                     summary.valid ? "VALID" : "INVALID"));
          return summary;
        },
        run.o.peak);
    std::vector<Record> records = serve::peak_records(peak, prefix, params);
    for (std::size_t i = 0; i < records.size(); ++i) {
      finish_load_record(run, std::move(records[i]),
                         i < probe_telemetry.size() ? std::move(probe_telemetry[i]) : std::nullopt);
    }
    run.env.report(peak.found ? fmt::format("{}: peak {:.3g} requests/s", prefix, peak.peak_rate)
                              : fmt::format("{}: no valid rate down to {:g} requests/s", prefix, run.o.peak.low));
  } catch (const UsageError& e) {  // a request the engine can never hold (its context or KV cache)
    run.skip(run.make(prefix, params), Outcome::skipped, e.what());
  }
}

std::vector<Record> ServeBenchmark::run(const BenchEnv& env) {
  const bench::ServeOptions& o = env.options.serve;
  const bool fp8 = o.weights == core::WeightFormat::fp8_e4m3;
  Run run{env, o, {}, fmt::format("{}/tp{}{}", o.model_slug, o.tp, fp8 ? "-fp8" : ""), {}, std::nullopt, {}, {}};
  if (o.tp > 1) {
    if (static_cast<int>(env.gpus.size()) < o.tp) {
      throw UsageError(fmt::format("--tp {}: needs {} GPUs, {} given", o.tp, o.tp, env.gpus.size()));
    }
    run.gpus.assign(env.gpus.begin(), env.gpus.begin() + o.tp);
  } else {
    run.gpus = {env.device.index};
  }
  GPUSCOUT_CUDA_CHECK(cudaSetDevice(run.gpus.front()));

  bool any_decode = false;
  for (int b : o.decode_batches) {
    any_decode = any_decode || wanted(env.options, fmt::format("serve/decode/{}/b{}_ctx{}", run.tag, b, o.isl));
  }
  if (any_decode) measure_copy(run);  // before the engine takes the memory
  if (env.stop_requested()) return std::move(run.records);

  ci::EngineOptions eo;
  eo.gpus = run.gpus;
  eo.max_kv_blocks = o.kv_blocks;
  const int largest_batch = *std::max_element(o.decode_batches.begin(), o.decode_batches.end());
  eo.max_running = o.max_batch > 0 ? o.max_batch : std::max(eo.max_running, largest_batch);
  // Room for the longest step: a prefill case's prompt, or the static batch's and load run's budgets.
  eo.max_step_tokens =
      std::max({eo.max_step_tokens, *std::max_element(o.prefill_tokens.begin(), o.prefill_tokens.end()),
                wanted(env.options, static_key(run)) ? run.step_budget(serve::Scenario::offline) : 0,
                o.load ? run.step_budget(o.load->scenario) : 0});
  eo.max_context = o.max_sequence_tokens();
  eo.collective_timeout_s = env.options.coll_timeout_s;
  eo.fp8_weights = fp8;
  eo.resolve_gemm_ties = o.gemm_ties_in_steps;

  const std::string engine_key = fmt::format("serve/engine/{}", run.tag);
  Record engine_record = run.make(engine_key, {{"kv_block_size", eo.kv_block_size},
                                               {"memory_fraction", eo.memory_fraction},
                                               {"max_running", eo.max_running},
                                               {"max_step_tokens", eo.max_step_tokens},
                                               {"max_context", eo.max_context},
                                               {"max_kv_blocks", eo.max_kv_blocks},
                                               {"cuda_graphs", eo.cuda_graphs},
                                               {"engine_tuning", eo.resolve_gemm_ties ? "steps" : "alone"},
                                               {"stepping", o.pipelined_steps ? "pipelined" : "synchronous"}});
  env.report(fmt::format("{}: building {} ({} weights, TP {}) on GPU {}", engine_key, o.model.name,
                         fp8 ? "FP8" : "BF16", o.tp, fmt::join(run.gpus, ",")));
  std::unique_ptr<ci::CudaEngine> engine;
  const auto t0 = Clock::now();
  try {
    engine = ci::CudaEngine::create(o.model, eo);
  } catch (const CudaError& e) {
    (void)cudaGetLastError();
    run.skip(std::move(engine_record), e.out_of_memory() ? Outcome::skipped : Outcome::failed, e.what());
    return std::move(run.records);
  } catch (const ci::EngineFault& e) {  // a TP start-up step failed or hung (communicators aborted)
    run.skip(std::move(engine_record), Outcome::failed, e.what());
    return std::move(run.records);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // the model does not fit: the engine's message names what would
    run.skip(std::move(engine_record), Outcome::skipped, e.what());
    return std::move(run.records);
  }
  const double startup_s = seconds_since(t0);
  run.info = engine->info();
  const ci::EngineInfo& info = run.info;
  run.engine_summary = {{"weight_bytes_per_gpu", info.weight_bytes_per_gpu},
                        {"kv_cache_bytes_per_gpu", info.kv_cache_bytes_per_gpu},
                        {"kv_blocks", info.kv_blocks},
                        {"kv_block_size", info.kv_block_size},
                        {"graph_buckets", info.graph_buckets},
                        {"programmatic_launch", info.programmatic_launch},
                        {"last_layer_pruned", info.last_layer_pruned}};
  engine_record.params["weight_bytes_per_gpu"] = info.weight_bytes_per_gpu;
  engine_record.params["kv_cache_bytes_per_gpu"] = info.kv_cache_bytes_per_gpu;
  engine_record.params["workspace_bytes_per_gpu"] = info.workspace_bytes_per_gpu;
  engine_record.params["kv_blocks"] = info.kv_blocks;
  engine_record.params["kv_cache_tokens"] = std::int64_t{info.kv_blocks} * info.kv_block_size;
  engine_record.params["prefill_attention"] = info.prefill_attention;
  engine_record.params["last_layer_pruned"] = info.last_layer_pruned;
  engine_record.params["mlp_gate_up"] = info.mlp_gate_up;
  engine_record.params["swiglu_min_rows"] = info.swiglu_min_rows;
  engine_record.extra["graph_buckets"] = info.graph_buckets;
  engine_record.extra["gemm_choices"] = info.gemm_choices;
  engine_record.extra["attention_choices"] = info.attention_choices;
  results::Metric startup;
  startup.name = "startup_time";
  startup.value = startup_s;
  startup.unit = "s";
  startup.statistic = "value";
  startup.note = "engine creation: weights generated on the GPU, KV cache, GEMM choices, CUDA graphs";
  engine_record.metrics.push_back(startup);
  env.report(fmt::format("{}: ready in {:.1f} s: {:.1f} GiB of weights and {:.1f} GiB of KV cache ({} tokens) per GPU",
                         engine_key, startup_s, info.weight_bytes_per_gpu / double(1 << 30),
                         info.kv_cache_bytes_per_gpu / double(1 << 30),
                         std::int64_t{info.kv_blocks} * info.kv_block_size));
  run.records.push_back(std::move(engine_record));

  // Each case catches its own CUDA failure so the others still run.
  auto guarded = [&](const std::string& what, const std::function<void()>& body) {
    if (env.stop_requested()) return;
    try {
      body();
    } catch (const CudaError& e) {
      (void)cudaGetLastError();
      run.skip(run.make(fmt::format("serve/{}/{}", what, run.tag), {}), Outcome::failed, e.what());
    } catch (const ci::EngineFault& e) {  // a TP step failed or hung; later cases fail at once
      run.skip(run.make(fmt::format("serve/{}/{}", what, run.tag), {}), Outcome::failed, e.what());
    }
  };
  for (int b : o.decode_batches) guarded("decode", [&] { decode_case(run, *engine, b); });
  for (int t : o.prefill_tokens) guarded("prefill", [&] { prefill_case(run, *engine, t); });
  guarded("static", [&] { static_case(run, *engine); });
  if (o.load) guarded("load", [&] { load_case(run, *engine); });
  return std::move(run.records);
}

}  // namespace

std::unique_ptr<Benchmark> make_serve_benchmark() {
  return std::make_unique<ServeBenchmark>();
}

}  // namespace gpuscout::cuda
