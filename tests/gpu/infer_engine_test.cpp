// The CUDA serving engine against the CPU reference, and a quick timing mode.
//
//   infer_engine_test                 tiny model, TP1 (and TP2 when 2 GPUs are visible): the same
//                                     Scheduler plans through both executors, logits compared and
//                                     greedy tokens checked; exit 77 without a GPU
//   infer_engine_test --bench MODEL [--tp N] [--no-pdl] [--fp8] [--no-attention-tuning] [--no-gemm-ties]
//                     [--attention-plan split|streaming:BLOCKS|pairs:STAGES] [--knock-out norms,rope,attention,silu]
//                                     (knock-out: those per-layer kernels left out, for timing
//                                     attribution of decode steps only; the tokens are then
//                                     meaningless, and in prefill steps the GEMMs then read zeros,
//                                     which on a power-capped GPU run faster than real data)
//                                     start-up time, decode step time at batch 1/8/32 against the
//                                     HBM roofline (copy bandwidth measured here), prefill steps of
//                                     1 x 8192 and 16 x 512 tokens in executed TFLOP/s against a cuBLASLt
//                                     8192^3 BF16 GEMM (a dozen calls: a burst rate, above the power-capped
//                                     rate `gpuscout bench` reports), and mixed steps (32 decodes + a 64..2048-token
//                                     prompt) against decode-only steps and the prompt alone
//
// Tolerance: the engine and the reference round to BF16 at the same points, so they differ only
// by FP32 accumulation order (cuBLASLt tiles, split-K, flash-decoding's split softmax vs a plain
// double sum); one BF16 ulp (2^-8 relative) flipped at an intermediate moves a logit by about
// that much times its scale, and two layers compound a few such flips. Bounds: max |diff| within
// 3% of the row's largest logit and relative L2 under 2% per row (seen on an H200: up to 1.5% and
// 1.2%, TP2 the higher, its all-reduce rounding the partial sums once more). A greedy token may differ
// only where the reference's best and the engine's choice are within 0.05 of each other (a
// near-tie at BF16 resolution); the plans continue with the reference's tokens, so both
// executors keep computing the same sequences.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine.hpp"
#include "engine_gemm.hpp"
#include "gpuscout/bench/serve_metrics.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/data/data_source.hpp"
#include "gpuscout/infer/engine_sut.hpp"
#include "gpuscout/infer/reference_model.hpp"
#include "gpuscout/infer/scheduler.hpp"
#include "gpuscout/infer/transformer_config.hpp"
#include "gpuscout/infer/weights.hpp"
#include "gpuscout/workloads/model_catalog.hpp"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace {

namespace gi = gpuscout::infer;
namespace ci = gpuscout::cuda::infer;
namespace serve = gpuscout::serve;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Scenario {
  std::string name;
  std::vector<int> prompts;  // prompt lengths
  std::vector<int> outputs;  // output lengths
  int num_blocks = 64;
  int max_step_tokens = 64;
  int max_running = 8;
  bool fused_swiglu = true;  // EngineOptions::fused_swiglu
  int swiglu_min_rows = 0;   // EngineOptions::fused_swiglu_min_rows (0: the engine's rule)
};

struct Totals {
  int steps = 0, graph_steps = 0, compared = 0, ties = 0, failures = 0;
  double worst_abs = 0, worst_rel_l2 = 0;
};

// The engine and scheduler settings of a scenario (KV blocks of 16 tokens).
ci::EngineOptions engine_options(const std::vector<int>& gpus, bool graphs, const Scenario& sc) {
  ci::EngineOptions eo;
  eo.gpus = gpus;
  eo.kv_block_size = 16;
  eo.max_kv_blocks = sc.num_blocks;
  eo.max_running = sc.max_running;
  eo.max_step_tokens = sc.max_step_tokens;
  eo.fused_swiglu = sc.fused_swiglu;
  eo.fused_swiglu_min_rows = sc.swiglu_min_rows;
  eo.cuda_graphs = graphs;
  return eo;
}

gi::SchedulerConfig scheduler_config(const ci::CudaEngine& engine, const gi::TransformerConfig& cfg,
                                     const Scenario& sc) {
  gi::SchedulerConfig sconf;
  sconf.block_size = 16;
  sconf.num_blocks = std::min(engine.kv_blocks(), sc.num_blocks);
  sconf.max_step_tokens = sc.max_step_tokens;
  sconf.max_running = sc.max_running;
  sconf.max_sequence_tokens = static_cast<int>(cfg.max_context);
  return sconf;
}

