// One training step of N decoder layers of a catalog model (key "train-step", opt-in: --only
// train-step): forward + backward, BF16 with FP32 accumulation (backends/cuda/train), or with the
// linear layers' GEMMs in FP8 (--train-precision fp8: "-fp8" after "tiny" and the model, gemm/fp8).
// Records:
//   train-step/verify/tiny                          the tiny configuration's loss and gradients vs the
//                                                   FP64 CPU reference (tolerances: train_check.hpp)
//   train-step/gemm/bf16/m8192_n8192_k8192          the BF16 (FP8: gemm/fp8, E4M3) GEMM rate of this
//                                                   run (same cuBLASLt path)
//   train-step/<model>/l<N>/b<B>_s<S>               step time (forward, backward), tokens/s, model
//                                                   TFLOP/s, MFU against the spec sheet's dense BF16
//                                                   peak (FP8: `mfu` vs the dense FP8 peak and
//                                                   `mfu_vs_bf16_peak`), % of the GEMM rate above, memory
// docs/train-step.md defines every figure.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "gpuscout/bench/summary.hpp"
#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/benchmarks.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/train/train_cost.hpp"
#include "kernels.hpp"
#include "train_check.hpp"
#include "train_gemm.hpp"
#include "train_step.hpp"

namespace gpuscout::cuda {
namespace {

namespace core = gpuscout::train;
namespace ct = gpuscout::cuda::train;
using results::Outcome;
using results::Record;
using Clock = std::chrono::steady_clock;

constexpr int kGemmSize = 8192;
constexpr int kWarmupSteps = 2;
constexpr std::size_t kMemoryReserve = std::size_t{512} << 20;  // CUDA context growth, cuBLASLt handles

double gib(double bytes) {
  return bytes / double(1 << 30);
}

class TrainStepBenchmark final : public Benchmark {
 public:
  std::string key() const override { return "train-step"; }
  std::string description() const override {
    return fmt::format(
        "one training step (forward + backward) of --train-layers decoder layers of --model (default {} layers of "
        "{}) at --micro-batch x --seq tokens, BF16 or (--train-precision fp8) FP8 linear GEMMs: step time, "
        "tokens/s, MFU vs the dense peak and the run's GEMM rate; gradients of a tiny configuration checked against "
        "the CPU reference",
        bench::kDefaultTrainLayers, bench::kDefaultTrainModel);
  }
  std::optional<std::string> not_supported_reason(const DeviceContext& device) const override {
    if (device.cc_major < 8) {
      return fmt::format("needs compute capability 8.0+ for BF16 (this GPU is {}.{})", device.cc_major,
                         device.cc_minor);
    }
    return std::nullopt;
  }
  bool opt_in() const override { return true; }
  std::vector<Record> run(const BenchEnv& env) override;
};

constexpr const char* kFp8Formats =
    "QKV, O, gate/up and down GEMMs (forward, dgrad, wgrad) in FP8: activations and weights E4M3, output gradients "
    "E5M2, one scale per tensor from its current amax, FP32 accumulation, BF16 outputs; attention, norms and "
    "softmax BF16";

ct::TrainPrecision precision(const BenchEnv& env) {
  return env.options.train.fp8 ? ct::TrainPrecision::fp8 : ct::TrainPrecision::bf16;
}

// "" for BF16 (the keys as before FP8 existed), "-fp8" for FP8.
const char* key_suffix(const BenchEnv& env) {
  return env.options.train.fp8 ? "-fp8" : "";
}

Record make_record(const BenchEnv& env, std::string key, nlohmann::ordered_json params) {
  Record r;
  r.key = std::move(key);
  r.benchmark = "train-step";
  r.gpus = {env.device.index};
  r.params = std::move(params);
  r.params["dtype"] = env.options.train.fp8 ? "fp8" : "bf16";
  if (env.options.train.fp8) r.params["fp8_gemms"] = kFp8Formats;
  return r;
}

void skip(const BenchEnv& env, std::vector<Record>& out, Record r, Outcome outcome, std::string reason) {
  r.outcome = outcome;
  r.reason = std::move(reason);
  env.report(fmt::format("{}: {} ({})", r.key, results::to_string(r.outcome), r.reason));
  out.push_back(std::move(r));
}

// The tiny configuration through the GPU step and the CPU reference.
void verify_case(const BenchEnv& env, std::vector<Record>& out) {
  const std::string key = fmt::format("train-step/verify/tiny{}", key_suffix(env));
  if (!wanted(env.options, key)) return;
  const core::TrainShape s = ct::tiny_check_shape();
  Record r = make_record(env, key,
                         {{"layers", s.layers},
                          {"hidden", s.model.hidden},
                          {"heads", s.model.heads},
                          {"kv_heads", s.model.kv_heads},
                          {"head_dim", s.model.head_dim},
                          {"ffn_hidden", s.model.ffn_hidden},
                          {"micro_batch", s.micro_batch},
                          {"seq", s.seq},
                          {"reference", "FP64 CPU forward + backward (train_reference.cpp)"}});
  const ct::TrainAttention attention = ct::default_train_attention();
  r.params["attention"] = core::to_string(attention);
  const ct::TrainCheck check = ct::check_train_step(s, precision(env), attention);
  nlohmann::ordered_json errors = nlohmann::ordered_json::object();
  for (const auto& c : check.checks) errors[c.what] = {{"relative_error", c.error}, {"tolerance", c.tolerance}};
  r.extra["checks"] = errors;
  r.extra["allocation_matches_model"] = check.allocation_matches;
  const ct::TensorCheck& worst = check.worst();
  results::Metric m;
  m.name = "worst_error_ratio";
  m.value = worst.error / worst.tolerance;
  m.unit = "x tolerance";
  m.statistic = "max";
  m.note = fmt::format("largest relative error over its tolerance ({}: {:.2e} <= {:.0e}); every check in extra",
                       worst.what, worst.error, worst.tolerance);
  r.metrics.push_back(m);
  if (!check.passed()) {
    r.outcome = Outcome::incorrect;
    r.reason = check.allocation_matches
                   ? fmt::format("{}: relative error {:.3g} > {:.0e}", worst.what, worst.error, worst.tolerance)
                   : "allocated bytes differ from train_step_memory()";
  }
  env.report(fmt::format("{}: {} (worst {} {:.2e}, tolerance {:.0e})", key, check.passed() ? "passed" : "INCORRECT",
                         worst.what, worst.error, worst.tolerance));
  out.push_back(std::move(r));
}

// An 8192^3 product through the train step's own GEMM path, BF16 or (FP8 mode) E4M3 x E4M3 with
// per-tensor scales: the rate its MFU is also compared to.
std::optional<double> gemm_case(const BenchEnv& env, std::vector<Record>& out) {
  const bool fp8 = env.options.train.fp8;
  const std::string key = fmt::format("train-step/gemm/{1}/m{0}_n{0}_k{0}", kGemmSize, fp8 ? "fp8" : "bf16");
  if (!wanted(env.options, key)) return std::nullopt;
  const double flops = 2.0 * kGemmSize * kGemmSize * kGemmSize;
  Record r = make_record(env, key, {{"m", kGemmSize}, {"n", kGemmSize}, {"k", kGemmSize}, {"flops", flops}});
  const std::int64_t elements = std::int64_t{kGemmSize} * kGemmSize;
  DeviceBuffer<std::uint8_t> workspace(core::kTrainGemmWorkspaceBytes);
  DeviceBuffer<ct::bf16> a(elements), b(elements), c(elements);
  infer::launch_init_weights(a.get(), 7, gpuscout::infer::WeightKind::wq, 0, kGemmSize, 0, kGemmSize, 0, kGemmSize,
                             nullptr);
  infer::launch_init_weights(b.get(), 7, gpuscout::infer::WeightKind::wk, 0, kGemmSize, 0, kGemmSize, 0, kGemmSize,
                             nullptr);
  // FP8: E4M3 codes of a and b (infer's dynamic quantization), each scale in its own 256-byte slot.
  DeviceBuffer<std::uint8_t> a8(fp8 ? elements : 1), b8(fp8 ? elements : 1), slots(2 * 256);
  GPUSCOUT_CUDA_CHECK(cudaMemset(slots.get(), 0, slots.bytes()));
  auto scratch = [&](int i) {
    std::uint8_t* slot = slots.get() + 256 * i;
    return infer::Fp8Scratch{reinterpret_cast<unsigned*>(slot + 4), reinterpret_cast<unsigned*>(slot + 8),
                             reinterpret_cast<float*>(slot)};
  };
  if (fp8) {
    infer::launch_quantize_fp8(a.get(), elements, scratch(0), a8.get(), nullptr);
    infer::launch_quantize_fp8(b.get(), elements, scratch(1), b8.get(), nullptr);
  }
  GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
  ct::Gemm gemm(workspace.get(), workspace.size());
  ct::GemmArgs g;  // y = x W^T, the forward layout of every projection
  g.m = g.n = g.k = kGemmSize;
  g.a = a.get();
  g.lda = kGemmSize;
  g.trans_b = true;
  g.b = b.get();
  g.ldb = kGemmSize;
  g.c = c.get();
  g.ldc = kGemmSize;
  if (fp8) {
    g.a = a8.get();
    g.b = b8.get();
    g.a_type = g.b_type = ct::Operand::e4m3;
    g.a_scale = scratch(0).scale;
    g.b_scale = scratch(1).scale;
  }
  Stream stream;
  TelemetryScope telemetry(env.telemetry);
  const TimedRun timed = time_launches(
      stream.get(), [&](cudaStream_t s) { gemm.run(g, s); }, TimingPlan{}, env.options.timing, env.interrupted);
  r.telemetry = telemetry.finish();
  if (timed.seconds.empty()) {
    skip(env, out, std::move(r), Outcome::skipped, "interrupted");
    return std::nullopt;
  }
  const auto times = bench::summarize(timed.seconds);
  r.metrics.push_back(bench::rate_metric("throughput", "TFLOP/s", flops / 1e12, times,
                                         "2 m n k / time; cuBLASLt's first heuristic choice, as the train step uses"));
  r.metrics.push_back(bench::time_metric("time", "ms", 1e3, times, "time per GEMM"));
  bench::set_peak_reference(r, "throughput", fp8 ? "dense_tflops/fp8" : "dense_tflops/bf16");
  const double tflops = flops / times.median / 1e12;
  env.report(fmt::format("{}: {:.0f} TFLOP/s", key, tflops));
  out.push_back(std::move(r));
  return tflops;
}

// The largest layer count of `s` whose step fits `free_bytes`, 0 when not even one does.
// Device bytes of the step: train_step_memory plus, in FP8 mode, the codes and scales.
std::int64_t step_bytes(const core::TrainShape& s, bool fp8, ct::TrainAttention attention) {
  return core::train_step_memory(s, attention).total() + (fp8 ? ct::fp8_buffer_bytes(s) : 0);
}

int layers_that_fit(core::TrainShape s, bool fp8, ct::TrainAttention attention, std::size_t free_bytes) {
  for (; s.layers > 0; --s.layers) {
    if (static_cast<std::size_t>(step_bytes(s, fp8, attention)) + kMemoryReserve <= free_bytes) return s.layers;
  }
  return 0;
}

void step_case(const BenchEnv& env, std::vector<Record>& out, int micro_batch, int seq, std::optional<double> gemm) {
  const bench::TrainStepOptions& o = env.options.train;
  const std::string key =
      fmt::format("train-step/{}{}/l{}/b{}_s{}", o.model_slug, key_suffix(env), o.layers, micro_batch, seq);
  if (!wanted(env.options, key)) return;
  core::TrainShape s;
  s.model = o.model;
  s.layers = o.layers;
  s.micro_batch = micro_batch;
  s.seq = seq;
  const ct::TrainAttention attention = ct::default_train_attention();
  const core::TrainStepFlops flops = core::train_step_flops(s, attention);
  const bool flash = attention == ct::TrainAttention::flash;
  const core::TrainStepMemory mem = core::train_step_memory(s, attention);
  Record r = make_record(
      env, key,
      {{"model", o.model.name},
       {"layers", s.layers},
       {"micro_batch", micro_batch},
       {"seq", seq},
       {"tokens_per_step", s.tokens()},
       {"flops_per_step", flops.step()},
       {"flops_formula",
        "3 x forward; forward = 2 x tokens x matrix params (QKV, O, gate/up, down) x layers + causal attention "
        "4 x heads x head_dim x S(S+1)/2 per sequence and layer (QK^T and PV, lower triangle only)"},
       {"executed_flops_per_step", flops.step_executed()},
       {"attention", core::to_string(attention)},
       {"attention_detail",
        flash ? "flash attention (train_attention.cu): fused causal forward keeping each row's FP32 log-sum-exp, "
                "backward recomputing P per 64 x 64 tile (dK/dV kernel per key tile, dQ kernel per query tile, no "
                "atomics); executed_flops_per_step counts the tiles these kernels multiply, the backward's recomputed "
                "S and dP included"
              : "materialized scores: strided-batched cuBLASLt GEMMs over the full S x S square (twice the causal "
                "FLOPs), FP32 scores, BF16 softmax probabilities kept for backward"},
       {"memory_bytes",
        {{"weights", mem.weights},
         {"gradients", mem.gradients},
         {"activations", mem.activations},
         {"softmax_probabilities", mem.probabilities},
         {"softmax_lse", mem.softmax_lse},
         {"scratch", mem.scratch},
         {"input_and_loss_projection", mem.io},
         {"total", mem.total()}}}});
  const std::int64_t needed = step_bytes(s, o.fp8, attention);
  if (o.fp8) {
    r.params["memory_bytes"]["fp8_codes_and_scales"] = ct::fp8_buffer_bytes(s);
    r.params["memory_bytes"]["total"] = needed;
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  GPUSCOUT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (static_cast<std::size_t>(needed) + kMemoryReserve > free_bytes) {
    const int fit = layers_that_fit(s, o.fp8, attention, free_bytes);
    return skip(env, out, std::move(r), Outcome::skipped,
                fmt::format("does not fit: needs {:.1f} GiB ({:.1f} GiB of activations, of which {:.1f} GiB softmax "
                            "probabilities; {:.1f} GiB weights and gradients; {:.1f} GiB scratch) + {:.1f} GiB "
                            "reserve, {:.1f} GiB free of {:.1f} GiB; {}",
                            gib(needed), gib(mem.activations), gib(mem.probabilities), gib(mem.weights + mem.gradients),
                            gib(mem.scratch), gib(kMemoryReserve), gib(free_bytes), gib(total_bytes),
                            fit > 0 ? fmt::format("--train-layers {} fits", fit)
                                    : "not even one layer fits: lower --micro-batch or --seq"));
  }
  std::unique_ptr<ct::TrainStep> step;
  try {
    step = std::make_unique<ct::TrainStep>(s, precision(env), attention);
  } catch (const CudaError& e) {
    (void)cudaGetLastError();
    return skip(env, out, std::move(r), e.out_of_memory() ? Outcome::skipped : Outcome::failed, e.what());
  }
  std::size_t free_after = 0;
  GPUSCOUT_CUDA_CHECK(cudaMemGetInfo(&free_after, &total_bytes));
  r.params["device_memory_used_bytes"] = static_cast<std::int64_t>(free_bytes - free_after);

  Stream stream;
  cudaEvent_t ev[3];
  for (auto& e : ev) GPUSCOUT_CUDA_CHECK(cudaEventCreate(&e));
  auto run_step = [&](std::vector<double>* step_s, std::vector<double>* fwd_s, std::vector<double>* bwd_s) {
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(ev[0], stream.get()));
    step->forward(stream.get());
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(ev[1], stream.get()));
    step->backward(stream.get());
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(ev[2], stream.get()));
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(ev[2]));
    if (step_s == nullptr) return;
    float fwd_ms = 0, bwd_ms = 0;
    GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&fwd_ms, ev[0], ev[1]));
    GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&bwd_ms, ev[1], ev[2]));
    fwd_s->push_back(fwd_ms * 1e-3);
    bwd_s->push_back(bwd_ms * 1e-3);
    step_s->push_back((fwd_ms + bwd_ms) * 1e-3);
  };
  std::vector<double> step_s, fwd_s, bwd_s;
  TelemetryScope telemetry(env.telemetry);
  try {
    for (int i = 0; i < kWarmupSteps && !env.stop_requested(); ++i) run_step(nullptr, nullptr, nullptr);
    const auto t0 = Clock::now();
    while (!env.stop_requested() &&
           !bench::should_stop(env.options.timing, step_s, std::chrono::duration<double>(Clock::now() - t0).count())) {
      run_step(&step_s, &fwd_s, &bwd_s);
    }
  } catch (...) {
    for (auto& e : ev) (void)cudaEventDestroy(e);
    throw;
  }
  for (auto& e : ev) (void)cudaEventDestroy(e);
  r.telemetry = telemetry.finish();
  if (step_s.empty()) return skip(env, out, std::move(r), Outcome::skipped, "interrupted");
  const float loss = step->loss();
  r.params["loss"] = loss;
  if (!std::isfinite(loss)) {
    return skip(env, out, std::move(r), Outcome::incorrect, fmt::format("the loss is {} (not finite)", loss));
  }

  const auto times = bench::summarize(step_s);
  const double model_tflops = flops.step() / times.median / 1e12;
  r.metrics.push_back(bench::time_metric("step_time", "ms", 1e3, times,
                                         "forward + backward of the layers (CUDA events), after warm-up steps"));
  r.metrics.push_back(
      bench::time_metric("forward_time", "ms", 1e3, bench::summarize(fwd_s), "forward pass and loss, CUDA events"));
  r.metrics.push_back(bench::time_metric("backward_time", "ms", 1e3, bench::summarize(bwd_s),
                                         "backward pass: every weight gradient and the input gradient"));
  r.metrics.push_back(
      bench::rate_metric("throughput", "tokens/s", static_cast<double>(s.tokens()), times, "tokens per step / time"));
  r.metrics.push_back(bench::rate_metric("model_flops_rate", "TFLOP/s", flops.step() / 1e12, times,
                                         "model FLOPs per step (params: flops_formula) / step time"));
  r.metrics.push_back(bench::rate_metric(
      "executed_flops_rate", "TFLOP/s", flops.step_executed() / 1e12, times,
      "FLOPs the GEMMs and attention kernels performed (params: executed_flops_per_step) / step time"));
  std::string mfu_text;
  const specs::GpuSpec* spec = env.device.spec;
  // "mfu" against the dense peak of the GEMMs' precision; FP8 records add the BF16-peak figure.
  auto add_mfu = [&](const char* name, specs::Precision precision, const char* what) {
    if (spec == nullptr || !spec->peak(precision)) return;
    const specs::Figure& peak = *spec->peak(precision);
    results::Metric mfu;
    mfu.name = name;
    mfu.value = 100.0 * model_tflops / peak.value;
    mfu.unit = "%";
    mfu.statistic = "median";
    mfu.samples = static_cast<std::int64_t>(times.count);
    mfu.note = fmt::format("model TFLOP/s (median) / dense {} peak {:g} TFLOP/s of {} in the spec DB ({})", what,
                           peak.value, spec->name, peak.source);
    r.metrics.push_back(mfu);
    r.params[fmt::format("peak_dense_{}_tflops", specs::to_string(precision))] = peak.value;
    mfu_text += fmt::format(", MFU {:.1f}% of {} {:g}", mfu.value, what, peak.value);
  };
  if (o.fp8) {
    add_mfu("mfu", specs::Precision::fp8, "FP8");
    add_mfu("mfu_vs_bf16_peak", specs::Precision::bf16, "BF16");
  } else {
    add_mfu("mfu", specs::Precision::bf16, "BF16");
  }
  if (gemm) {
    results::Metric pct;
    pct.name = "pct_of_gemm";
    pct.value = 100.0 * model_tflops / *gemm;
    pct.unit = "%";
    pct.statistic = "median";
    pct.samples = static_cast<std::int64_t>(times.count);
    pct.note = fmt::format(
        "model TFLOP/s (median) / the {0}^3 {2} GEMM rate of this run ({1:.0f} TFLOP/s, "
        "train-step/gemm/{3}/m{0}_n{0}_k{0})",
        kGemmSize, *gemm, o.fp8 ? "FP8 (E4M3)" : "BF16", o.fp8 ? "fp8" : "bf16");
    r.metrics.push_back(pct);
    r.params["gemm_reference_tflops"] = *gemm;
  }
  env.report(fmt::format("{}: {:.1f} ms/step (forward {:.1f}, backward {:.1f}), {:.0f} tokens/s, {:.0f} TFLOP/s{}", key,
                         times.median * 1e3, bench::summarize(fwd_s).median * 1e3, bench::summarize(bwd_s).median * 1e3,
                         s.tokens() / times.median, model_tflops, mfu_text));
  out.push_back(std::move(r));
}

