#include "gpuscout/model/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gpuscout/util/error.hpp"

namespace gpuscout::model {

using workloads::ModelArch;

namespace {

double ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<double>((a + b - 1) / b);
}

std::string gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / kGiB);
}

// Expert sharding: with EP > 1 each GPU holds whole experts (vLLM, DeepSeek: expert TP = 1); with EP = 1
// each expert's matrices are split over TP like a dense MLP.
double expert_shards(const Parallelism& par) {
  return par.ep > 1 ? static_cast<double>(par.ep) : static_cast<double>(par.tp);
}

// KV heads one GPU holds: split over TP, at least one (replicated once TP exceeds the KV heads).
double kv_heads_per_gpu(const ModelArch& arch, std::int64_t tp) {
  return ceil_div(arch.kv_heads, tp);
}

void add(MemoryBreakdown& b, std::string key, std::string label, double bytes, std::string formula) {
  b.terms.push_back({std::move(key), std::move(label), bytes, std::move(formula)});
  b.total_bytes += bytes;
}

// Linear-layer parameters of one layer on one GPU (attention + MLP), and the routed-expert part.
struct LayerLinear {
  double attention = 0;
  double mlp = 0;
  double routed = 0;  // part of mlp
};

LayerLinear layer_linear(const ModelArch& arch, const Parallelism& par, bool moe_layer) {
  LayerLinear l;
  const double t = static_cast<double>(par.tp);
  const double attn = static_cast<double>(workloads::attention_params_per_layer(arch));
  if (arch.mla) {
    l.attention = attn / t;
  } else {
    const double kv = 2.0 * static_cast<double>(arch.hidden * arch.kv_heads * arch.head_dim) +
                      (arch.bias.qkv ? 2.0 * static_cast<double>(arch.kv_heads * arch.head_dim) : 0.0);
    l.attention = (attn - kv) / t + kv * kv_heads_per_gpu(arch, par.tp) / static_cast<double>(arch.kv_heads);
  }
  if (moe_layer && arch.moe) {
    const auto& moe = *arch.moe;
    const double expert = static_cast<double>(workloads::mlp_params(arch, moe.expert_ffn_hidden));
    l.routed = static_cast<double>(moe.experts) * expert / expert_shards(par);
    const double router = static_cast<double>(moe.experts * arch.hidden + (moe.router_bias ? moe.experts : 0));
    l.mlp = l.routed + static_cast<double>(moe.shared_experts) * expert / t + router;
  } else {
    l.mlp = static_cast<double>(workloads::mlp_params(arch, arch.ffn_hidden)) / t;
  }
  return l;
}

// Layers on the worst stage, and how many of them are MoE layers (worst case: as many as possible).
std::pair<double, double> stage_layers(const ModelArch& arch, const Parallelism& par) {
  const double layers = ceil_div(arch.layers, par.pp);
  const double moe = std::min(layers, static_cast<double>(arch.moe_layers()));
  return {layers, moe};
}

}  // namespace

// ---- quantization -------------------------------------------------------------------------------

double Quantization::bytes_per_weight() const {
  const double scale = group_size > 0 ? scale_bits_per_group / static_cast<double>(group_size) : 0.0;
  return (bits_per_weight + scale) / 8.0;
}

Quantization parse_quantization(const std::string& text, const std::string& flag) {
  using specs::Precision;
  if (text == "bf16") return {"bf16", 16, 0, 0, Precision::bf16};
  if (text == "fp16") return {"fp16", 16, 0, 0, Precision::fp16};
  if (text == "fp32") return {"fp32", 32, 0, 0, Precision::fp32};
  if (text == "fp8") return {"fp8", 8, 0, 0, Precision::fp8};
  if (text == "int8") return {"int8", 8, 0, 0, Precision::int8};
  // GPTQ/AWQ: 4-bit weights in groups of 128 sharing an FP16 scale and a packed 4-bit zero point:
  // (16 + 4) / 128 = 0.156 extra bits per weight. GEMMs dequantize to FP16.
  if (text == "int4") return {"int4", 4, 128, 20, Precision::fp16};
  throw UsageError(
      fmt::format("{}: '{}' is not a precision; expected bf16, fp16, fp32, fp8, int8 or int4", flag, text));
}

