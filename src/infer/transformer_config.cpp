#include "gpuscout/infer/transformer_config.hpp"

#include <fmt/format.h>

#include <numeric>
#include <string>
#include <vector>

#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::infer {
namespace {

// "a", "a and b", "a, b and c".
std::string join_with_and(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += (i + 1 == items.size()) ? " and " : ", ";
    out += items[i];
  }
  return out;
}

int to_int(std::int64_t value, const std::string& model, const char* field) {
  if (value <= 0 || value > 0x7FFFFFFF) {
    throw UsageError(fmt::format("{}: {} = {} is outside what the gpuscout engine supports", model, field, value));
  }
  return static_cast<int>(value);
}

}  // namespace

TransformerConfig TransformerConfig::from_model(const workloads::ModelInfo& model) {
  using workloads::ModelKind;
  using workloads::NormType;
  using workloads::PositionType;
  const workloads::ModelArch& arch = model.arch;

  // Everything the engine does not implement, each with its verb so one reason reads as a sentence.
  struct Missing {
    std::string what;
    bool plural;
  };
  std::vector<Missing> missing;
  if (arch.kind != ModelKind::decoder) missing.push_back({"encoder models", true});
  if (arch.is_moe()) missing.push_back({"mixture-of-experts MLPs", true});
  if (arch.is_mla()) missing.push_back({"multi-head latent attention (MLA)", false});
  if (arch.bias.attn_out) missing.push_back({"attention output biases", true});
  if (arch.bias.mlp) missing.push_back({"MLP biases", true});
  if (arch.norm != NormType::rmsnorm) missing.push_back({"LayerNorm", false});
  if (arch.position == PositionType::learned) missing.push_back({"learned position embeddings", true});
  if (arch.position == PositionType::none) missing.push_back({"models without RoPE", true});
  if (!arch.gated_mlp) missing.push_back({"non-gated MLPs", true});
  if (arch.activation != "silu") missing.push_back({fmt::format("the {} activation", arch.activation), false});
  if (arch.pooler) missing.push_back({"poolers", true});
  if (arch.token_types > 0) missing.push_back({"token-type embeddings", true});
  if (!missing.empty()) {
    std::vector<std::string> names;
    for (const auto& m : missing) names.push_back(m.what);
    const bool plural = missing.size() > 1 || missing.front().plural;
    throw UsageError(
        fmt::format("{}: {} {} not implemented by the gpuscout engine (it runs Llama-family decoders: RMSNorm, RoPE, "
                    "grouped-query attention, gated SiLU MLP, no biases but QKV's)",
                    model.name, join_with_and(names), plural ? "are" : "is"));
  }

  TransformerConfig c;
  c.name = model.name;
  c.layers = to_int(arch.layers, model.name, "layers");
  c.hidden = to_int(arch.hidden, model.name, "hidden");
  c.heads = to_int(arch.heads, model.name, "heads");
  c.kv_heads = to_int(arch.kv_heads, model.name, "kv_heads");
  c.head_dim = to_int(arch.head_dim > 0 ? arch.head_dim : arch.hidden / arch.heads, model.name, "head_dim");
  c.ffn_hidden = to_int(arch.ffn_hidden, model.name, "ffn_hidden");
  c.vocab = to_int(arch.vocab, model.name, "vocab");
  c.rope_theta = arch.rope_theta.value_or(10000.0);
  c.tied_embeddings = arch.tied_embeddings;
  c.qkv_bias = arch.bias.qkv;
  c.max_context = model.max_context;
  // Sliding-window attention (Mistral 7B v0.1) equals full causal attention up to the window: the
  // engine serves contexts up to the window.
  if (arch.sliding_window && *arch.sliding_window < c.max_context) c.max_context = *arch.sliding_window;
  if (c.heads % c.kv_heads != 0) {
    throw UsageError(
        fmt::format("{}: {} query heads are not a multiple of {} KV heads", model.name, c.heads, c.kv_heads));
  }
  if (c.head_dim % 2 != 0) {
    throw UsageError(fmt::format("{}: head_dim {} is odd; RoPE rotates pairs of dimensions", model.name, c.head_dim));
  }
  return c;
}

TransformerConfig TransformerConfig::tiny() {
  TransformerConfig c;
  c.name = "tiny";
  c.layers = 2;
  c.hidden = 128;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.ffn_hidden = 256;
  c.vocab = 512;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-5f;
  c.tied_embeddings = false;
  c.max_context = 1024;
  return c;
}

std::int64_t TransformerConfig::projection_params() const {
  const std::int64_t h = hidden;
  const std::int64_t attention = h * qkv_dim() + static_cast<std::int64_t>(q_dim()) * h;
  const std::int64_t mlp = 3 * h * ffn_hidden;
  return layers * (attention + mlp);
}

std::int64_t TransformerConfig::weight_params() const {
  const std::int64_t h = hidden;
  const std::int64_t embedding = static_cast<std::int64_t>(vocab) * h;
  const std::int64_t norms = layers * 2 * h + h;
  const std::int64_t biases = qkv_bias ? static_cast<std::int64_t>(layers) * qkv_dim() : 0;
  return embedding + projection_params() + norms + biases + (tied_embeddings ? 0 : embedding);
}

const char* to_string(WeightFormat format) {
  return format == WeightFormat::fp8_e4m3 ? "fp8" : "bf16";
}

WeightFormat parse_weight_format(const std::string& text, const std::string& flag) {
  if (text == "bf16") return WeightFormat::bf16;
  if (text == "fp8") return WeightFormat::fp8_e4m3;
  throw UsageError(fmt::format("{}: expected bf16 or fp8 (FP8 E4M3 projection weights), got '{}'", flag, text));
}

std::int64_t TransformerConfig::kv_bytes_per_token(int bytes_per_element) const {
  return 2ll * layers * kv_dim() * bytes_per_element;
}

void TransformerConfig::check_tensor_parallel(int tp) const {
  if (tp < 1) throw UsageError(fmt::format("--tp {}: the tensor-parallel degree must be at least 1", tp));
  struct Dimension {
    int value;
    std::string phrase;
  };
  const Dimension dims[] = {{heads, fmt::format("{} query heads", heads)},
                            {kv_heads, fmt::format("{} KV heads", kv_heads)},
                            {ffn_hidden, fmt::format("an FFN width of {}", ffn_hidden)}};
  for (const auto& d : dims) {
    if (d.value % tp == 0) continue;
    const int common = std::gcd(std::gcd(heads, kv_heads), ffn_hidden);
    std::vector<std::string> valid;
    for (int t = 1; t <= common; ++t) {
      if (common % t == 0) valid.push_back(std::to_string(t));
    }
    throw UsageError(fmt::format("--tp {}: {} has {}, not divisible by {} (--tp must divide {}, {} and {}: {})", tp,
                                 name, d.phrase, tp, heads, kv_heads, ffn_hidden, join_with_and(valid)));
  }
}

}  // namespace gpuscout::infer
