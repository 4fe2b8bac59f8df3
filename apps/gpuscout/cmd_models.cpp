// gpuscout models list|show: the model catalog, its architectures and parameter counts.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/util/names.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::cli {
namespace {

using namespace std::string_literals;

using report::Align;
using report::Cell;
using report::Table;
using workloads::ModelArch;
using workloads::ModelInfo;
using workloads::ModelKind;
using workloads::ParamBreakdown;

double billions(std::int64_t count) {
  return static_cast<double>(count) / 1e9;
}

std::string kind_name(ModelKind kind) {
  return kind == ModelKind::decoder ? "decoder" : "encoder";
}

std::string position_name(workloads::PositionType type) {
  switch (type) {
    case workloads::PositionType::rope:
      return "rope";
    case workloads::PositionType::learned:
      return "learned";
    case workloads::PositionType::none:
      return "none";
  }
  return "none";
}

Cell optional_int(const std::optional<std::int64_t>& value) {
  return value ? Cell{*value} : Cell{};
}

Table list_table(const std::vector<const ModelInfo*>& models) {
  Table table;
  table.key = "models";
  table.add_column("name", "Model");
  table.add_column("family", "Family");
  table.add_column("kind", "Kind");
  table.add_column("params_b", "Params", "B", 2, Align::right);
  table.add_column("active_params_b", "Active", "B", 2, Align::right);
  table.add_column("layers", "Layers", "", -1, Align::right);
  table.add_column("hidden", "Hidden", "", -1, Align::right);
  table.add_column("heads", "Heads", "", -1, Align::right);
  table.add_column("kv_heads", "KV heads", "", -1, Align::right);
  table.add_column("attention", "Attention");
  table.add_column("experts", "Experts", "", -1, Align::right);
  table.add_column("top_k", "Top-k", "", -1, Align::right);
  table.add_column("max_context", "Context", "tokens", -1, Align::right);
  table.add_column("default_dtype", "Dtype");
  for (const ModelInfo* model : models) {
    const ModelArch& arch = model->arch;
    const ParamBreakdown params = model->params();
    std::optional<std::int64_t> experts, top_k;
    if (arch.moe) {
      experts = arch.moe->experts;
      top_k = arch.moe->top_k;
    }
    table.add_row({model->name, model->family, kind_name(arch.kind), billions(params.total), billions(params.active),
                   arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.attention_type(), optional_int(experts),
                   optional_int(top_k), model->max_context, model->default_dtype});
  }
  table.notes.push_back("Params are computed from the architecture; Active: parameters one token goes through (MoE).");
  return table;
}

Table architecture_table(const ModelInfo& model) {
  const ModelArch& arch = model.arch;
  Table table;
  table.key = "model";
  table.title = model.name;
  table.add_column("field", "Field");
  table.add_column("value", "Value");
  auto row = [&](std::string field, Cell value) { table.add_row({std::move(field), std::move(value)}); };
  row("name", model.name);
  row("aliases", fmt::format("{}", fmt::join(model.aliases, ", ")));
  row("family", model.family);
  row("kind", kind_name(arch.kind));
  row("release_date", model.release_date);
  row("default_dtype", model.default_dtype);
  row("max_context", model.max_context);
  row("layers", arch.layers);
  row("hidden", arch.hidden);
  row("heads", arch.heads);
  row("kv_heads", arch.kv_heads);
  row("attention", arch.attention_type());
  if (!arch.mla) row("head_dim", arch.head_dim);
  if (!arch.moe || arch.moe->dense_layers > 0) row("ffn_hidden", arch.ffn_hidden);
  row("mlp", arch.gated_mlp ? "gated (gate, up, down)"s : "plain (up, down)"s);
  row("activation", arch.activation);
  row("norm", arch.norm == workloads::NormType::rmsnorm ? "rmsnorm"s : "layernorm"s);
  row("position", position_name(arch.position));
  if (arch.rope_theta) row("rope_theta", *arch.rope_theta);
  if (arch.position == workloads::PositionType::learned) row("max_positions", arch.max_positions);
  if (arch.sliding_window) row("sliding_window", *arch.sliding_window);
  row("vocab", arch.vocab);
  row("tied_embeddings", arch.tied_embeddings);
  if (arch.token_types > 0) row("token_types", arch.token_types);
  if (arch.kind == ModelKind::encoder) row("pooler", arch.pooler);
  row("bias_qkv", arch.bias.qkv);
  row("bias_attn_out", arch.bias.attn_out);
  row("bias_mlp", arch.bias.mlp);
  if (arch.moe) {
    row("moe_experts", arch.moe->experts);
    row("moe_top_k", arch.moe->top_k);
    row("moe_shared_experts", arch.moe->shared_experts);
    row("moe_expert_ffn_hidden", arch.moe->expert_ffn_hidden);
    row("moe_dense_layers", arch.moe->dense_layers);
    row("moe_router_bias", arch.moe->router_bias);
  }
  if (arch.mla) {
    row("mla_q_lora_rank", arch.mla->q_lora_rank);
    row("mla_kv_lora_rank", arch.mla->kv_lora_rank);
    row("mla_qk_nope_head_dim", arch.mla->qk_nope_head_dim);
    row("mla_qk_rope_head_dim", arch.mla->qk_rope_head_dim);
    row("mla_v_head_dim", arch.mla->v_head_dim);
  }
  row("config_source", model.config_source);
  return table;
}

Table params_table(const ModelInfo& model, const ParamBreakdown& p) {
  Table table;
  table.key = "parameters";
  table.title = "Parameters (computed from the architecture)";
  table.add_column("component", "Component");
  table.add_column("params", "Params", "", -1, Align::right);
  table.add_column("params_b", "Params", "B", 3, Align::right);
  table.add_column("share_pct", "Share", "%", 1, Align::right);
  auto row = [&](std::string component, std::int64_t count) {
    table.add_row({std::move(component), count, billions(count),
                   100.0 * static_cast<double>(count) / static_cast<double>(p.total)});
  };
  row("embedding", p.embedding);
  row("attention", p.attention);
  row("mlp", p.mlp);
  if (model.arch.moe) {
    row("mlp.routed_experts", p.routed_experts);
    row("mlp.router", p.router);
  }
  row("norms", p.norms);
  row("lm_head", p.lm_head);
  if (model.arch.pooler) row("pooler", p.pooler);
  row("total", p.total);
  row("active", p.active);
  if (model.arch.tied_embeddings && model.arch.kind == ModelKind::decoder) {
    table.notes.push_back("lm_head is tied to the token embeddings and counted once, under embedding.");
  }
  table.notes.push_back("active: parameters one token goes through, embedding and LM head included.");
  return table;
}

Table published_table(const ModelInfo& model, const ParamBreakdown& p) {
  Table table;
  table.key = "published";
  table.title = "Published vs computed";
  table.add_column("quantity", "Quantity");
  table.add_column("computed_b", "Computed", "B", 3, Align::right);
  table.add_column("published_b", "Published", "B", 3, Align::right);
  table.add_column("difference_pct", "Difference", "%", 2, Align::right);
  table.add_column("source", "Source");
  auto row = [&](std::string quantity, std::int64_t computed, std::int64_t published) {
    const double difference = 100.0 * (static_cast<double>(computed) / static_cast<double>(published) - 1.0);
    table.add_row({std::move(quantity), billions(computed), billions(published), difference, model.published.source});
  };
  row("total", p.total, model.published.total);
  if (model.published.active) row("active", p.active, *model.published.active);
  if (!model.published.note.empty()) table.notes.push_back(model.published.note);
  return table;
}

Table derived_table(const ModelInfo& model, const ParamBreakdown& p) {
  const ModelArch& arch = model.arch;
  Table table;
  table.key = "derived";
  table.title = "Derived figures";
  table.add_column("quantity", "Quantity");
  table.add_column("value", "Value", "", 2, Align::right);
  table.add_column("unit", "Unit");
  const double total = static_cast<double>(p.total);
  table.add_row({"weights_bf16"s, total * 2 / 1e9, "GB"s});
  table.add_row({"weights_fp8"s, total * 1 / 1e9, "GB"s});
  table.add_row({"weights_int4"s, total * 0.5 / 1e9, "GB"s});
  if (arch.kind == ModelKind::encoder) {
    table.add_row({"kv_cache_bf16_per_token"s, Cell{}, "bytes"s});
  } else {
    table.add_row({"kv_cache_bf16_per_token"s, static_cast<std::int64_t>(workloads::kv_cache_bytes_per_token(arch, 2)),
                   "bytes"s});
  }
  table.add_row({"forward_flops_per_token"s, workloads::forward_flops_per_token(arch, 0) / 1e9, "GFLOP"s});
  table.notes.push_back("GB = 1e9 bytes. int4 weights exclude quantization scales (about +3% at group size 128).");
  if (arch.kind == ModelKind::encoder) {
    table.notes.push_back("Encoders keep no KV cache.");
  } else if (arch.mla) {
    table.notes.push_back(
        "MLA caches the compressed latent and the RoPE key: layers x (kv_lora_rank + qk_rope_head_dim).");
  } else {
    table.notes.push_back("KV cache: 2 x layers x kv_heads x head_dim elements per token.");
  }
  table.notes.push_back(
      "forward_flops_per_token: 2 x active matrix parameters, without attention over the context "
      "(add 2 x layers x heads x (qk_dim + v_dim) per attended position).");
  return table;
}

}  // namespace