Recompute parse_recompute(const std::string& text, const std::string& flag) {
  if (text == "none") return Recompute::none;
  if (text == "selective") return Recompute::selective;
  if (text == "full") return Recompute::full;
  throw UsageError(fmt::format("{}: '{}' is not a recompute mode; expected none, selective or full", flag, text));
}

std::string to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

// ---- layout ---------------------------------------------------------------------------------------

void check_parallelism(const ModelArch& arch, const Parallelism& par) {
  auto positive = [](std::int64_t value, const char* flag) {
    if (value < 1) throw UsageError(fmt::format("{}: must be at least 1, got {}", flag, value));
  };
  positive(par.tp, "--tp");
  positive(par.pp, "--pp");
  positive(par.dp, "--dp");
  positive(par.ep, "--ep");
  if (arch.heads % par.tp != 0) {
    throw UsageError(
        fmt::format("--tp {}: tensor parallelism splits whole attention heads, and {} heads do not "
                    "divide by {}",
                    par.tp, arch.heads, par.tp));
  }
  if (!arch.mla && arch.kv_heads > 0 && arch.kv_heads % par.tp != 0 && par.tp % arch.kv_heads != 0) {
    throw UsageError(
        fmt::format("--tp {}: {} KV heads neither divide by {} nor divide it", par.tp, arch.kv_heads, par.tp));
  }
  if (par.pp > arch.layers) {
    throw UsageError(fmt::format("--pp {}: more pipeline stages than the model's {} layers", par.pp, arch.layers));
  }
  if (par.ep > 1) {
    if (!arch.moe) throw UsageError(fmt::format("--ep {}: the model has no experts", par.ep));
    if (arch.moe->experts % par.ep != 0) {
      throw UsageError(fmt::format("--ep {}: {} experts do not divide by {}", par.ep, arch.moe->experts, par.ep));
    }
    if ((par.tp * par.dp) % par.ep != 0) {
      throw UsageError(
          fmt::format("--ep {}: expert parallelism spreads experts over the TP x DP = {} GPUs of a "
                      "stage, and {} does not divide {}",
                      par.ep, par.tp * par.dp, par.ep, par.tp * par.dp));
    }
  }
}

StageParams stage_params(const ModelArch& arch, const Parallelism& par, bool first, bool last) {
  StageParams s;
  const auto [layers, moe_layers] = stage_layers(arch, par);
  s.layers = layers;
  const LayerLinear dense = layer_linear(arch, par, false);
  const LayerLinear moe = layer_linear(arch, par, true);
  s.linear = (layers - moe_layers) * (dense.attention + dense.mlp) + moe_layers * (moe.attention + moe.mlp);
  s.routed_experts = moe_layers * moe.routed;
  const double t = static_cast<double>(par.tp);
  const double h = static_cast<double>(arch.hidden);
  s.other = layers * static_cast<double>(workloads::norm_params_per_layer(arch));
  if (first) {
    // Vocab-parallel embedding (Megatron/vLLM split the vocabulary over TP); position tables replicated.
    s.other += static_cast<double>(arch.vocab) * h / t + static_cast<double>(arch.token_types) * h;
    if (arch.position == workloads::PositionType::learned) s.other += static_cast<double>(arch.max_positions) * h;
  }
  if (last && arch.kind == workloads::ModelKind::decoder) {
    s.other += arch.norm == workloads::NormType::layernorm ? 2 * h : h;  // final norm
    // An untied head, or a tied one on another stage than the embedding (Megatron keeps a copy).
    if (!arch.tied_embeddings || !first) s.other += static_cast<double>(arch.vocab) * h / t;
  }
  if (arch.pooler && last) s.other += h * h + h;
  return s;
}

double kv_bytes_per_token_per_gpu(const ModelArch& arch, const Parallelism& par, double bytes_per_element) {
  if (arch.kind == workloads::ModelKind::encoder) return 0;
  const double layers = ceil_div(arch.layers, par.pp);
  if (arch.mla) {
    return layers * static_cast<double>(arch.mla->kv_lora_rank + arch.mla->qk_rope_head_dim) * bytes_per_element;
  }
  return layers * 2.0 * kv_heads_per_gpu(arch, par.tp) * static_cast<double>(arch.head_dim) * bytes_per_element;
}