// Runs one scenario through both executors with the same plans; returns failures. fp8: FP8
// weights on both sides; the engine also quantizes activations per tensor on its cuBLASLt path,
// which the reference does not model, so the bounds are wider (still far below what a wrong scale,
// layout or code would give: those miss by 100% of the logits).
int run_scenario(const gi::TransformerConfig& cfg, const std::vector<int>& gpus, bool graphs, const Scenario& sc,
                 bool fp8 = false, ci::DecodeAttentionPlan attention_plan = {}, bool own_gemms = false) {
  const double max_rel_abs = fp8 ? 0.15 : 0.03, max_rel_l2 = fp8 ? 0.08 : 0.02, tie_margin = fp8 ? 0.3 : 0.05;
  ci::EngineOptions eo = engine_options(gpus, graphs, sc);
  eo.fp8_weights = fp8;
  eo.attention_plan_override = attention_plan;
  eo.prefer_own_gemm_kernels = own_gemms;
  auto engine = ci::CudaEngine::create(cfg, eo);
  engine->keep_logits(true);
  // With graphs the engine times its decode attention plans (one line per bucket and context
  // class, each naming the plan it kept); the graphs this scenario replays use them.
  const auto& attention = engine->info().attention_choices;
  int setup_failures = 0;
  if (graphs == attention.empty()) {
    fmt::print("  attention plans: {} lines with graphs {}: FAIL\n", attention.size(), graphs ? "on" : "off");
    ++setup_failures;
  }
  gi::ReferenceOptions ro;
  ro.kv_block_size = 16;
  ro.kv_blocks = sc.num_blocks;
  ro.max_running = sc.max_running;
  ro.max_step_tokens = sc.max_step_tokens;
  ro.fp8_weights = fp8;
  gi::ReferenceModel reference(cfg, ro);

  gi::Scheduler scheduler(scheduler_config(*engine, cfg, sc));
  for (std::size_t i = 0; i < sc.prompts.size(); ++i) {
    gi::SequenceRequest req;
    req.id = i + 1;
    for (int p = 0; p < sc.prompts[i]; ++p) req.prompt.push_back(gi::prompt_token(7, req.id, p, cfg.vocab));
    req.max_new_tokens = sc.outputs[i];
    scheduler.add(std::move(req));
  }
  Totals t;
  std::int64_t preempted = 0;
  while (!scheduler.idle()) {
    const gi::StepPlan plan = scheduler.plan();
    if (plan.empty()) break;
    preempted += static_cast<std::int64_t>(plan.preempted.size());
    bool decode_only = true;
    for (const auto& c : plan.chunks) decode_only = decode_only && c.is_decode() && c.samples;
    const auto got = engine->execute(plan);
    const auto want = reference.execute(plan);
    ++t.steps;
    t.graph_steps += decode_only && graphs ? 1 : 0;
    if (got.size() != want.size()) {
      fmt::print("FAIL step {}: {} tokens from the engine, {} from the reference\n", t.steps, got.size(), want.size());
      return 1;
    }
    const auto& gl = engine->last_logits();
    const auto& rl = reference.last_logits();
    for (std::size_t i = 0; i < want.size(); ++i) {
      double max_ref = 0, max_diff = 0, diff2 = 0, ref2 = 0;
      for (int v = 0; v < cfg.vocab; ++v) {
        const double r = rl[i][static_cast<std::size_t>(v)], g = gl[i][static_cast<std::size_t>(v)];
        max_ref = std::max(max_ref, std::fabs(r));
        max_diff = std::max(max_diff, std::fabs(g - r));
        diff2 += (g - r) * (g - r);
        ref2 += r * r;
      }
      const double rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-30));
      const double rel_abs = max_diff / std::max(max_ref, 1.0);
      t.worst_abs = std::max(t.worst_abs, rel_abs);
      t.worst_rel_l2 = std::max(t.worst_rel_l2, rel_l2);
      ++t.compared;
      bool ok = std::isfinite(diff2) && rel_abs <= max_rel_abs && rel_l2 <= max_rel_l2;
      if (got[i] != want[i]) {
        const double margin = rl[i][static_cast<std::size_t>(want[i])] -
                              (got[i] >= 0 && got[i] < cfg.vocab ? rl[i][static_cast<std::size_t>(got[i])] : -1e30);
        if (margin <= tie_margin) {
          ++t.ties;
        } else {
          ok = false;
          fmt::print("  token differs at step {} seq {}: engine {} reference {} (reference margin {:.4f})\n", t.steps,
                     plan.chunks[i].seq_id, got[i], want[i], margin);
        }
      }
      if (!ok) {
        ++t.failures;
        if (t.failures <= 5) {
          fmt::print("  step {} row {}: max |diff| {:.4f} (of max |logit| {:.3f}), rel L2 {:.4f}\n", t.steps, i,
                     max_diff, max_ref, rel_l2);
        }
      }
    }
    std::vector<std::int32_t> sampled;
    for (std::size_t i = 0; i < want.size(); ++i) sampled.push_back(want[i]);
    scheduler.complete(plan, sampled);
  }
  fmt::print(
      "{}{} TP{} graphs {}: {} steps ({} graph replays), {} preemptions, {} rows compared, worst "
      "max|diff|/max|logit| {:.4f}, worst rel L2 {:.4f}, near-tie tokens {}, failures {} -> {}\n",
      sc.name,
      std::string(fp8 ? " FP8" : "") + (cfg.qkv_bias ? " QKV-bias" : "") +
          (attention_plan.kernel == ci::DecodeAttentionPlan::Kernel::automatic
               ? ""
               : " attention " + ci::describe(attention_plan) +
                     // launch_decode_attention runs the split kernel where the streaming one does not fit
                     (attention_plan.kernel == ci::DecodeAttentionPlan::Kernel::streaming &&
                              ci::decode_attention_streaming_max_seqs(cfg.head_dim) < sc.max_running
                          ? " (split kernel where the streaming one does not fit)"
                          : "")) +
          (own_gemms ? " own GEMM kernels" : "") +
          (cfg.head_dim != gi::TransformerConfig::tiny().head_dim
               ? fmt::format(" head size {} (prefill attention {}, gate/up {})", cfg.head_dim,
                             engine->info().prefill_attention, engine->info().mlp_gate_up)
               : ""),
      gpus.size(), graphs ? "on" : "off", t.steps, t.graph_steps, preempted, t.compared, t.worst_abs, t.worst_rel_l2,
      t.ties, t.failures, t.failures == 0 ? "PASS" : "FAIL");
  return t.failures == 0 && setup_failures == 0 ? 0 : 1;
}