void register_models_command(CLI::App& app, AppContext& ctx) {
  CLI::App* models = app.add_subcommand("models", "The model catalog: architectures and parameter counts");
  models->require_subcommand(1);

  CLI::App* list = models->add_subcommand("list", "List the catalog's models with their computed sizes");
  auto family = std::make_shared<std::string>();
  list->add_option("--family", *family, "Only models of this family (llama-3.1, mixtral, ...)");
  list->fallthrough();
  list->callback([&ctx, family] {
    const auto& catalog = ctx.models();
    std::vector<const ModelInfo*> selected;
    if (!family->empty()) {
      // Families are matched like names: case and punctuation do not matter.
      NameIndex families;
      const auto names = catalog.families();
      for (std::size_t i = 0; i < names.size(); ++i) families.add(i, names[i], {});
      auto id = families.find(*family);
      if (!id) throw NotFoundError("model family", *family, families.suggest(*family));
      for (const auto& model : catalog.all()) {
        if (model.family == names[*id]) selected.push_back(&model);
      }
    } else {
      for (const auto& model : catalog.all()) selected.push_back(&model);
    }
    // By family, then by size: reads better than file order (Llama-2-13B before Llama-2-7B).
    std::stable_sort(selected.begin(), selected.end(), [](const ModelInfo* a, const ModelInfo* b) {
      if (a->family != b->family) return a->family < b->family;
      return a->params().total < b->params().total;
    });
    ctx.out << report::render(list_table(selected), ctx.format());
  });

  CLI::App* show = models->add_subcommand("show", "Show one model: architecture, parameter breakdown, sizes");
  auto name = std::make_shared<std::string>();
  show->add_option("name", *name, "Model name or alias (case and punctuation do not matter)")->required();
  show->fallthrough();
  show->callback([&ctx, name] {
    const ModelInfo& model = ctx.models().get(*name);
    const ParamBreakdown params = model.params();
    std::vector<Table> tables{architecture_table(model), params_table(model, params), published_table(model, params),
                              derived_table(model, params)};
    ctx.out << report::render(tables, ctx.format());
  });
}

}  // namespace gpuscout::cli