double gpu_capacity_bytes(const specs::GpuSpec& gpu) {
  const bool hbm = gpu.memory_type.rfind("HBM", 0) == 0;
  return gpu.memory_gb.value * (hbm ? kGiB : 1e9);
}

const MemoryTerm* MemoryBreakdown::find(const std::string& key) const {
  for (const auto& term : terms) {
    if (term.key == key) return &term;
  }
  return nullptr;
}

double MemoryBreakdown::bytes_of(const std::string& key) const {
  const MemoryTerm* term = find(key);
  return term ? term->bytes : 0.0;
}

// ---- inference -----------------------------------------------------------------------------------

namespace {

void add_runtime(MemoryBreakdown& b, const Parallelism& par, const RuntimeReserve& runtime) {
  add(b, "cuda_context", "CUDA context and workspaces", runtime.cuda_context_bytes,
      fmt::format("assumption: {} per GPU (CUDA context, cuBLAS/attention workspaces; 0.5-1 GiB)",
                  gib(runtime.cuda_context_bytes)));
  if (par.gpus() > 1) {
    add(b, "nccl_buffers", "NCCL buffers", runtime.nccl_bytes,
        fmt::format("assumption: {} per GPU when GPUs communicate (AIC: 0.35-0.4 GB)", gib(runtime.nccl_bytes)));
  }
}

}  // namespace

