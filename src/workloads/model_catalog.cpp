#include "gpuscout/workloads/model_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::workloads {
namespace {

using data::TomlEntry;

constexpr std::int64_t kMaxDim = 10'000'000;  // generous bound that still catches a stray exponent

bool is_date(const std::string& text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  const int month = std::stoi(text.substr(5, 2));
  const int day = std::stoi(text.substr(8, 2));
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

std::string required_url(const TomlEntry& entry, std::string_view key) {
  std::string url = entry.required_string(key);
  if (!url.starts_with("https://") && !url.starts_with("http://")) {
    entry.fail(key, fmt::format("'{}' is not a URL; expected the http(s) address of the source", url));
  }
  return url;
}

std::int64_t required_count(const TomlEntry& entry, std::string_view key) {
  // Counts such as 8.03e9 are written as floats; they are stored as whole numbers.
  return std::llround(entry.required_number(key, 1, 1e15));
}

void read_architecture(const TomlEntry& a, ModelInfo& model) {
  a.reject_unknown_keys({"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "gated_mlp", "activation",
                         "norm", "vocab", "tied_embeddings", "sliding_window", "token_types", "pooler"});
  ModelArch& arch = model.arch;
  arch.layers = a.required_int("layers", 1, 100'000);
  arch.hidden = a.required_int("hidden", 1, kMaxDim);
  arch.heads = a.required_int("heads", 1, 100'000);
  arch.kv_heads = a.required_int("kv_heads", 1, 100'000);
  if (arch.kv_heads > arch.heads || arch.heads % arch.kv_heads != 0) {
    a.fail("kv_heads",
           fmt::format("{} does not divide heads ({}); expected a divisor of heads", arch.kv_heads, arch.heads));
  }
  if (auto head_dim = a.optional_int("head_dim", 1, kMaxDim)) {
    arch.head_dim = *head_dim;  // explicit: hidden need not equal heads x head_dim (e.g. Gemma)
  } else {
    if (arch.hidden % arch.heads != 0) {
      a.fail("head_dim", fmt::format("missing, and hidden ({}) is not a multiple of heads ({}); set head_dim "
                                     "explicitly",
                                     arch.hidden, arch.heads));
    }
    arch.head_dim = arch.hidden / arch.heads;
  }
  if (auto ffn = a.optional_int("ffn_hidden", 1, kMaxDim)) arch.ffn_hidden = *ffn;
  arch.gated_mlp = a.required_bool("gated_mlp");
  arch.activation = a.required_choice("activation", {"silu", "gelu", "gelu_tanh", "relu"});
  arch.norm =
      a.required_choice("norm", {"rmsnorm", "layernorm"}) == "rmsnorm" ? NormType::rmsnorm : NormType::layernorm;
  arch.vocab = a.required_int("vocab", 1, kMaxDim);
  arch.tied_embeddings = a.required_bool("tied_embeddings");
  arch.sliding_window = a.optional_int("sliding_window", 1, kMaxDim);
  arch.token_types = a.optional_int("token_types", 0, 1'000).value_or(0);
  arch.pooler = a.optional_bool("pooler").value_or(false);
  if (arch.pooler && arch.kind != ModelKind::encoder) a.fail("pooler", "only encoder models have a pooler");
}

void read_position(const TomlEntry& p, ModelInfo& model) {
  p.reject_unknown_keys({"type", "theta", "max_positions"});
  ModelArch& arch = model.arch;
  const std::string type = p.required_choice("type", {"rope", "learned", "none"});
  arch.position = type == "rope" ? PositionType::rope : type == "learned" ? PositionType::learned : PositionType::none;
  if (arch.position == PositionType::rope) {
    arch.rope_theta = p.required_number("theta", 1, 1e12);
  } else if (p.has("theta")) {
    p.fail("theta", fmt::format("only RoPE has a theta; position type is '{}'", type));
  }
  if (arch.position == PositionType::learned) {
    arch.max_positions = p.required_int("max_positions", 1, kMaxDim);
    if (model.max_context > arch.max_positions) {
      p.fail("max_positions", fmt::format("{} is less than max_context ({}); a learned table bounds the context",
                                          arch.max_positions, model.max_context));
    }
  } else if (p.has("max_positions")) {
    p.fail("max_positions", fmt::format("only learned positions have a table; position type is '{}'", type));
  }
}

void read_moe(const TomlEntry& m, ModelInfo& model) {
  m.reject_unknown_keys({"experts", "top_k", "shared_experts", "expert_ffn_hidden", "dense_layers", "router_bias"});
  MoeConfig moe;
  moe.experts = m.required_int("experts", 1, 100'000);
  moe.top_k = m.required_int("top_k", 1, 100'000);
  if (moe.top_k > moe.experts) {
    m.fail("top_k", fmt::format("{} is more than the {} experts; expected 1..experts", moe.top_k, moe.experts));
  }
  moe.shared_experts = m.optional_int("shared_experts", 0, 100'000).value_or(0);
  moe.expert_ffn_hidden = m.required_int("expert_ffn_hidden", 1, kMaxDim);
  moe.dense_layers = m.optional_int("dense_layers", 0, 100'000).value_or(0);
  if (moe.dense_layers >= model.arch.layers) {
    m.fail("dense_layers", fmt::format("{} leaves no MoE layer of {}; expected fewer dense layers than layers",
                                       moe.dense_layers, model.arch.layers));
  }
  moe.router_bias = m.optional_bool("router_bias").value_or(false);
  model.arch.moe = moe;
}

void read_mla(const TomlEntry& m, ModelInfo& model) {
  m.reject_unknown_keys({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  MlaConfig mla;
  mla.q_lora_rank = m.optional_int("q_lora_rank", 0, kMaxDim).value_or(0);
  mla.kv_lora_rank = m.required_int("kv_lora_rank", 1, kMaxDim);
  mla.qk_nope_head_dim = m.required_int("qk_nope_head_dim", 1, kMaxDim);
  mla.qk_rope_head_dim = m.required_int("qk_rope_head_dim", 1, kMaxDim);
  mla.v_head_dim = m.required_int("v_head_dim", 1, kMaxDim);
  model.arch.mla = mla;
}

void read_bias(const TomlEntry& b, ModelInfo& model) {
  b.reject_unknown_keys({"qkv", "attn_out", "mlp"});
  model.arch.bias.qkv = b.optional_bool("qkv").value_or(false);
  model.arch.bias.attn_out = b.optional_bool("attn_out").value_or(false);
  model.arch.bias.mlp = b.optional_bool("mlp").value_or(false);
}

void read_published(const TomlEntry& p, ModelInfo& model) {
  p.reject_unknown_keys({"params", "active_params", "source", "note"});
  PublishedParams& published = model.published;
  published.total = required_count(p, "params");
  if (p.has("active_params")) {
    published.active = required_count(p, "active_params");
    if (*published.active > published.total) {
      p.fail("active_params", fmt::format("{} is more than params ({})", *published.active, published.total));
    }
  }
  published.source = required_url(p, "source");
  published.note = p.optional_string("note").value_or("");
}

}  // namespace

ModelInfo parse_model_file(const data::DataFile& file) {
  const toml::table table = data::parse_toml(file);
  TomlEntry root(table, file.origin, "");
  ModelInfo model;
  model.file = file.origin;
  model.name = root.required_string("name");
  root.set_entry(model.name);
  root.reject_unknown_keys({"name", "aliases", "family", "kind", "release_date", "default_dtype", "max_context",
                            "config_source", "architecture", "position", "bias", "moe", "mla", "published"});
  model.aliases = root.string_list("aliases");
  for (const auto& alias : model.aliases) {
    if (normalize_name(alias).empty()) {
      root.fail("aliases", fmt::format("'{}' has no letters or digits to match on", alias));
    }
  }
  model.family = root.required_string("family");
  model.arch.kind =
      root.required_choice("kind", {"decoder", "encoder"}) == "decoder" ? ModelKind::decoder : ModelKind::encoder;
  model.release_date = root.required_string("release_date");
  if (!is_date(model.release_date)) {
    root.fail("release_date", fmt::format("'{}' is not a date; expected YYYY-MM-DD", model.release_date));
  }
  model.default_dtype = root.required_choice("default_dtype", {"fp32", "fp16", "bf16", "fp8"});
  model.max_context = root.required_int("max_context", 1, 100'000'000);
  model.config_source = required_url(root, "config_source");

  read_architecture(root.required_table("architecture"), model);
  read_position(root.required_table("position"), model);
  if (auto bias = root.optional_table("bias")) read_bias(*bias, model);
  if (auto moe = root.optional_table("moe")) read_moe(*moe, model);
  if (auto mla = root.optional_table("mla")) read_mla(*mla, model);
  read_published(root.required_table("published"), model);

  // Checks that span tables.
  const ModelArch& arch = model.arch;
  const bool needs_dense_ffn = !arch.moe || arch.moe->dense_layers > 0;
  if (needs_dense_ffn && arch.ffn_hidden == 0) {
    TomlEntry(*table["architecture"].as_table(), file.origin, model.name, "architecture")
        .fail("ffn_hidden",
              arch.moe ? "missing; moe.dense_layers > 0 needs the dense MLP size" : "missing; expected an integer");
  }
  if (!needs_dense_ffn && arch.ffn_hidden != 0) {
    TomlEntry(*table["architecture"].as_table(), file.origin, model.name, "architecture")
        .fail("ffn_hidden", "is unused: every layer is MoE (moe.dense_layers = 0); use moe.expert_ffn_hidden");
  }
  if (arch.kind == ModelKind::encoder && (arch.moe || arch.mla)) {
    root.fail(arch.moe ? "moe" : "mla", "encoder models with MoE or MLA are not supported");
  }
  if (arch.moe && !model.published.active) {
    TomlEntry(*table["published"].as_table(), file.origin, model.name, "published")
        .fail("active_params", "missing; MoE models state their activated parameters");
  }
  return model;
}

ModelCatalog ModelCatalog::from_files(const std::vector<data::DataFile>& files) {
  ModelCatalog catalog;
  for (const auto& file : files) {
    ModelInfo model = parse_model_file(file);
    const std::size_t id = catalog.models_.size();
    // Name first, then each alias, so the message points at the field that clashes.
    std::vector<std::pair<std::string, std::string>> keys{{"name", model.name}};
    for (const auto& alias : model.aliases) keys.emplace_back("aliases", alias);
    for (const auto& [field, key] : keys) {
      if (auto other = catalog.index_.find(key)) {
        const ModelInfo& clash = catalog.models_[*other];
        throw DataError(
            model.file, model.name, field,
            fmt::format("'{}' is already a name or alias of model '{}' in {}", key, clash.name, clash.file));
      }
    }
    catalog.index_.add(id, model.name, model.aliases);
    catalog.models_.push_back(std::move(model));
  }
  return catalog;
}

ModelCatalog ModelCatalog::load(const data::DataSource& source) {
  return from_files(source.list("models", ".toml"));
}

const ModelInfo* ModelCatalog::find(std::string_view name) const {
  auto id = index_.find(name);
  return id ? &models_[*id] : nullptr;
}

const ModelInfo& ModelCatalog::get(std::string_view name) const {
  if (const ModelInfo* model = find(name)) return *model;
  throw NotFoundError("model", std::string(name), index_.suggest(name));
}

std::vector<std::string> ModelCatalog::families() const {
  std::vector<std::string> out;
  for (const auto& model : models_) {
    if (std::find(out.begin(), out.end(), model.family) == out.end()) out.push_back(model.family);
  }
  return out;
}

}  // namespace gpuscout::workloads