// Pipelined stepping (EngineSut::set_pipelined; CudaEngine::submit with pending decode tokens read
// on the GPU): every request's tokens equal those of synchronous steps on the same engine, through
// chunked prefill, mixed steps, graph and eager steps and preemption.
int pipeline_check(const gi::TransformerConfig& cfg, const std::vector<int>& gpus, bool graphs, const Scenario& sc) {
  auto engine = ci::CudaEngine::create(cfg, engine_options(gpus, graphs, sc));
  const gi::SchedulerConfig sconf = scheduler_config(*engine, cfg, sc);
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> outputs[2];
  std::int64_t preemptions[2] = {0, 0}, steps[2] = {0, 0};
  for (int pipelined : {0, 1}) {
    gi::EngineSut sut(*engine, sconf, cfg.vocab);
    sut.set_pipelined(pipelined == 1);
    for (std::size_t i = 0; i < sc.prompts.size(); ++i) {
      serve::Request r;
      r.id = i + 1;
      r.input_tokens = sc.prompts[i];
      r.output_tokens = sc.outputs[i];
      sut.submit(r);
    }
    std::vector<serve::TokenEvent> events;
    while (!sut.idle() && sut.stats().steps < 100000) {
      events.clear();
      sut.step(events);
    }
    outputs[pipelined] = sut.outputs();
    preemptions[pipelined] = sut.stats().preemptions;
    steps[pipelined] = sut.stats().steps;
  }
  int differ = 0;
  for (std::size_t i = 0; i < sc.prompts.size(); ++i) {
    const auto id = static_cast<std::uint64_t>(i + 1);
    const auto& a = outputs[0][id];
    const auto& b = outputs[1][id];
    if (a != b || static_cast<int>(a.size()) != sc.outputs[i]) {
      ++differ;
      fmt::print("  request {}: {} synchronous tokens, {} pipelined, equal: {}\n", id, a.size(), b.size(), a == b);
    }
  }
  fmt::print(
      "pipelined {} TP{} graphs {}: {} requests, {} / {} steps, {} / {} preemptions (synchronous / pipelined), "
      "{} requests differ -> {}\n",
      sc.name, gpus.size(), graphs ? "on" : "off", sc.prompts.size(), steps[0], steps[1], preemptions[0],
      preemptions[1], differ, differ == 0 ? "PASS" : "FAIL");
  return differ == 0 ? 0 : 1;
}

double median(std::vector<double> v);

// A scheduler holding `batch` requests of `prompt` tokens, each to decode `steps` tokens after its
// first (the bench's decode cases).
std::unique_ptr<gi::Scheduler> decode_batch(const ci::CudaEngine& engine, int batch, int prompt, int steps,
                                            std::uint64_t& next_id) {
  gi::SchedulerConfig sc;
  sc.block_size = engine.kv_block_size();
  sc.num_blocks = engine.kv_blocks();
  sc.max_step_tokens = engine.max_step_tokens();
  sc.max_running = engine.max_running();
  sc.max_sequence_tokens = 4096;
  auto scheduler = std::make_unique<gi::Scheduler>(sc);
  for (int b = 0; b < batch; ++b) {
    gi::SequenceRequest r;
    r.id = next_id++;
    for (int p = 0; p < prompt; ++p) r.prompt.push_back(gi::prompt_token(1, r.id, p, engine.config().vocab));
    r.max_new_tokens = steps + 1;
    scheduler->add(std::move(r));
  }
  return scheduler;
}

// Median milliseconds between two collects of decode-only steps when `batch` requests of `prompt`
// tokens decode `steps` tokens with the steps pipelined as EngineSut does: plan n + 1 is submitted
// before step n is collected, so the host's share of a step overlaps the GPU's work.
// Also the median host time of submit() (`submit_us`) and of the wait in collect() (`wait_us`).
double pipelined_decode_ms(ci::CudaEngine& engine, int batch, int prompt, int steps, std::uint64_t& next_id,
                           double& submit_us, double& wait_us) {
  const auto owned = decode_batch(engine, batch, prompt, steps, next_id);
  gi::Scheduler& scheduler = *owned;
  std::optional<std::pair<gi::StepPlan, bool>> in_flight;  // plan, decode-only
  std::optional<Clock::time_point> last_collect;
  std::vector<double> intervals, submits, waits;
  auto collect = [&] {
    const auto t0 = Clock::now();
    const auto tokens = engine.collect();
    const auto now = Clock::now();
    if (in_flight->second) waits.push_back(std::chrono::duration<double, std::micro>(now - t0).count());
    // Both ends of the interval collect decode-only steps: the GPU ran exactly one between them.
    if (in_flight->second && last_collect) {
      intervals.push_back(std::chrono::duration<double, std::milli>(now - *last_collect).count());
    }
    last_collect = in_flight->second ? std::optional<Clock::time_point>(now) : std::nullopt;
    scheduler.resolve(in_flight->first, tokens);
    in_flight.reset();
  };
  while (!scheduler.idle() || in_flight) {
    gi::StepPlan plan = scheduler.plan();
    if (plan.empty()) {
      collect();
      continue;
    }
    bool decode_only = static_cast<int>(plan.chunks.size()) == batch;
    for (const auto& c : plan.chunks) decode_only = decode_only && c.is_decode();
    const auto t0 = Clock::now();
    engine.submit(plan);
    if (decode_only) submits.push_back(seconds_since(t0) * 1e6);
    (void)scheduler.complete_pending(plan);
    if (in_flight) collect();
    in_flight.emplace(std::move(plan), decode_only);
  }
  submit_us = median(submits);
  wait_us = median(waits);
  return median(intervals);
}