InferenceMemory inference_memory(const ModelArch& arch, const Parallelism& par, const InferenceConfig& c,
                                 double capacity_bytes) {
  check_parallelism(arch, par);
  InferenceMemory r;
  MemoryBreakdown& b = r.breakdown;
  b.capacity_bytes = capacity_bytes;
  b.usable_bytes = capacity_bytes * c.runtime.memory_fraction;

  // Weights: the worst stage (first: embedding; last: LM head).
  const StageParams first = stage_params(arch, par, true, par.pp == 1);
  const StageParams last = stage_params(arch, par, par.pp == 1, true);
  const StageParams& s = first.total() >= last.total() ? first : last;
  b.stage = par.pp == 1 ? "single stage" : (&s == &first ? "first stage (embedding)" : "last stage (LM head)");
  const double qbytes = c.weights.bytes_per_weight();
  const double other_bytes = c.weights.name == "fp32" ? 4.0 : 2.0;
  std::string quant = fmt::format("{} B/weight", qbytes);
  if (c.weights.group_size > 0) {
    quant = fmt::format("({} bits + {} scale bits / group of {}) / 8 = {:.4f} B/weight", c.weights.bits_per_weight,
                        c.weights.scale_bits_per_group, c.weights.group_size, qbytes);
  }
  add(b, "weights_linear", fmt::format("weights: attention + MLP ({})", c.weights.name), s.linear * qbytes,
      fmt::format("{:.4g} params on this GPU ({} layers of the stage; heads and MLP split over TP {}{}) x {}", s.linear,
                  s.layers, par.tp, arch.moe ? fmt::format(", routed experts over {} GPUs", expert_shards(par)) : "",
                  quant));
  add(b, "weights_other", "weights: embeddings, LM head, norms", s.other * other_bytes,
      fmt::format("{:.4g} params x {} B (kept 16-bit in quantized checkpoints; vocabulary split over TP)", s.other,
                  other_bytes));

  // KV cache: every sequence rounded up to whole paged blocks, capped by a sliding window.
  r.kv_bytes_per_token = kv_bytes_per_token_per_gpu(arch, par, c.kv_bytes_per_element);
  std::int64_t per_seq = c.context;
  if (arch.sliding_window) per_seq = std::min(per_seq, *arch.sliding_window);
  const std::int64_t block = std::max<std::int64_t>(c.kv_block, 1);
  const std::int64_t per_seq_blocks = (per_seq + block - 1) / block * block;
  if (r.kv_bytes_per_token > 0) {
    std::string heads = arch.mla ? fmt::format("MLA latent {} + RoPE key {} (replicated on every TP rank)",
                                               arch.mla->kv_lora_rank, arch.mla->qk_rope_head_dim)
                                 : fmt::format("2 x {} KV heads of {} x {}", kv_heads_per_gpu(arch, par.tp),
                                               arch.kv_heads, arch.head_dim);
    add(b, "kv_cache", "KV cache", static_cast<double>(c.batch * per_seq_blocks) * r.kv_bytes_per_token,
        fmt::format("{} seq x {} tokens (context {}{}, rounded up to blocks of {}) x {:.0f} B/token "
                    "[{} layers x {} x {} B]",
                    c.batch, per_seq_blocks, c.context,
                    arch.sliding_window ? fmt::format(", sliding window {}", *arch.sliding_window) : "", block,
                    r.kv_bytes_per_token, ceil_div(arch.layers, par.pp), heads, c.kv_bytes_per_element));
  }

  // Activations of the largest prefill chunk: the residual stream and normed copy, plus the larger of the
  // attention projections and the MLP intermediates of one layer (layers run one after another).
  const std::int64_t chunk = c.prefill_chunk > 0 ? c.prefill_chunk : std::min<std::int64_t>(c.context * c.batch, 8192);
  const double t = static_cast<double>(par.tp);
  const double h = static_cast<double>(arch.hidden);
  double attn_width = 0;
  if (arch.mla) {
    attn_width =
        static_cast<double>(arch.heads) *
        static_cast<double>(arch.mla->qk_nope_head_dim + arch.mla->qk_rope_head_dim + 2 * arch.mla->v_head_dim) / t;
  } else {
    attn_width = (2.0 * static_cast<double>(arch.heads) / t + 2.0 * kv_heads_per_gpu(arch, par.tp)) *
                 static_cast<double>(arch.head_dim);
  }
  const double mlp_mats = arch.gated_mlp ? 3.0 : 2.0;
  double mlp_width = mlp_mats * static_cast<double>(arch.ffn_hidden) / t;
  if (arch.moe) {
    const double f = static_cast<double>(arch.moe->expert_ffn_hidden);
    mlp_width = std::max(mlp_width, static_cast<double>(arch.moe->top_k + arch.moe->shared_experts) * mlp_mats * f /
                                        (par.ep > 1 ? 1.0 : t));
  }
  const double act_per_token = c.activation_bytes * (2.0 * h + std::max(attn_width, mlp_width));
  const double logits = static_cast<double>(c.batch) * static_cast<double>(arch.vocab) / t * 4.0;
  add(b, "activations", "activations (largest prefill chunk)", static_cast<double>(chunk) * act_per_token + logits,
      fmt::format("{} tokens x {} B x (2 x {} hidden + max(attention {:.0f}, MLP {:.0f}) per GPU) + FP32 logits of "
                  "the last token of {} seq x {} vocab / TP {} (FlashAttention: no s^2 term)",
                  chunk, c.activation_bytes, arch.hidden, attn_width, mlp_width, c.batch, arch.vocab, par.tp));
  add_runtime(b, par, c.runtime);

  b.assumptions = {
      fmt::format("framework may use {:.0f}% of GPU memory (vLLM gpu_memory_utilization default 0.9)",
                  c.runtime.memory_fraction * 100),
      "embeddings, LM head and norms stay 16-bit in quantized checkpoints",
      fmt::format("KV cache {} bytes/element; paged in blocks of {} tokens (vLLM default 16)", c.kv_bytes_per_element,
                  block),
      "prefill chunk: min(context x batch, 8192) tokens (vLLM chunked prefill, max_num_batched_tokens 8192) unless "
      "--prefill-chunk is given",
  };
  if (par.pp > 1) b.assumptions.push_back("pipeline stages: ceil(layers / PP) layers on the stage shown (the worst)");
  if (arch.moe && par.ep > 1) {
    b.assumptions.push_back("EP > 1: whole experts per GPU (expert TP 1), as vLLM's expert parallelism");
  }

  const double without_kv = b.total_bytes - b.bytes_of("kv_cache");
  if (r.kv_bytes_per_token > 0) {
    r.kv_tokens_capacity = std::max(0.0, (b.usable_bytes - without_kv) / r.kv_bytes_per_token);
    r.max_batch_at_context =
        static_cast<std::int64_t>(std::floor(r.kv_tokens_capacity / static_cast<double>(per_seq_blocks)));
  }
  return r;
}

// ---- training --------------------------------------------------------------------------------------