std::vector<Record> TrainStepBenchmark::run(const BenchEnv& env) {
  GPUSCOUT_CUDA_CHECK(cudaSetDevice(env.device.index));
  std::vector<Record> out;
  // Each case catches its own failure so the others still run.
  auto guarded = [&](const std::string& key, const std::function<void()>& body) {
    if (env.stop_requested()) return;
    try {
      body();
    } catch (const CudaError& e) {
      (void)cudaGetLastError();
      skip(env, out, make_record(env, key, {}), e.out_of_memory() ? Outcome::skipped : Outcome::failed, e.what());
    } catch (const std::exception& e) {  // cuBLASLt without an algorithm, a shape the step refuses
      skip(env, out, make_record(env, key, {}), Outcome::failed, e.what());
    }
  };
  const bench::TrainStepOptions& o = env.options.train;
  if (o.fp8 && env.device.cc_major * 10 + env.device.cc_minor < 89) {
    const std::string reason = fmt::format("--train-precision fp8 needs compute capability 8.9+ (this GPU is {}.{})",
                                           env.device.cc_major, env.device.cc_minor);
    skip(env, out, make_record(env, "train-step/verify/tiny-fp8", {}), Outcome::not_supported, reason);
    for (int b : o.micro_batches) {
      for (int s : o.seqs) {
        skip(env, out, make_record(env, fmt::format("train-step/{}-fp8/l{}/b{}_s{}", o.model_slug, o.layers, b, s), {}),
             Outcome::not_supported, reason);
      }
    }
    return out;
  }
  guarded(fmt::format("train-step/verify/tiny{}", key_suffix(env)), [&] { verify_case(env, out); });
  std::optional<double> gemm;
  guarded(fmt::format("train-step/gemm/{}", o.fp8 ? "fp8" : "bf16"), [&] { gemm = gemm_case(env, out); });
  for (int b : o.micro_batches) {
    for (int s : o.seqs) {
      guarded(fmt::format("train-step/{}{}/l{}/b{}_s{}", o.model_slug, key_suffix(env), o.layers, b, s),
              [&] { step_case(env, out, b, s, gemm); });
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Benchmark> make_train_step_benchmark() {
  return std::make_unique<TrainStepBenchmark>();
}

}  // namespace gpuscout::cuda
