#pragma once
// The architecture of a transformer model, as far as memory, FLOP and communication models need it,
// and the parameter count derived from it term by term. Pure data and arithmetic: no I/O.
//
// Conventions (docs/model-catalog.md has the full list):
//   - "decoder" models: pre-norm blocks (norm before attention and before the MLP) plus a final
//     norm, then an LM head of vocab x hidden unless the embeddings are tied.
//   - "encoder" models (BERT): post-norm blocks (two norms per layer), a LayerNorm after the
//     embeddings, no final norm, no LM head (the bare encoder, as HF BertModel), optional pooler.
//   - LayerNorm has a weight and a bias (2 x width); RMSNorm has a weight only (width).
#include <cstdint>
#include <optional>
#include <string>

namespace gpuscout::workloads {

enum class ModelKind { decoder, encoder };
enum class NormType { rmsnorm, layernorm };
enum class PositionType { rope, learned, none };

struct MoeConfig {
  std::int64_t experts = 0;            // routed experts per MoE layer
  std::int64_t top_k = 0;              // routed experts each token goes through
  std::int64_t shared_experts = 0;     // experts every token goes through
  std::int64_t expert_ffn_hidden = 0;  // intermediate size of one expert (routed and shared)
  std::int64_t dense_layers = 0;       // the first N layers use a dense MLP of ffn_hidden instead
  bool router_bias = false;            // a per-expert bias on the router (DeepSeek-V3's correction bias)
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values go through low-rank
// projections; the KV cache holds the compressed latent plus the decoupled RoPE key.
struct MlaConfig {
  std::int64_t q_lora_rank = 0;  // 0: queries are projected directly from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

struct BiasConfig {
  bool qkv = false;       // biases on the Q, K and V projections
  bool attn_out = false;  // bias on the attention output projection
  bool mlp = false;       // biases on the MLP (and expert) projections
};

struct ModelArch {
  ModelKind kind = ModelKind::decoder;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;    // hidden / heads unless the model sets it
  std::int64_t ffn_hidden = 0;  // dense MLP intermediate size (MoE models: of the dense layers)
  bool gated_mlp = true;        // gate+up+down (SwiGLU/GeGLU: 3 matrices) vs up+down (2)
  std::string activation;       // silu, gelu, gelu_tanh, relu
  NormType norm = NormType::rmsnorm;
  PositionType position = PositionType::rope;
  std::optional<double> rope_theta;
  std::int64_t max_positions = 0;  // rows of the learned position table (learned only)
  std::int64_t token_types = 0;    // rows of the token-type (segment) table; 0 = none
  std::optional<std::int64_t> sliding_window;
  std::int64_t vocab = 0;
  bool tied_embeddings = false;
  bool pooler = false;  // encoder pooler: dense hidden x hidden + bias
  BiasConfig bias;
  std::optional<MoeConfig> moe;
  std::optional<MlaConfig> mla;

  bool is_moe() const { return moe.has_value(); }
  bool is_mla() const { return mla.has_value(); }
  // Layers whose MLP is a mixture of experts.
  std::int64_t moe_layers() const { return moe ? layers - moe->dense_layers : 0; }
  std::int64_t dense_mlp_layers() const { return layers - moe_layers(); }
  // "MHA", "GQA", "MQA" or "MLA".
  std::string attention_type() const;
};

// Parameters by component. Everything is a plain count of weights (not bytes).
struct ParamBreakdown {
  std::int64_t embedding = 0;       // token embeddings + learned positions + token types
  std::int64_t attention = 0;       // all layers: projections and their biases (MLA included)
  std::int64_t mlp = 0;             // all layers: dense MLPs, routed and shared experts, routers
  std::int64_t routed_experts = 0;  // part of mlp: all routed experts of all MoE layers
  std::int64_t router = 0;          // part of mlp: router weights (and bias)
  std::int64_t norms = 0;           // every norm: per layer, MLA latent norms, embedding/final norm
  std::int64_t lm_head = 0;         // 0 when tied to the embeddings or for encoders
  std::int64_t pooler = 0;
  std::int64_t total = 0;
  // Parameters one token goes through: total minus the routed experts it is not sent to. Includes
  // the embedding row and the LM head, so it equals total for dense models.
  std::int64_t active = 0;
};

// Parameters of one attention block (projections and biases, without its norm).
std::int64_t attention_params_per_layer(const ModelArch& arch);
// Parameters of one MLP of the given intermediate size (2 or 3 matrices plus biases).
std::int64_t mlp_params(const ModelArch& arch, std::int64_t intermediate);
// Parameters of every norm in one layer (the two block norms, plus MLA latent norms).
std::int64_t norm_params_per_layer(const ModelArch& arch);

ParamBreakdown count_params(const ModelArch& arch);

// KV-cache elements one token adds over all layers: 2 x layers x kv_heads x head_dim for MHA/GQA;
// layers x (kv_lora_rank + qk_rope_head_dim) for MLA (the compressed latent is what is cached).
// Encoders keep no cache: 0.
std::int64_t kv_cache_elements_per_token(const ModelArch& arch);
inline double kv_cache_bytes_per_token(const ModelArch& arch, double bytes_per_element) {
  return static_cast<double>(kv_cache_elements_per_token(arch)) * bytes_per_element;
}

// Forward FLOPs for one token attending to `context` earlier positions (multiply-add = 2 FLOPs):
// 2 x (active parameters used as matrices: everything but the embedding lookups) plus the attention
// score and value products, 2 x layers x heads x (qk_dim + v_dim) x attended positions. A sliding
// window caps the attended positions.
double forward_flops_per_token(const ModelArch& arch, std::int64_t context);

}  // namespace gpuscout::workloads