LayerActivations layer_activations(const ModelArch& arch, std::int64_t tp, const TrainingConfig& c) {
  LayerActivations a;
  const double s = static_cast<double>(c.seq);
  const double b = static_cast<double>(c.micro_batch);
  const double h = static_cast<double>(arch.hidden);
  const double t = static_cast<double>(tp);
  const double heads = static_cast<double>(arch.heads);
  const double ab = 2.0;  // BF16/FP16 activations (FP8 GEMMs still keep most saved tensors in BF16)
  const double sb = s * b;
  // Korthikanti et al. 2022 §4.1, term by term. Replicated (split by t only with SP): the inputs of the
  // two norms, the inputs of the QKV and first MLP GEMMs (the norm outputs), and two dropout masks.
  a.replicated = sb * h * (4.0 * ab + (c.dropout ? 2.0 : 0.0));
  // Split by TP: Q, K, V, the attention output (input of the output projection), the MLP intermediates.
  double qd = 0, kvd = 0, vd = 0;
  if (arch.mla) {
    qd = heads * static_cast<double>(arch.mla->qk_nope_head_dim + arch.mla->qk_rope_head_dim) / t;
    kvd = qd + heads * static_cast<double>(arch.mla->v_head_dim) / t;  // decompressed K and V
    vd = heads * static_cast<double>(arch.mla->v_head_dim) / t;
  } else {
    qd = heads * static_cast<double>(arch.head_dim) / t;
    kvd = 2.0 * kv_heads_per_gpu(arch, tp) * static_cast<double>(arch.head_dim);
    vd = qd;
  }
  const double mlp_mats = arch.gated_mlp ? 3.0 : 2.0;  // gate, up, act(gate) | up, act(up)
  double mlp = mlp_mats * static_cast<double>(arch.ffn_hidden) / t;
  if (arch.moe) {
    const double f = static_cast<double>(arch.moe->expert_ffn_hidden);
    mlp = static_cast<double>(arch.moe->top_k + arch.moe->shared_experts) * mlp_mats * f / t;
  }
  a.split = sb * ab * (qd + kvd + vd + mlp);
  // Attention scores: softmax output 2·a·s²·b, with dropout also its mask a·s²·b and output 2·a·s²·b.
  if (!c.flash_attention) a.scores = (c.dropout ? 5.0 : 2.0) * heads / t * s * s * b;
  const double sp = (c.sequence_parallel && tp > 1) ? t : 1.0;
  switch (c.recompute) {
    case Recompute::none:
      a.stored = a.replicated / sp + a.split + a.scores;
      break;
    case Recompute::selective:
      a.stored = a.replicated / sp + a.split;
      break;
    case Recompute::full:
      a.stored = sb * h * ab / sp;  // the layer input only
      break;
  }
  a.formula = fmt::format(
      "s={} b={} h={}: replicated {:.4g} B{} + TP-split {:.4g} B + scores {:.4g} B{} -> {:.4g} B/layer "
      "(recompute {})",
      c.seq, c.micro_batch, arch.hidden, a.replicated, sp > 1 ? fmt::format(" / SP {}", tp) : "", a.split, a.scores,
      c.flash_attention ? " (FlashAttention: none stored)" : "", a.stored, to_string(c.recompute));
  return a;
}