// TP2 with a rank that fails (throws) or hangs (skips its part of a step, leaving its peer in the
// all-reduce): the step must end with EngineFault naming the cause within the collective timeout
// plus a margin, later steps must be refused, and destroying the engine must not hang.
int fault_checks(const gi::TransformerConfig& tiny) {
  int failures = 0;
  constexpr double kTimeout = 3;
  for (bool throws : {true, false}) {
    const char* kind = throws ? "rank fails" : "rank hangs";
    std::fprintf(stderr, "fault check: %s at step 3 of TP2 (collective timeout %g s)\n", kind, kTimeout);
    const Scenario sc;  // 64 KV blocks, 64-token steps, batches up to 8
    ci::EngineOptions eo = engine_options({0, 1}, true, sc);
    eo.collective_timeout_s = kTimeout;
    eo.inject_fault_at_step = 3;
    eo.fault_throws = throws;
    auto engine = ci::CudaEngine::create(tiny, eo);
    gi::Scheduler scheduler(scheduler_config(*engine, tiny, sc));
    gi::SequenceRequest req;
    req.id = 1;
    for (int p = 0; p < 20; ++p) req.prompt.push_back(gi::prompt_token(7, req.id, p, tiny.vocab));
    req.max_new_tokens = 10;
    scheduler.add(std::move(req));
    std::string message;
    int step = 0;
    const auto t0 = Clock::now();
    double fault_s = 0;
    gi::StepPlan plan;
    try {
      while (!scheduler.idle()) {
        plan = scheduler.plan();
        ++step;
        const auto tokens = engine->execute(plan);
        scheduler.complete(plan, tokens);
      }
    } catch (const ci::EngineFault& e) {
      message = e.what();
      fault_s = seconds_since(t0);
    }
    const bool named = throws ? message.find("rank 1: injected fault") != std::string::npos
                              : message.find("collective timeout") != std::string::npos;
    if (step != 3 || !named || fault_s > kTimeout + 5) {
      fmt::print("FAIL {}: step {} after {:.1f} s: '{}'\n", kind, step, fault_s, message);
      ++failures;
    } else {
      fmt::print("ok   {}: step {} ended after {:.2f} s: {}\n", kind, step, fault_s, message);
    }
    try {
      (void)engine->execute(plan);  // the failed step again
      fmt::print("FAIL {}: a step after the fault was accepted\n", kind);
      ++failures;
    } catch (const ci::EngineFault&) {
    }
    const auto t1 = Clock::now();
    engine.reset();
    const double teardown_s = seconds_since(t1);
    if (teardown_s > 10) {
      fmt::print("FAIL {}: tearing the engine down took {:.1f} s\n", kind, teardown_s);
      ++failures;
    }
  }
  return failures;
}

