// Per-operator speed model. Formulas: docs/modeling.md "Speed model" (after
// ../shared/reference/modeling.md §4.3-4.7).
#include "gpuscout/model/speed.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/names.hpp"

namespace gpuscout::model {
namespace {

using specs::Precision;

constexpr double kActivationBytes = 2;   // BF16 activations
constexpr double kKernelsPerLayer = 10;  // norms, QKV, RoPE, attention, O, residuals, gate/up, act, down

double peak_flops(const SpeedContext& ctx, Precision precision) {
  const auto peak = ctx.gpu->peak_tflops(precision);
  if (!peak) {
    throw UsageError(fmt::format("--precision: {} has no dense {} peak (the GPU lacks {} tensor cores)", ctx.gpu->name,
                                 specs::display_name(precision), specs::display_name(precision)));
  }
  return *peak * 1e12;
}

double bandwidth(const SpeedContext& ctx) {
  return ctx.gpu->memory_bandwidth_gbs.value * 1e9;
}

// The tensor-core precision of the linear layers for a weight format: W4A16 runs in FP16.
Precision gemm_precision(const Quantization& q) {
  return q.compute;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double stage_layers(const workloads::ModelArch& arch, std::int64_t pp) {
  return std::ceil(static_cast<double>(arch.layers) / static_cast<double>(pp));
}

// Layer operators for `tokens` tokens on one GPU (TP-sharded), `layers` times. The attention core runs
// per group of sequences of equal shape (AttentionGroup): causal, n new tokens after `context` cached
// ones attend to n·c + n(n+1)/2 positions each.
// The fused QKV projection of a non-MLA layer on one TP rank (KV heads replicated below one per rank).
OpTime qkv_gemm(const SpeedContext& ctx, const workloads::ModelArch& arch, const Parallelism& par, Precision prec,
                double weight_bytes, double tokens, double layers) {
  const double t = static_cast<double>(par.tp);
  const double kv = std::max(1.0, static_cast<double>(arch.kv_heads) / t);
  const double width = (static_cast<double>(arch.heads) / t + 2 * kv) * static_cast<double>(arch.head_dim);
  return gemm_time(ctx, prec, "qkv", tokens, width, static_cast<double>(arch.hidden), weight_bytes, layers);
}

// Whether the framework computes SwiGLU in the gate/up GEMM's epilogue for a step of `tokens` tokens with
// a per-GPU MLP width of `ffn` (FrameworkProfile::fused_swiglu_min_waves, or a run's min_tokens; the
// engine's kernel is BF16 on compute capability 9.0, in 128-token x 128-output tiles).
bool fused_swiglu(const SpeedContext& ctx, const workloads::ModelArch& arch, Precision prec, double tokens,
                  double ffn) {
  const auto& f = ctx.framework;
  if (!arch.gated_mlp || arch.activation != "silu" || prec != Precision::bf16 || ctx.gpu->compute_capability != "9.0" ||
      std::fmod(ffn, 128) != 0) {
    return false;
  }
  if (f.fused_swiglu_min_tokens > 0) return tokens >= f.fused_swiglu_min_tokens;
  if (f.fused_swiglu_min_waves <= 0 || !ctx.gpu->sm_count) return false;
  return std::ceil(tokens / 128) * (ffn / 128) >= f.fused_swiglu_min_waves * ctx.gpu->sm_count->value;
}

// Whether the framework folds the norms and SiLU * up into the GEMVs of this step
// (FrameworkProfile::folds_elementwise_at_one_row: one row, BF16, compute capability 9.0, a dense
// Llama-style layer, as the engine's ring GEMV runs them).
bool folds_one_row(const SpeedContext& ctx, const workloads::ModelArch& arch, Precision prec, double tokens) {
  return ctx.framework.folds_elementwise_at_one_row && tokens == 1 && prec == Precision::bf16 &&
         ctx.gpu->compute_capability == "9.0" && !arch.is_moe() && !arch.is_mla() && arch.gated_mlp &&
         arch.activation == "silu";
}

// The separate FP8 quantization kernels ahead of each dense GEMM in a step of `tokens` tokens
// (FrameworkProfile::fp8_quantize_kernels_per_gemm; 0 where none run).
double fp8_quantize_kernels(const SpeedContext& ctx, const workloads::ModelArch& arch, Precision prec, double tokens) {
  const auto& f = ctx.framework;
  if (prec != Precision::fp8 || arch.is_moe() || arch.is_mla() || tokens < f.fp8_quantize_min_tokens) return 0;
  return f.fp8_quantize_kernels_per_gemm;
}

void add_layer_ops(StepTime& step, const SpeedContext& ctx, const workloads::ModelArch& arch, const Parallelism& par,
                   Precision prec, double weight_bytes, double kv_bytes_per_element, double tokens,
                   const std::vector<AttentionGroup>& groups, double layers, double kernel_gap_us) {
  const double t = static_cast<double>(par.tp);
  const double h = static_cast<double>(arch.hidden);
  const double hd = static_cast<double>(arch.head_dim);
  const double heads = static_cast<double>(arch.heads) / t;
  if (arch.is_mla()) {
    const double params = static_cast<double>(workloads::attention_params_per_layer(arch)) / t;
    step.add(gemm_time(ctx, prec, "attention_projections", tokens, params / h, h, weight_bytes, layers));
  } else {
    step.add(qkv_gemm(ctx, arch, par, prec, weight_bytes, tokens, layers));
    step.add(gemm_time(ctx, prec, "o", tokens, h, heads * hd, weight_bytes, layers));
  }
  const double kv_per_token_layer =
      kv_bytes_per_token_per_gpu(arch, par, kv_bytes_per_element) / stage_layers(arch, par.pp);
  for (const auto& g : groups) {
    if (g.sequences <= 0) continue;
    const double n = g.new_tokens;
    const double attended = g.sequences * (n * g.context + n * (n + 1) / 2);
    const double attn_flops = 4 * heads * hd * attended;
    const double attn_bytes = g.sequences * (g.context + n) * kv_per_token_layer + 2 * g.sequences * n * heads * hd * 2;
    OpTime op{"attention", attn_flops * layers, attn_bytes * layers, 0, "memory"};
    const double eta =
        ctx.calibration.gemm_efficiency(Precision::bf16, std::max(n, 1.0)) * ctx.framework.flash_efficiency;
    const double tc =
        attn_flops / (peak_flops(ctx, ctx.gpu->peak_tflops(Precision::bf16) ? Precision::bf16 : Precision::fp16) * eta);
    const double tm = attn_bytes / (bandwidth(ctx) * ctx.calibration.memory_efficiency(attn_bytes));
    op.seconds = std::max(tc, tm) * layers;
    op.bound = tc > tm && n > 1 ? "compute" : "memory";
    step.add(op);
  }
  // MLP: dense layers and MoE layers.
  const double gates = arch.gated_mlp ? 2 : 1;
  const double moe_share =
      arch.is_moe() ? static_cast<double>(arch.moe_layers()) / static_cast<double>(arch.layers) : 0;
  if (moe_share < 1) {
    const double f = static_cast<double>(arch.ffn_hidden) / t;
    step.add(gemm_time(ctx, prec, "gate_up", tokens, gates * f, h, weight_bytes, layers * (1 - moe_share)));
    step.add(gemm_time(ctx, prec, "down", tokens, h, f, weight_bytes, layers * (1 - moe_share)));
    if (!fused_swiglu(ctx, arch, prec, tokens, f) && !folds_one_row(ctx, arch, prec, tokens)) {
      step.add(memory_time(ctx, "activation", 3 * tokens * f * kActivationBytes, layers * (1 - moe_share)));
    }
  }
  if (moe_share > 0) {
    const auto& moe = *arch.moe;
    const double e = static_cast<double>(moe.experts), k = static_cast<double>(moe.top_k);
    const double fe = static_cast<double>(moe.expert_ffn_hidden) / t;  // TP-split expert width (shared experts)
    // Routed experts. TP (ep = 1): every GPU holds 1/t of every expert and computes all T·k assignments at
    // width f_e/t. EP (ep > 1): every GPU holds E/ep whole experts (expert TP 1) and computes the k
    // assignments of its 1/t share of the tokens; the tokens travel there and back by all-to-all.
    const double ep = static_cast<double>(par.ep);
    const double width = ep > 1 ? static_cast<double>(moe.expert_ffn_hidden) : fe;
    const double local_experts = ep > 1 ? e / ep : e;
    const double assignments = ep > 1 ? tokens * k / t : tokens * k;
    const double group_tokens = ep > 1 ? tokens * ep / t : tokens;  // distinct tokens routed to these experts
    // Expected distinct experts touched (uniform routing), modeling.md 4.4.
    const double touched = local_experts * (1 - std::pow(1 - k / e, group_tokens));
    const double m_eff = assignments / std::max(touched, 1.0);
    OpTime op{"experts", 0, 0, 0, "memory"};
    const double flops = 2 * assignments * (gates + 1) * h * width;
    const double bytes = touched * (gates + 1) * h * width * weight_bytes + assignments * (2 * h + gates * width) * 2;
    const double tc = flops / (peak_flops(ctx, prec) * ctx.calibration.gemm_efficiency(prec, m_eff));
    const double tm = bytes / (bandwidth(ctx) * ctx.calibration.weight_stream_efficiency(prec, bytes, m_eff));
    op.flops = flops * layers * moe_share;
    op.bytes = bytes * layers * moe_share;
    op.seconds = std::max(tc, tm) * layers * moe_share;
    op.bound = tc > tm ? "compute" : "memory";
    step.add(op);
    if (ep > 1) {
      // Dispatch and combine: each GPU sends the hidden states of its k·T/t assignments (16-bit).
      const auto coll = alltoall_model(*ctx.gpu, ctx.calibration, par.ep);
      const double send = tokens / t * k * h * kActivationBytes;
      OpTime a2a{"ep_alltoall", 0, 2 * send * layers * moe_share, 0, "communication"};
      a2a.seconds = 2 * alltoall_seconds(coll, send, par.ep) * layers * moe_share;
      step.add(a2a);
    }
    if (moe.shared_experts > 0) {
      const double fs = static_cast<double>(moe.shared_experts) * fe;
      step.add(gemm_time(ctx, prec, "shared_experts", tokens, (gates + 1) * fs, h, weight_bytes, layers * moe_share));
    }
    step.add(gemm_time(ctx, Precision::bf16, "router", tokens, e, h, 2, layers * moe_share));
  }
  // FP8 activation quantization: an amax pass and a quantize pass over the inputs of qkv, o, gate/up
  // and down (2 + 2 + 1 bytes per element).
  const double quantize_kernels = fp8_quantize_kernels(ctx, arch, prec, tokens);
  if (quantize_kernels > 0) {
    const double inputs = h + heads * hd + h + static_cast<double>(arch.ffn_hidden) / t;
    step.add(memory_time(ctx, "fp8_quantize", 5 * tokens * inputs, layers));
  }
  // Norms, residual adds, RoPE: ~10 reads/writes of the hidden state per layer.
  step.add(memory_time(ctx, "norms_elementwise", 10 * tokens * h * kActivationBytes, layers));
  // Tensor parallelism: two all-reduces of the hidden state per layer (Megatron).
  if (par.tp > 1) {
    const auto coll = collective_model(*ctx.gpu, ctx.calibration, par.tp);
    const double bytes = tokens * h * kActivationBytes;
    OpTime op{"tp_allreduce", 0, bytes * 2 * layers, 0, "communication"};
    op.seconds = allreduce_seconds(coll, bytes, par.tp) * 2 * layers * (1 - ctx.framework.tp_overlap);
    step.add(op);
  }
  OpTime gaps{"kernel_gaps", 0, 0, 0, "overhead"};
  const double ffn = static_cast<double>(arch.ffn_hidden) / t;
  const bool fused = !arch.is_moe() && fused_swiglu(ctx, arch, prec, tokens, ffn);
  const double kernels = kKernelsPerLayer - (fused ? 1 : 0) - (folds_one_row(ctx, arch, prec, tokens) ? 3 : 0) +
                         (par.tp > 1 ? 2 : 0) + 4 * quantize_kernels;
  gaps.seconds = kernels * layers * kernel_gap_us * 1e-6;
  step.add(gaps);
}

}  // namespace

void StepTime::add(OpTime op) {
  seconds += op.seconds;
  for (auto& existing : ops) {
    if (existing.key == op.key) {
      existing.flops += op.flops;
      existing.bytes += op.bytes;
      existing.seconds += op.seconds;
      return;
    }
  }
  ops.push_back(std::move(op));
}

std::vector<FrameworkProfile> load_frameworks(const data::DataSource& source) {
  const auto file = source.read("frameworks.toml");
  if (!file) throw DataError(source.describe(), "frameworks.toml", "", "the file is missing");
  const auto root = data::parse_toml(*file);
  data::TomlEntry top(root, file->origin, "frameworks");
  std::vector<FrameworkProfile> out;
  for (auto& e : top.array_of_tables("framework")) {
    e.reject_unknown_keys({"key", "name", "step_overhead_ms", "kernel_gap_us", "cuda_graphs", "memory_fraction",
                           "tp_overlap", "dp_overlap", "prunes_last_layer", "flash_efficiency", "eager_kernel_gap_us",
                           "fused_swiglu_min_waves", "folds_elementwise_at_one_row", "fp8_quantize_kernels_per_gemm",
                           "fp8_quantize_min_tokens", "source"});
    FrameworkProfile f;
    f.key = e.required_string("key");
    e.set_entry(f.key);
    f.name = e.required_string("name");
    f.step_overhead_ms = e.required_number("step_overhead_ms", 0);
    f.kernel_gap_us = e.required_number("kernel_gap_us", 0);
    f.cuda_graphs = e.required_bool("cuda_graphs");
    f.eager_kernel_gap_us =
        e.has("eager_kernel_gap_us") ? e.required_number("eager_kernel_gap_us", 0) : f.kernel_gap_us;
    f.memory_fraction = e.required_number("memory_fraction", 0.01, 1);
    f.tp_overlap = e.required_number("tp_overlap", 0, 1);
    f.dp_overlap = e.required_number("dp_overlap", 0, 1);
    f.prunes_last_layer = e.optional_bool("prunes_last_layer").value_or(false);
    if (e.has("flash_efficiency")) f.flash_efficiency = e.required_number("flash_efficiency", 0.01, 1);
    if (e.has("fused_swiglu_min_waves")) f.fused_swiglu_min_waves = e.required_number("fused_swiglu_min_waves", 0);
    f.folds_elementwise_at_one_row = e.optional_bool("folds_elementwise_at_one_row").value_or(false);
    if (e.has("fp8_quantize_kernels_per_gemm")) {
      f.fp8_quantize_kernels_per_gemm = e.required_number("fp8_quantize_kernels_per_gemm", 0, 8);
    }
    if (e.has("fp8_quantize_min_tokens")) f.fp8_quantize_min_tokens = e.required_number("fp8_quantize_min_tokens", 1);
    f.source = e.required_string("source");
    out.push_back(std::move(f));
  }
  return out;
}

const FrameworkProfile& find_framework(const std::vector<FrameworkProfile>& all, const std::string& name,
                                       const std::string& flag) {
  const auto want = lower(name);
  for (const auto& f : all) {
    if (lower(f.key) == want || lower(f.name) == want) return f;
  }
  std::string keys;
  for (const auto& f : all) keys += (keys.empty() ? "" : ", ") + f.key;
  throw UsageError(fmt::format("{}: unknown framework '{}'; known: {}", flag, name, keys));
}

OpTime gemm_time(const SpeedContext& ctx, Precision precision, const std::string& key, double m, double n, double k,
                 double weight_bytes_per_element, double count) {
  OpTime op{key, 2 * m * n * k, (m * k + m * n) * kActivationBytes + n * k * weight_bytes_per_element, 0, ""};
  const double tc = op.flops / (peak_flops(ctx, precision) * ctx.calibration.gemm_efficiency(precision, m));
  const double tm = op.bytes / (bandwidth(ctx) * ctx.calibration.weight_stream_efficiency(precision, op.bytes, m));
  op.seconds = std::max(tc, tm) * count;
  op.bound = tc >= tm ? "compute" : "memory";
  op.flops *= count;
  op.bytes *= count;
  return op;
}

OpTime memory_time(const SpeedContext& ctx, const std::string& key, double bytes, double count) {
  OpTime op{key, 0, bytes * count, 0, "memory"};
  op.seconds = bytes / (bandwidth(ctx) * ctx.calibration.memory_efficiency(bytes)) * count;
  return op;
}

StepTime engine_step(const SpeedContext& ctx, const InferenceSetup& setup, const std::vector<AttentionGroup>& groups,
                     double sampled_sequences) {
  StepTime step;
  const auto prec = gemm_precision(setup.weights);
  const double wb = setup.weights.bytes_per_weight();
  double tokens = 0;
  bool prefill = false;
  for (const auto& g : groups) {
    tokens += g.sequences * g.new_tokens;
    prefill = prefill || (g.sequences > 0 && g.new_tokens > 1);
  }
  // Graphs cover decode-only steps; a step with prompt tokens is launched kernel by kernel.
  const double gap_us =
      ctx.framework.cuda_graphs && prefill ? ctx.framework.eager_kernel_gap_us : ctx.framework.kernel_gap_us;
  // A request passes every pipeline stage in turn: latency sees all layers.
  const double layers = static_cast<double>(setup.arch.layers);
  const bool prune = ctx.framework.prunes_last_layer && prefill && layers >= 2 &&
                     setup.arch.kind == workloads::ModelKind::decoder && !setup.arch.is_mla() &&
                     sampled_sequences < tokens;
  if (!prune) {
    add_layer_ops(step, ctx, setup.arch, setup.par, prec, wb, setup.kv_bytes_per_element, tokens, groups, layers,
                  gap_us);
  } else {
    // The last layer: QKV (the K/V the next steps read) for every token; attention (one query over
    // the whole context), o and the MLP for the sampled rows only.
    add_layer_ops(step, ctx, setup.arch, setup.par, prec, wb, setup.kv_bytes_per_element, tokens, groups, layers - 1,
                  gap_us);
    if (sampled_sequences > 0) {
      std::vector<AttentionGroup> sampled;
      for (const auto& g : groups) sampled.push_back({g.sequences, 1, g.context + g.new_tokens - 1});
      add_layer_ops(step, ctx, setup.arch, setup.par, prec, wb, setup.kv_bytes_per_element, sampled_sequences, sampled,
                    1, gap_us);
    }
    step.add(qkv_gemm(ctx, setup.arch, setup.par, prec, wb, tokens - sampled_sequences, 1));
  }
  // LM head (kept 16-bit) for the last token of each sampled sequence.
  if (setup.arch.kind == workloads::ModelKind::decoder) {
    step.add(gemm_time(ctx, ctx.gpu->peak_tflops(Precision::bf16) ? Precision::bf16 : Precision::fp16, "lm_head",
                       sampled_sequences, static_cast<double>(setup.arch.vocab) / static_cast<double>(setup.par.tp),
                       static_cast<double>(setup.arch.hidden), 2));
  }
  if (setup.par.pp > 1) {
    const auto coll = collective_model(*ctx.gpu, ctx.calibration, setup.par.tp * setup.par.pp);
    OpTime op{"pp_p2p", 0, 0, 0, "communication"};
    const double bytes = tokens * static_cast<double>(setup.arch.hidden) * kActivationBytes;
    op.bytes = bytes * static_cast<double>(setup.par.pp - 1);
    op.seconds = (coll.alpha_us * 1e-6 + bytes / (coll.busbw_gbs * 1e9)) * static_cast<double>(setup.par.pp - 1);
    step.add(op);
  }
  OpTime overhead{"framework_step", 0, 0, ctx.framework.step_overhead_ms * 1e-3, "overhead"};
  step.add(overhead);
  return step;
}

StepTime forward_step(const SpeedContext& ctx, const InferenceSetup& setup, double sequences, double new_tokens,
                      double context) {
  return engine_step(ctx, setup, {{sequences, new_tokens, context}}, sequences);
}

StaticBatch static_batch(const SpeedContext& ctx, const InferenceSetup& setup, double batch, double isl, double osl) {
  StaticBatch r;
  r.batch = batch;
  r.prefill = forward_step(ctx, setup, batch, isl, 0);
  r.ttft_s = r.prefill.seconds;
  // Decode cost is linear in the context, so the step at the mean context is the mean step.
  r.decode_mid = forward_step(ctx, setup, batch, 1, isl + osl / 2);
  r.tpot_s = r.decode_mid.seconds;
  r.total_s = r.ttft_s + std::max(osl - 1, 0.0) * r.tpot_s;
  r.output_tokens_per_s = batch * osl / r.total_s;
  r.total_tokens_per_s = batch * (isl + osl) / r.total_s;
  return r;
}

ServingPoint continuous_batching(const SpeedContext& ctx, const InferenceSetup& setup, double batch, double isl,
                                 double osl) {
  ServingPoint p;
  p.batch = batch;
  const auto decode = forward_step(ctx, setup, batch, 1, isl + osl / 2);
  const auto prefill_one = forward_step(ctx, setup, 1, isl, 0);
  // Each step admits batch/osl requests; their prefill rides along (without a second framework overhead).
  const double prefill_share =
      (prefill_one.seconds - ctx.framework.step_overhead_ms * 1e-3) * batch / std::max(osl, 1.0);
  p.prefill_s = prefill_share;
  p.step_s = decode.seconds + prefill_share;
  p.tpot_s = p.step_s;
  p.ttft_s = prefill_one.seconds + p.step_s;
  p.output_tokens_per_s = batch / p.step_s;
  return p;
}

ServingPoint best_batch_under_bounds(const SpeedContext& ctx, const InferenceSetup& setup, double isl, double osl,
                                     std::int64_t max_batch, double ttft_bound_s, double tpot_bound_s) {
  auto ok = [&](const ServingPoint& p) {
    return (ttft_bound_s <= 0 || p.ttft_s <= ttft_bound_s) && (tpot_bound_s <= 0 || p.tpot_s <= tpot_bound_s);
  };
  if (max_batch < 1) return ServingPoint{};
  auto first = continuous_batching(ctx, setup, 1, isl, osl);
  if (!ok(first)) {
    first.batch = 0;
    first.output_tokens_per_s = 0;
    return first;
  }
  // Step time grows with the batch: binary search for the largest batch within the bounds.
  std::int64_t lo = 1, hi = max_batch;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (ok(continuous_batching(ctx, setup, static_cast<double>(mid), isl, osl))) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return continuous_batching(ctx, setup, static_cast<double>(lo), isl, osl);
}

double training_flops_per_token(const workloads::ModelArch& arch, std::int64_t seq) {
  // Causal attention: a token attends on average to (s + 1)/2 positions.
  return 3 * workloads::forward_flops_per_token(arch, (seq + 1) / 2);
}

TrainingStep training_step(const SpeedContext& ctx, const TrainingSetup& setup) {
  const auto& c = setup.config;
  const auto& par = setup.par;
  const auto& arch = setup.arch;
  TrainingStep r;
  const double per_pipeline = static_cast<double>(setup.global_batch) / static_cast<double>(par.dp);
  r.micro_batches = per_pipeline / static_cast<double>(c.micro_batch);
  if (setup.global_batch % (par.dp * c.micro_batch) != 0 || r.micro_batches < 1) {
    throw UsageError(fmt::format("--global-batch: {} sequences do not split into DP {} x micro-batch {}",
                                 setup.global_batch, par.dp, c.micro_batch));
  }
  const auto prec = specs::parse_precision(c.precision).value_or(Precision::bf16);
  const double layers = stage_layers(arch, par.pp);
  const double b = static_cast<double>(c.micro_batch), s = static_cast<double>(c.seq);
  const double tokens = b * s;
  // One micro-batch through one stage (the last: it carries the LM head and the loss).
  StepTime fwd;
  // Training keeps kernel_gap_us: the training profiles launch kernel by kernel (cuda_graphs = false).
  add_layer_ops(fwd, ctx, arch, par, prec, 2, 2, b * s, {{b, s, 0}}, layers, ctx.framework.kernel_gap_us);
  const double v_t = static_cast<double>(arch.vocab) / static_cast<double>(par.tp);
  fwd.add(gemm_time(ctx, prec, "lm_head", tokens, v_t, static_cast<double>(arch.hidden), 2));
  fwd.add(memory_time(ctx, "loss", 3 * tokens * v_t * 4));
  double comm = 0, gaps = 0, attention = 0, ep_comm = 0;
  for (const auto& op : fwd.ops) {
    if (op.key == "tp_allreduce") comm += op.seconds;
    if (op.key == "ep_alltoall") ep_comm += op.seconds;
    if (op.key == "kernel_gaps") gaps += op.seconds;
    if (op.key == "attention") attention += op.seconds;
  }
  const double compute = fwd.seconds - comm - ep_comm - gaps;
  r.forward = fwd;
  r.forward_s = fwd.seconds;
  // Backward: twice the forward's compute (input and weight gradients), the same TP traffic again.
  switch (c.recompute) {
    case Recompute::none:
      r.recompute_s = 0;
      break;
    case Recompute::selective:
      r.recompute_s = attention;
      break;
    case Recompute::full:
      r.recompute_s = compute + comm + ep_comm;
      break;
  }
  // Backward: the gradients travel back by the same all-to-alls (dispatch and combine).
  r.backward_s = 2 * compute + comm + ep_comm + 2 * gaps + r.recompute_s;
  r.tp_comm_s = 2 * comm;
  r.ep_comm_s = 2 * ep_comm;
  const double per_micro = r.forward_s + r.backward_s;
  const double m = r.micro_batches;
  const double p = static_cast<double>(par.pp);
  const double v = c.schedule == PipelineSchedule::interleaved ? static_cast<double>(c.virtual_stages) : 1;
  r.bubble_fraction = (p - 1) / (v * m);
  r.bubble_s = r.bubble_fraction * m * per_micro;
  if (par.pp > 1) {
    const auto coll = collective_model(*ctx.gpu, ctx.calibration, par.tp * par.pp);
    const double bytes = tokens * static_cast<double>(arch.hidden) * kActivationBytes /
                         static_cast<double>(c.sequence_parallel ? par.tp : 1);
    // Forward activation and backward gradient per micro-batch per boundary; x v when interleaved.
    r.pp_comm_s = 2 * m * v * (coll.alpha_us * 1e-6 + bytes / (coll.busbw_gbs * 1e9));
  }
  // Data parallelism: gradients of this GPU's shard (Megatron reduces FP32 main grads).
  const Parallelism stage_par = par;
  const auto stage = stage_params(arch, stage_par, par.pp == 1, true);
  const double params = stage.total();
  if (par.dp > 1) {
    const auto coll = collective_model(*ctx.gpu, ctx.calibration, par.gpus());
    const double grad_bytes = params * (c.distributed_optimizer || ctx.framework.key == "megatron" ? 4 : 2);
    r.dp_comm_s = allreduce_seconds(coll, grad_bytes, par.dp) * (c.zero_stage == 3 ? 1.5 : 1);
    r.dp_exposed_s = std::max(0.0, r.dp_comm_s - ctx.framework.dp_overlap * m * r.backward_s);
  }
  // Adam: read weights, grads, master, m, v; write master, m, v, weights (~32 B/param), sharded by ZeRO.
  const double opt_params = params / (c.zero_stage >= 1 || c.distributed_optimizer ? static_cast<double>(par.dp) : 1);
  r.optimizer_s = opt_params * 32 / (bandwidth(ctx) * ctx.calibration.memory_efficiency(opt_params * 32));
  r.overhead_s = ctx.framework.step_overhead_ms * 1e-3;
  r.step_s = m * per_micro + r.bubble_s + r.pp_comm_s + r.dp_exposed_s + r.optimizer_s + r.overhead_s;
  const double step_tokens = static_cast<double>(setup.global_batch) * s;
  r.tokens_per_s = step_tokens / r.step_s;
  r.model_flops_per_step = training_flops_per_token(arch, c.seq) * step_tokens;
  const double fwd_flops = r.model_flops_per_step / 3;
  r.hardware_flops_per_step = r.model_flops_per_step + (c.recompute == Recompute::full ? fwd_flops : 0);
  r.peak_tflops = peak_flops(ctx, prec) / 1e12;
  r.peak_label = fmt::format("dense {} peak of {}: {:.0f} TFLOP/s per GPU", specs::display_name(prec), ctx.gpu->name,
                             r.peak_tflops);
  const double gpus = static_cast<double>(par.gpus());
  r.mfu = r.model_flops_per_step / (gpus * r.peak_tflops * 1e12 * r.step_s);
  r.hfu = r.hardware_flops_per_step / (gpus * r.peak_tflops * 1e12 * r.step_s);
  return r;
}

}  // namespace gpuscout::model