TrainingMemory training_memory(const ModelArch& arch, const Parallelism& par, const TrainingConfig& c,
                               double capacity_bytes) {
  check_parallelism(arch, par);
  if (c.seq < 1) throw UsageError(fmt::format("--seq: must be at least 1, got {}", c.seq));
  if (c.micro_batch < 1) throw UsageError(fmt::format("--micro-batch: must be at least 1, got {}", c.micro_batch));
  if (c.zero_stage < 0 || c.zero_stage > 3) {
    throw UsageError(fmt::format("--zero: stage must be 0, 1, 2 or 3, got {}", c.zero_stage));
  }
  if (c.distributed_optimizer && c.zero_stage > 0) {
    throw UsageError("--distributed-optimizer: Megatron's distributed optimizer replaces ZeRO; use --zero 0");
  }
  const double p = static_cast<double>(par.pp);
  const double t = static_cast<double>(par.tp);
  const double d = static_cast<double>(par.dp);
  const double m = c.micro_batches > 0 ? static_cast<double>(c.micro_batches) : p;
  // Experts are data-parallel over the GPUs of a stage that hold the same experts.
  const double d_expert = t * d / (par.ep > 1 ? static_cast<double>(par.ep) : t);

  const LayerActivations layer = layer_activations(arch, par.tp, c);
  const double sp = (c.sequence_parallel && par.tp > 1) ? t : 1.0;
  const double s = static_cast<double>(c.seq);
  const double b = static_cast<double>(c.micro_batch);
  const double h = static_cast<double>(arch.hidden);

  auto build = [&](bool first, bool last) {
    TrainingMemory r;
    MemoryBreakdown& out = r.breakdown;
    out.capacity_bytes = capacity_bytes;
    out.usable_bytes = capacity_bytes * c.runtime.memory_fraction;
    const StageParams sp_params = stage_params(arch, par, first, last);
    const double psi = sp_params.total();
    const double psi_e = sp_params.routed_experts;
    const double psi_d = psi - psi_e;  // parameters data-parallel over d
    r.params_per_gpu = psi;
    // Sharded bytes: dense parameters over d, experts over their expert-data-parallel group.
    auto sharded = [&](double bytes_per_param) {
      return psi_d * bytes_per_param / d + psi_e * bytes_per_param / d_expert;
    };
    const std::string psi_text = fmt::format("Ψ = {:.4g} params on this GPU", psi);

    if (c.fine_tune == FineTune::full) {
      r.trainable_params_per_gpu = psi;
      const double grad_b = c.distributed_optimizer ? 4.0 : 2.0;
      const bool z1 = c.zero_stage >= 1 || c.distributed_optimizer;
      const bool z2 = c.zero_stage >= 2;
      const bool z3 = c.zero_stage >= 3;
      add(out, "weights", "weights (BF16)", z3 ? sharded(2) : 2 * psi,
          z3 ? fmt::format("2Ψ / d (ZeRO-3), {}, d = {}", psi_text, par.dp) : fmt::format("2Ψ, {}", psi_text));
      add(out, "gradients", c.distributed_optimizer ? "gradients (FP32 main grads)" : "gradients (BF16)",
          z2 ? sharded(grad_b) : grad_b * psi,
          z2 ? fmt::format("{}Ψ / d (ZeRO-{})", grad_b, c.zero_stage)
             : fmt::format("{}Ψ{}", grad_b, c.distributed_optimizer ? " (Megatron keeps FP32 main_grad)" : ""));
      add(out, "optimizer", "optimizer: FP32 master + Adam m, v", z1 ? sharded(12) : 12 * psi,
          z1 ? fmt::format(
                   "12Ψ / d ({}), d = {}",
                   c.distributed_optimizer ? "Megatron distributed optimizer" : fmt::format("ZeRO-{}", c.zero_stage),
                   par.dp)
             : "12Ψ (4 + 4 + 4 bytes per parameter)");
      if (z3) {
        const double layer_params = (psi - sp_params.other) / std::max(sp_params.layers, 1.0);
        add(out, "zero3_prefetch", "ZeRO-3 gathered parameters", 2.0 * 2.0 * layer_params,
            fmt::format("assumption: 2 layers of unsharded BF16 parameters live (current + prefetch), "
                        "2 x 2 B x {:.4g}",
                        layer_params));
      }
    } else {
      // Adapters on every attention and dense-MLP matrix: r x (in + out) each (QLoRA paper: all linear layers).
      const double r_ = static_cast<double>(c.lora_rank);
      const double q = static_cast<double>(arch.heads * arch.head_dim);
      const double kv = static_cast<double>(arch.kv_heads * arch.head_dim);
      const double f = static_cast<double>(arch.ffn_hidden);
      double per_layer = r_ * ((h + q) + 2 * (h + kv) + (q + h));
      if (!arch.moe) per_layer += r_ * (arch.gated_mlp ? 3.0 : 2.0) * (h + f);
      const double adapters = sp_params.layers * per_layer / t;
      r.trainable_params_per_gpu = adapters;
      if (c.fine_tune == FineTune::qlora) {
        // NF4 with double quantization: 4 + 8/64 + 32/(64·256) = 4.127 bits (Dettmers et al. 2023).
        const double nf4 = 4.127 / 8.0;
        add(out, "weights", "frozen base weights (NF4) + 16-bit embeddings/norms",
            sp_params.linear * nf4 + sp_params.other * 2.0,
            fmt::format("{:.4g} linear params x 4.127/8 B (NF4, double-quantized) + {:.4g} x 2 B", sp_params.linear,
                        sp_params.other));
      } else {
        add(out, "weights", "frozen base weights (BF16)", 2 * psi, fmt::format("2Ψ, {}", psi_text));
      }
      const double adapter_states = c.zero_stage >= 1 ? 4.0 * adapters + 12.0 * adapters / d : 16.0 * adapters;
      add(out, "adapters", "LoRA adapters: weights, grads, FP32 master + Adam", adapter_states,
          fmt::format("rank {} on q,k,v,o{}: {:.4g} adapter params on this GPU x 16 B{}", c.lora_rank,
                      arch.moe ? " (MoE: attention only)" : (arch.gated_mlp ? ",gate,up,down" : ",up,down"), adapters,
                      c.zero_stage >= 1 ? " (optimizer part / d)" : ""));
    }

    // Activations: micro-batches in flight on this stage x layers of the stage x per-layer bytes.
    double in_flight = 1;
    if (first) in_flight = std::min(p, m);
    double interleave = 1;
    if (c.schedule == PipelineSchedule::interleaved && par.pp > 1 && first) {
      interleave = 1.0 + (p - 1.0) / (p * static_cast<double>(std::max<std::int64_t>(c.virtual_stages, 1)));
    }
    r.in_flight_micro_batches = in_flight * interleave;
    add(out, "activations", "activations (Korthikanti et al.)",
        sp_params.layers * layer.stored * in_flight * interleave,
        fmt::format("{} layers x {:.4g} B/layer x {} micro-batch(es) in flight{} [{}]", sp_params.layers, layer.stored,
                    in_flight, interleave > 1 ? fmt::format(" x interleave {:.3f}", interleave) : std::string(),
                    layer.formula));
    if (c.recompute == Recompute::full) {
      const double working = layer.replicated / sp + layer.split + layer.scores;
      add(out, "recompute_working_set", "one layer recomputed (full recompute)", working,
          "the activations of one layer, rebuilt during its backward pass");
    }
    if (first && c.dropout) {
      add(out, "embedding_dropout", "embedding dropout mask", s * b * h * in_flight / t,
          "s·b·h·p/t (Korthikanti: one byte per element, p micro-batches)");
    }
    if (last && arch.kind == workloads::ModelKind::decoder) {
      add(out, "logits", "logits and loss (FP32)", 4.0 * s * b * static_cast<double>(arch.vocab) / t,
          fmt::format("4·s·b·V/t = 4 x {} x {} x {} / {}", c.seq, c.micro_batch, arch.vocab, par.tp));
    }
    const double dynamic = out.total_bytes;
    add(out, "fragmentation", "allocator fragmentation", c.fragmentation * dynamic,
        fmt::format("assumption: {:.0f}% of the above (PyTorch caching allocator; 5-10%)", c.fragmentation * 100));
    add_runtime(out, par, c.runtime);
    out.stage = par.pp == 1 ? "single stage" : (first ? "first stage" : "last stage");
    out.assumptions = {
        "mixed precision: BF16 weights and grads (FP8 training keeps BF16 weights; FP8 copies are transient)",
        "Adam: FP32 master weights, first and second moments (12 bytes per parameter)",
        fmt::format("activations: BF16, {} recompute, sequence parallelism {}, FlashAttention {}, dropout {}",
                    to_string(c.recompute), (c.sequence_parallel && par.tp > 1) ? "on" : "off",
                    c.flash_attention ? "on" : "off", c.dropout ? "on" : "off"),
        fmt::format("pipeline: {} with {} micro-batches; the first stage keeps min(p, m) in flight",
                    c.schedule == PipelineSchedule::interleaved ? fmt::format("interleaved (v = {})", c.virtual_stages)
                                                                : std::string("1F1B"),
                    m),
    };
    if (arch.moe) {
      out.assumptions.push_back(
          "MoE: each token's top-k (+ shared) expert intermediates are stored; experts are data-parallel over "
          "TP x DP / EP GPUs");
    }
    return r;
  };

  TrainingMemory first = build(true, par.pp == 1);
  if (par.pp == 1) return first;
  TrainingMemory last = build(false, true);
  return first.breakdown.total_bytes >= last.breakdown.total_bytes ? first : last;
}

}  // namespace gpuscout::model