int bad_input_checks(const gi::TransformerConfig& tiny) {
  int failures = 0;
  auto expect_throw = [&](const char* what, auto fn) {
    try {
      fn();
      fmt::print("FAIL {}: no error\n", what);
      ++failures;
    } catch (const std::exception& e) {
      fmt::print("ok   {}: {}\n", what, e.what());
    }
  };
  expect_throw("missing GPU", [&] {
    ci::EngineOptions o;
    o.gpus = {99};
    ci::CudaEngine::create(tiny, o);
  });
  // The tiny model at Llama-3.1-70B's layer width.
  auto wide = [&tiny](const char* name, int layers) {
    gi::TransformerConfig c = tiny;
    c.name = name;
    c.layers = layers;
    c.hidden = 8192;
    c.heads = 64;
    c.kv_heads = 8;
    c.head_dim = 128;
    c.ffn_hidden = 28672;
    return c;
  };
  expect_throw("too big a model", [&] {
    ci::EngineOptions o;
    ci::CudaEngine::create(wide("tiny-wide", 4000), o);
  });
  // Weights and KV cache fit, the workspaces of a 2M-token step (a 229 GB gate/up output) do not: the
  // message names the step budget.
  try {
    ci::EngineOptions o;
    o.max_step_tokens = 2'000'000;
    ci::CudaEngine::create(wide("one-wide-layer", 1), o);
    fmt::print("FAIL too big a step: no error\n");
    ++failures;
  } catch (const std::exception& e) {
    const bool named = std::string(e.what()).find("--max-step-tokens") != std::string::npos;
    fmt::print("{} too big a step: {}\n", named ? "ok  " : "FAIL", e.what());
    failures += named ? 0 : 1;
  }
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Timing mode.

// Median milliseconds of 10 calls of fn timed with events (after 2 untimed ones).
template <typename Fn>
double median_ms(Fn fn) {
  cudaEvent_t s, e;
  GPUSCOUT_CUDA_CHECK(cudaEventCreate(&s));
  GPUSCOUT_CUDA_CHECK(cudaEventCreate(&e));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(s));
    fn();
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(e));
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(e));
    float t = 0;
    GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&t, s, e));
    if (i >= 2) ms.push_back(t);
  }
  cudaEventDestroy(s);
  cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double copy_bandwidth_gbs() {
  const std::size_t bytes = 4ull << 30;
  void *a = nullptr, *b = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaMalloc(&a, bytes));
  GPUSCOUT_CUDA_CHECK(cudaMalloc(&b, bytes));
  GPUSCOUT_CUDA_CHECK(cudaMemset(a, 1, bytes));
  const double ms = median_ms([&] { GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (ms * 1e-3) / 1e9;  // read + write
}

double gemm_tflops(int n) {
  void* ws = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaMalloc(&ws, 32ull << 20));
  ci::bf16 *x = nullptr, *w = nullptr, *y = nullptr;
  const std::size_t count = static_cast<std::size_t>(n) * n;
  GPUSCOUT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&x), count * 2));
  GPUSCOUT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&w), count * 2));
  GPUSCOUT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&y), count * 2));
  ci::launch_init_weights(x, 3, gi::WeightKind::embedding, 0, n, 0, n, 0, n, nullptr);
  ci::launch_init_weights(w, 4, gi::WeightKind::wq, 0, n, 0, n, 0, n, nullptr);
  double best = 0;
  {
    ci::GemmRunner g(ws, 32ull << 20);
    const int cls = g.add_class("square", n, n, {w});
    g.tune(cls, n, x, y, nullptr);
    const double ms = median_ms([&] { g.run(cls, n, x, w, y, false, nullptr); });
    best = 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12;
  }
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  cudaFree(ws);
  return best;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct BenchFlags {
  int tp = 1;
  bool pdl = true, fp8 = false, tune_attention = true, resolve_gemm_ties = true;
  bool graphs = true;  // --no-graphs: every step eager, as steps with prompt chunks always are
  unsigned knock_out = 0;
  ci::DecodeAttentionPlan attention_plan;  // --attention-plan split|streaming:BLOCKS|pairs:STAGES
};

