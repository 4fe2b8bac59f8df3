#include "gpuscout/workloads/model_arch.hpp"

#include <algorithm>

namespace gpuscout::workloads {
namespace {

std::int64_t norm_width_params(const ModelArch& arch, std::int64_t width) {
  // LayerNorm: scale and shift; RMSNorm: scale only.
  return arch.norm == NormType::layernorm ? 2 * width : width;
}

// Q and K head width (MLA: the no-RoPE part plus the decoupled RoPE part).
std::int64_t qk_head_dim(const ModelArch& arch) {
  return arch.mla ? arch.mla->qk_nope_head_dim + arch.mla->qk_rope_head_dim : arch.head_dim;
}
std::int64_t v_head_dim(const ModelArch& arch) {
  return arch.mla ? arch.mla->v_head_dim : arch.head_dim;
}

}  // namespace

std::string ModelArch::attention_type() const {
  if (mla) return "MLA";
  if (kv_heads == heads) return "MHA";
  if (kv_heads == 1) return "MQA";
  return "GQA";
}

std::int64_t attention_params_per_layer(const ModelArch& arch) {
  const std::int64_t h = arch.hidden;
  std::int64_t params = 0;
  if (arch.mla) {
    const MlaConfig& m = *arch.mla;
    const std::int64_t q_out = arch.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    // Queries: h -> q_lora_rank -> heads x qk_dim, or h -> heads x qk_dim directly.
    params += m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * q_out : h * q_out;
    // Keys/values: h -> (kv latent + shared RoPE key), then latent -> heads x (k_nope + v).
    params += h * (m.kv_lora_rank + m.qk_rope_head_dim);
    params += m.kv_lora_rank * arch.heads * (m.qk_nope_head_dim + m.v_head_dim);
    params += arch.heads * m.v_head_dim * h;  // output projection
    if (arch.bias.qkv) params += q_out + m.kv_lora_rank + m.qk_rope_head_dim;
  } else {
    const std::int64_t q = arch.heads * arch.head_dim;
    const std::int64_t kv = arch.kv_heads * arch.head_dim;
    params += h * q + 2 * h * kv + q * h;
    if (arch.bias.qkv) params += q + 2 * kv;
  }
  if (arch.bias.attn_out) params += h;
  return params;
}

std::int64_t mlp_params(const ModelArch& arch, std::int64_t intermediate) {
  const std::int64_t h = arch.hidden;
  const std::int64_t up_matrices = arch.gated_mlp ? 2 : 1;  // gate and up, or up alone
  std::int64_t params = (up_matrices + 1) * h * intermediate;
  if (arch.bias.mlp) params += up_matrices * intermediate + h;
  return params;
}

std::int64_t norm_params_per_layer(const ModelArch& arch) {
  std::int64_t params = 2 * norm_width_params(arch, arch.hidden);
  if (arch.mla) {
    if (arch.mla->q_lora_rank > 0) params += norm_width_params(arch, arch.mla->q_lora_rank);
    params += norm_width_params(arch, arch.mla->kv_lora_rank);
  }
  return params;
}

ParamBreakdown count_params(const ModelArch& arch) {
  ParamBreakdown p;
  const std::int64_t h = arch.hidden;

  p.embedding = arch.vocab * h + arch.token_types * h;
  if (arch.position == PositionType::learned) p.embedding += arch.max_positions * h;

  p.attention = arch.layers * attention_params_per_layer(arch);
  p.norms = arch.layers * norm_params_per_layer(arch);
  // Decoders end in a final norm; BERT-style encoders normalize the embeddings instead.
  p.norms += norm_width_params(arch, h);

  std::int64_t inactive = 0;
  if (arch.moe) {
    const MoeConfig& moe = *arch.moe;
    const std::int64_t expert = mlp_params(arch, moe.expert_ffn_hidden);
    const std::int64_t router = moe.experts * h + (moe.router_bias ? moe.experts : 0);
    p.routed_experts = arch.moe_layers() * moe.experts * expert;
    p.router = arch.moe_layers() * router;
    p.mlp = p.routed_experts + p.router + arch.moe_layers() * moe.shared_experts * expert +
            arch.dense_mlp_layers() * mlp_params(arch, arch.ffn_hidden);
    inactive = arch.moe_layers() * (moe.experts - moe.top_k) * expert;
  } else {
    p.mlp = arch.layers * mlp_params(arch, arch.ffn_hidden);
  }

  if (arch.kind == ModelKind::decoder && !arch.tied_embeddings) p.lm_head = arch.vocab * h;
  if (arch.pooler) p.pooler = h * h + h;

  p.total = p.embedding + p.attention + p.mlp + p.norms + p.lm_head + p.pooler;
  p.active = p.total - inactive;
  return p;
}

std::int64_t kv_cache_elements_per_token(const ModelArch& arch) {
  if (arch.kind == ModelKind::encoder) return 0;
  if (arch.mla) return arch.layers * (arch.mla->kv_lora_rank + arch.mla->qk_rope_head_dim);
  return 2 * arch.layers * arch.kv_heads * arch.head_dim;
}

double forward_flops_per_token(const ModelArch& arch, std::int64_t context) {
  const ParamBreakdown p = count_params(arch);
  // Embedding lookups and norms are not matrix products; a tied LM head still is one.
  std::int64_t matmul_params = p.active - p.embedding - p.norms;
  if (arch.kind == ModelKind::decoder && arch.tied_embeddings) matmul_params += arch.vocab * arch.hidden;
  std::int64_t attended = std::max<std::int64_t>(context, 0);
  if (arch.sliding_window) attended = std::min(attended, *arch.sliding_window);
  const double attention = 2.0 * static_cast<double>(arch.layers * arch.heads) *
                           static_cast<double>(qk_head_dim(arch) + v_head_dim(arch)) * static_cast<double>(attended);
  return 2.0 * static_cast<double>(matmul_params) + attention;
}

}  // namespace gpuscout::workloads