int bench(const std::string& model, const BenchFlags& flags) {
  const int tp = flags.tp;
  const auto catalog = gpuscout::workloads::ModelCatalog::load(gpuscout::data::DataSource::embedded());
  const gi::TransformerConfig cfg = gi::TransformerConfig::from_model(catalog.get(model));
  cudaDeviceProp prop{};
  GPUSCOUT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy_gbs = copy_bandwidth_gbs();
  const double gemm = gemm_tflops(8192);
  // A dozen calls of ~1.5 ms on the engine's small initial values: a burst rate. On one H200 it said
  // 794-807 TFLOP/s (session 25) where the serve benchmark's gemm record on the same machine (seconds
  // of calls on random inputs, under sw_power_cap at 1408 MHz) said 680.5. The prefill lines'
  // percentages below are of this burst rate, lower than the serve records' of the steady one.
  fmt::print("device {} | D2D copy {:.0f} GB/s (read+write) | cuBLASLt BF16 8192^3 {:.0f} TFLOP/s (burst)\n", prop.name,
             copy_gbs, gemm);

  ci::EngineOptions eo;
  eo.gpus.clear();
  for (int i = 0; i < tp; ++i) eo.gpus.push_back(i);
  eo.max_step_tokens = 8192;
  eo.max_running = 64;
  eo.programmatic_launch = flags.pdl;
  eo.cuda_graphs = flags.graphs;
  eo.knock_out = flags.knock_out;
  eo.fp8_weights = flags.fp8;
  eo.tune_attention = flags.tune_attention;
  eo.resolve_gemm_ties = flags.resolve_gemm_ties;
  eo.attention_plan_override = flags.attention_plan;
  if (flags.knock_out != 0) {
    fmt::print("knock-out mask {} (timing attribution; tokens meaningless)\n", flags.knock_out);
  }
  const auto t0 = Clock::now();
  auto engine = ci::CudaEngine::create(cfg, eo);
  const double startup = seconds_since(t0);
  const auto& info = engine->info();
  fmt::print(
      "{} TP{}: start-up {:.2f} s | {} weights {:.2f} GB/GPU | KV cache {:.1f} GB/GPU ({} blocks of {}) | "
      "workspace {:.2f} GB | graphs {} | programmatic launch {} | prefill attention {} | last layer {} | gate/up {} "
      "(from {} rows)\n",
      cfg.name, tp, startup, info.weight_format, info.weight_bytes_per_gpu / 1e9, info.kv_cache_bytes_per_gpu / 1e9,
      info.kv_blocks, info.kv_block_size, info.workspace_bytes_per_gpu / 1e9, info.graph_buckets.size(),
      info.programmatic_launch ? "on" : "off", info.prefill_attention,
      info.last_layer_pruned ? "pruned to the sampling rows" : "every row", info.mlp_gate_up, info.swiglu_min_rows);
  for (const auto& line : info.gemm_choices) fmt::print("  gemm {}\n", line);
  for (const auto& line : info.attention_choices) fmt::print("  attention {}\n", line);

  const double kv_per_token = static_cast<double>(cfg.kv_bytes_per_token(2)) / tp;
  std::uint64_t next_id = 1;
  for (int batch : {1, 8, 32}) {
    const int prompt = 512, steps = 64;
    const auto owned = decode_batch(*engine, batch, prompt, steps, next_id);
    gi::Scheduler& scheduler = *owned;
    std::vector<double> times, kv_bytes, host_times;
    gi::StepPlan last_decode;
    while (!scheduler.idle()) {
      const auto t0 = Clock::now();
      const auto plan = scheduler.plan();
      const double planned = seconds_since(t0);
      const auto t = Clock::now();
      const auto tokens = engine->execute(plan);
      const double dt = seconds_since(t);
      bool decode_only = static_cast<int>(plan.chunks.size()) == batch;
      double kv = 0;
      for (const auto& c : plan.chunks) {
        decode_only = decode_only && c.is_decode();
        kv += (c.start_position + 1) * kv_per_token;
      }
      const auto t1 = Clock::now();
      scheduler.complete(plan, tokens);
      if (decode_only) {
        times.push_back(dt);
        kv_bytes.push_back(kv);
        host_times.push_back(planned + seconds_since(t1));
        last_decode = plan;
      }
    }
    const double step = median(times);
    // Weights but the embedding table (a step gathers `batch` rows of it), as the serve record counts
    // them (serve_metrics.hpp); until session 8 this line counted the whole table, 1.05 GB of
    // Llama-3.1-8B's 16.1, and its % of the roofline read ~7% higher than the serve record's.
    const auto format = flags.fp8 ? gi::WeightFormat::fp8_e4m3 : gi::WeightFormat::bf16;
    const double weights =
        static_cast<double>(gpuscout::bench::decode_step_bytes(cfg, batch, 0, tp, format).weight_bytes) / tp;
    const double bytes = weights + median(kv_bytes);
    const double roofline = bytes / (copy_gbs * 1e9);
    fmt::print(
        "decode batch {:3d} ctx {}..{}: step {:.3f} ms (median of {}) | {:.0f} tokens/s | bytes/step {:.2f} GB "
        "-> {:.0f} GB/s | roofline {:.3f} ms = {:.0f}% of it\n",
        batch, prompt, prompt + steps, step * 1e3, times.size(), batch / step, bytes / 1e9, bytes / step / 1e9,
        roofline * 1e3, 100.0 * roofline / step);
    if (tp == 1 && flags.graphs && !last_decode.chunks.empty()) {
      // The same step's graph replayed back to back: what execute() adds outside the GPU's work.
      const int replays = 64;
      const double gpu_ms = engine->time_graph_replays(last_decode, replays);
      const double copies_ms = engine->time_graph_replays(last_decode, replays, true);
      fmt::print(
          "  graph replays back to back: {:.3f} ms per step (median step's {:.1f} us more: metadata copy, launch, "
          "token copy, wake-up) | with the two copies per replay {:.3f} ms | scheduler plan + complete {:.1f} us per "
          "step\n",
          gpu_ms, step * 1e6 - gpu_ms * 1e3, copies_ms, median(host_times) * 1e6);
    }
    double submit_us = 0, wait_us = 0;
    const double piped = pipelined_decode_ms(*engine, batch, prompt, steps, next_id, submit_us, wait_us);
    fmt::print(
        "  pipelined steps (plan n + 1 submitted before step n is collected): {:.3f} ms per step | {:.0f} "
        "tokens/s | roofline {:.0f}% of it | host: submit() {:.1f} us, wait in collect() {:.1f} us\n",
        piped, batch / piped * 1e3, 100.0 * roofline / (piped * 1e-3), submit_us, wait_us);
  }

  // Prefill steps of `seqs` prompts of `len` tokens each (twice, the second timed): one 8192-token
  // sequence, and 16 x 512, the first step of the serve benchmark's static batch.
  auto prefill = [&](int seqs, int len) {
    const int T = seqs * len;
    for (int rep = 0; rep < 2; ++rep) {
      gi::SchedulerConfig sc;
      sc.block_size = engine->kv_block_size();
      sc.num_blocks = engine->kv_blocks();
      sc.max_step_tokens = T;
      sc.max_running = engine->max_running();
      sc.max_sequence_tokens = len + 1;
      gi::Scheduler scheduler(sc);
      for (int q = 0; q < seqs; ++q) {
        gi::SequenceRequest r;
        r.id = next_id++;
        for (int p = 0; p < len; ++p) r.prompt.push_back(gi::prompt_token(1, r.id, p, cfg.vocab));
        r.max_new_tokens = 1;
        scheduler.add(std::move(r));
      }
      const auto plan = scheduler.plan();
      const auto t = Clock::now();
      const auto tokens = engine->execute(plan);
      const double dt = seconds_since(t);
      scheduler.complete(plan, tokens);
      if (rep == 0) continue;
      // The FLOPs the engine executes (the serve benchmark's count): each sequence samples its last
      // token, so a pruned last layer finishes that token only.
      const double flops = seqs * gpuscout::bench::prefill_flops(cfg, len, engine->info().last_layer_pruned);
      const double tflops = flops / dt / 1e12 / tp;
      fmt::print(
          "prefill {} x {} tokens: {:.1f} ms | {:.0f} TFLOP/s per GPU ({:.1f} TFLOP executed{}) = {:.0f}% of the "
          "BF16 GEMM's burst rate\n",
          seqs, len, dt * 1e3, tflops, flops / 1e12, engine->info().last_layer_pruned ? ", last layer pruned" : "",
          100.0 * tflops / gemm);
    }
  };
  prefill(1, 8192);
  prefill(16, 512);

  // Mixed steps, where Server and closed-loop traffic spends its time: 32 sequences decoding at
  // 512..560 tokens of context plus one new prompt of `chunk` tokens in the same step (eager: no graph
  // holds a prompt chunk), against the decode-only steps between them (graph replays) and the prompt
  // alone in its own step.
  auto mixed = [&](int batch, int chunk) {
    const auto owned = decode_batch(*engine, batch, 512, 48, next_id);
    gi::Scheduler& scheduler = *owned;
    std::vector<double> mixed_ms, decode_ms;
    int step = 0, added = 0;
    auto add_prompt = [&](gi::Scheduler& s) {
      gi::SequenceRequest r;
      r.id = next_id++;
      for (int p = 0; p < chunk; ++p) r.prompt.push_back(gi::prompt_token(1, r.id, p, cfg.vocab));
      r.max_new_tokens = 1;  // done in its prefill step: the decode batch stays at `batch`
      s.add(std::move(r));
    };
    while (!scheduler.idle()) {
      // Every fourth step from the fourth on, a new prompt: decode-only steps between them.
      if (step >= 4 && step % 4 == 0 && added < 10) {
        add_prompt(scheduler);
        ++added;
      }
      const auto plan = scheduler.plan();
      const auto t = Clock::now();
      const auto tokens = engine->execute(plan);
      const double dt = seconds_since(t);
      if (plan.decode_tokens == batch && plan.prefill_tokens == chunk) mixed_ms.push_back(dt * 1e3);
      if (plan.decode_tokens == batch && plan.prefill_tokens == 0) decode_ms.push_back(dt * 1e3);
      scheduler.complete(plan, tokens);
      ++step;
    }
    std::vector<double> alone_ms;
    for (int rep = 0; rep < 3; ++rep) {
      gi::SchedulerConfig sc;
      sc.block_size = engine->kv_block_size();
      sc.num_blocks = engine->kv_blocks();
      sc.max_step_tokens = engine->max_step_tokens();
      sc.max_running = engine->max_running();
      sc.max_sequence_tokens = chunk + 1;
      gi::Scheduler alone(sc);
      add_prompt(alone);
      const auto plan = alone.plan();
      const auto t = Clock::now();
      const auto tokens = engine->execute(plan);
      if (rep > 0) alone_ms.push_back(seconds_since(t) * 1e3);
      alone.complete(plan, tokens);
    }
    if (mixed_ms.empty() || decode_ms.empty()) {
      fmt::print("mixed step batch {} + prompt {}: not planned as expected ({} mixed, {} decode-only steps)\n", batch,
                 chunk, mixed_ms.size(), decode_ms.size());
      return;
    }
    const double m = median(mixed_ms), d = median(decode_ms), a = median(alone_ms);
    fmt::print(
        "mixed step: decode batch {} + a {}-token prompt: {:.3f} ms (median of {}) | decode-only {:.3f} ms (median of "
        "{}) | the prompt alone {:.3f} ms | mixed - decode-only = {:.3f} ms, {:.0f}% of the prompt alone\n",
        batch, chunk, m, mixed_ms.size(), d, decode_ms.size(), a, m - d, 100.0 * (m - d) / a);
  };
  for (int chunk : {64, 256, 512, 1024, 2048}) mixed(32, chunk);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  try {
    std::string model;
    BenchFlags flags;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--bench" && i + 1 < argc) model = argv[++i];
      if (a == "--tp" && i + 1 < argc) flags.tp = std::stoi(argv[++i]);
      if (a == "--no-pdl") flags.pdl = false;
      if (a == "--no-graphs") flags.graphs = false;
      if (a == "--fp8") flags.fp8 = true;
      if (a == "--no-attention-tuning") flags.tune_attention = false;
      if (a == "--no-gemm-ties") flags.resolve_gemm_ties = false;
      if (a == "--attention-plan" && i + 1 < argc) {
        const std::string plan = argv[++i];
        if (plan == "split") {
          flags.attention_plan.kernel = ci::DecodeAttentionPlan::Kernel::split;
        } else if (plan.rfind("streaming:", 0) == 0 && std::stoi(plan.substr(10)) > 0) {
          flags.attention_plan.kernel = ci::DecodeAttentionPlan::Kernel::streaming;
          flags.attention_plan.grid_blocks = std::stoi(plan.substr(10));
        } else if (plan == "pairs:2" || plan == "pairs:3") {
          flags.attention_plan.kernel = ci::DecodeAttentionPlan::Kernel::pairs;
          flags.attention_plan.stages = plan.back() - '0';
        } else {
          fmt::print(stderr,
                     "--attention-plan: expected split, streaming:BLOCKS (BLOCKS > 0), pairs:2 or pairs:3, got '{}'\n",
                     plan);
          return 2;
        }
      }
      if (a == "--knock-out" && i + 1 < argc) {
        const std::string list = std::string(",") + argv[++i] + ",";
        const std::pair<const char*, unsigned> names[] = {{",norms,", ci::knock_out_norms},
                                                          {",rope,", ci::knock_out_rope},
                                                          {",attention,", ci::knock_out_attention},
                                                          {",silu,", ci::knock_out_silu}};
        for (const auto& [name, bit] : names) {
          if (list.find(name) != std::string::npos) flags.knock_out |= bit;
        }
      }
    }
    if (!model.empty()) return bench(model, flags);

    const gi::TransformerConfig tiny = gi::TransformerConfig::tiny();
    cudaDeviceProp prop{};
    GPUSCOUT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const bool fp8_capable = prop.major * 10 + prop.minor >= 89;
    if (!fp8_capable) std::puts("FP8: skipped (compute capability below 8.9)");
    // Chunked prefill (prompts longer than the 64-token budget), mixed steps, decode buckets 1..8
    // as sequences finish; then a cache too small for all of them (preemption and recompute).
    Scenario mixed{"mixed", {5, 37, 100, 1, 64, 150}, {12, 20, 8, 16, 5, 10}, 64, 64, 8};
    Scenario tight{"preempt", {60, 70, 80, 90}, {40, 40, 40, 40}, 20, 48, 4};
    // One sequence: every decode step is a batch-1 step, its context crossing KV blocks and the
    // split attention's split sizes as it grows.
    Scenario single{"single", {300}, {60}, 64, 64, 8};
    // Head size 128 with chunks of up to 256 queries: the prefill attention kernel of Hopper's
    // warpgroup MMA where it runs (chunks over 64 queries), checked inside the engine.
    Scenario long_chunks{"long-chunks", {150, 300, 70, 5}, {8, 6, 10, 12}, 64, 256, 8};
    // Steps of 512+ rows (row counts no multiple of 128): the gate/up GEMM with SwiGLU in its epilogue
    // where the GPU has it (compute capability 9.0; from 512 rows, which this small model's rule would
    // put far above its step budget), and without it (EngineOptions::fused_swiglu off).
    Scenario big_steps{"swiglu-steps", {700, 333, 1000, 5}, {8, 6, 10, 12}, 192, 1024, 8};
    big_steps.swiglu_min_rows = 512;
    Scenario big_steps_unfused = big_steps;
    big_steps_unfused.name = "unfused-steps";
    big_steps_unfused.fused_swiglu = false;
    gi::TransformerConfig wide = tiny;
    wide.name = "tiny-head128";
    wide.hidden = 512;
    wide.head_dim = 128;
    wide.ffn_hidden = 512;
    int failures = 0;
    std::vector<std::vector<int>> gpu_sets{{0}};
    if (devices >= 2) gpu_sets.push_back({0, 1});
    for (const auto& gpus : gpu_sets) {
      for (bool graphs : {true, false}) {
        failures += run_scenario(tiny, gpus, graphs, mixed);
        failures += run_scenario(tiny, gpus, graphs, single);
      }
      failures += run_scenario(tiny, gpus, true, tight);
      for (bool graphs : {true, false}) failures += run_scenario(wide, gpus, graphs, long_chunks);
      failures += run_scenario(wide, gpus, true, big_steps);
      failures += run_scenario(wide, gpus, true, big_steps_unfused);
      for (bool graphs : {true, false}) {
        failures += pipeline_check(tiny, gpus, graphs, mixed);
        failures += pipeline_check(tiny, gpus, graphs, tight);
      }
      // GEMMs of up to 8 rows on our kernels: at one row the ring GEMV with the RMSNorm (qkv,
      // gate_up) and SiLU * up (down) folded in, which the timed choices may not pick.
      for (bool graphs : {true, false}) {
        for (const Scenario* sc : {&mixed, &single}) failures += run_scenario(tiny, gpus, graphs, *sc, false, {}, true);
      }
      // Each decode attention kernel forced into the graphs once: both read the newest token's K/V,
      // which the RoPE kernel just before them stores, after their wait and the older rows before it.
      for (const auto kernel : {ci::DecodeAttentionPlan::Kernel::split, ci::DecodeAttentionPlan::Kernel::streaming}) {
        for (const Scenario* sc : {&mixed, &single})
          failures += run_scenario(tiny, gpus, true, *sc, false, {kernel, 0});
      }
      // The pair kernel runs head sizes 64 and 128: on the head-128 model, both ring depths.
      for (const int stages : {3, 2}) {
        if (ci::decode_attention_pairs_supported(wide.head_dim, stages)) {
          failures += run_scenario(wide, gpus, true, mixed, false, {ci::DecodeAttentionPlan::Kernel::pairs, 0, stages});
        }
      }
      if (fp8_capable) failures += run_scenario(tiny, gpus, true, mixed, true);
      // FP8 weights on our kernels up to 8 rows (the skinny kernel on decoded codes), whatever timing picks.
      if (fp8_capable) {
        for (bool graphs : {true, false}) failures += run_scenario(tiny, gpus, graphs, single, true, {}, true);
      }
      // Qwen2.5's QKV biases (added in the RoPE + KV-store kernel), at TP2 sharded with the heads.
      gi::TransformerConfig biased = tiny;
      biased.qkv_bias = true;
      failures += run_scenario(biased, gpus, true, mixed);
      if (fp8_capable) failures += run_scenario(biased, gpus, true, mixed, true);
    }
    if (devices >= 2) failures += fault_checks(tiny);
    if (devices < 2) std::puts("TP2: skipped (one GPU visible)");
    failures += bad_input_checks(tiny);
    std::puts(failures == 0 ? "infer_engine_test: PASS" : "infer_engine_test: FAIL");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print("infer_engine_test: error: {}\n", e.what());
    return 1;
  }
}
