// gpuscout gpus list|show|compare: the GPU spec database (data/gpus/*.toml) as tables.
// Every listing is a report::Table rendered in the global --format; results go to ctx.out only.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <tuple>

#include "context.hpp"
#include "gpuscout/model/spec_sheet_fit.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/specs/spec_json.hpp"
#include "gpuscout/util/names.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::cli {
namespace {

using report::Align;
using report::Cell;
using report::Format;
using report::Table;
using specs::Figure;
using specs::GpuSpec;
using specs::Precision;

constexpr const char* kUncertainNote = "? = uncertain value; `gpuscout gpus show NAME` gives the reason.";
constexpr const char* kDenseNote = "Peaks are dense (no 2:4 sparsity); TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s.";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Derived numbers are rounded here, once, so every format shows the same digits.
std::optional<double> rounded(std::optional<double> value, int digits) {
  if (!value) return std::nullopt;
  const double scale = std::pow(10.0, digits);
  return std::round(*value * scale) / scale;
}

Cell number(std::optional<double> value) {
  return value ? Cell{*value} : Cell{};
}

// A figure as a cell: a number, except that table and md mark an uncertain value with "?"
// (json and csv keep numbers; the reason is in `gpus show`).
Cell figure_cell(const Figure* figure, Format format, bool& any_uncertain) {
  if (figure == nullptr) return Cell{};
  if (figure->is_uncertain() && (format == Format::table || format == Format::md)) {
    any_uncertain = true;
    return Cell{fmt::format("{}?", figure->value)};
  }
  return Cell{figure->value};
}

Cell figure_cell(const std::optional<Figure>& figure, Format format, bool& any_uncertain) {
  return figure_cell(figure ? &*figure : nullptr, format, any_uncertain);
}

void print(AppContext& ctx, const std::vector<Table>& tables) {
  ctx.out << report::render(tables, ctx.format());
}

// ---- gpus list -------------------------------------------------------------------------------

struct ListOptions {
  std::string vendor;
  std::string arch;
};

void run_list(AppContext& ctx, const ListOptions& options) {
  const auto& db = ctx.specs();
  const Format format = ctx.format();
  std::vector<const GpuSpec*> selected;
  std::set<std::string> vendors, archs;
  for (const auto& spec : db.all()) {
    vendors.insert(spec.vendor);
    archs.insert(spec.architecture);
    if (!options.vendor.empty() && lower(spec.vendor) != lower(options.vendor)) continue;
    if (!options.arch.empty() && !normalize_name(spec.architecture).starts_with(normalize_name(options.arch))) continue;
    selected.push_back(&spec);
  }
  if (selected.empty() && !db.all().empty()) {
    if (!options.vendor.empty() && std::none_of(vendors.begin(), vendors.end(), [&](const std::string& v) {
          return lower(v) == lower(options.vendor);
        })) {
      throw UsageError(
          fmt::format("--vendor: no GPU from '{}'; known vendors: {}", options.vendor, fmt::join(vendors, ", ")));
    }
    if (!options.arch.empty()) {
      throw UsageError(fmt::format("--arch: no GPU matches '{}'{}; known architectures: {}", options.arch,
                                   options.vendor.empty() ? "" : fmt::format(" from vendor '{}'", options.vendor),
                                   fmt::join(archs, ", ")));
    }
  }
  std::stable_sort(selected.begin(), selected.end(), [](const GpuSpec* a, const GpuSpec* b) {
    return std::tie(a->vendor, a->release_year, a->name) < std::tie(b->vendor, b->release_year, b->name);
  });

  Table table;
  table.key = "gpus";
  table.add_column("name", "GPU");
  table.add_column("vendor", "Vendor");
  table.add_column("architecture", "Arch");
  table.add_column("memory_gb", "Memory", "GB", -1, Align::right);
  table.add_column("bandwidth_gbs", "Bandwidth", "GB/s", -1, Align::right);
  table.add_column("bf16_tflops", "BF16", "TFLOP/s", -1, Align::right);
  table.add_column("fp8_tflops", "FP8", "TFLOP/s", -1, Align::right);
  table.add_column("tdp_w", "TDP", "W", -1, Align::right);
  table.add_column("price_usd", "Price", "USD", -1, Align::right);
  table.add_column("cloud_usd_per_gpu_hr", "Cloud", "$/GPU-hr", -1, Align::right);
  bool any_uncertain = false;
  for (const GpuSpec* spec : selected) {
    const auto* purchase = spec->reference_purchase();
    const auto* cloud = spec->reference_cloud();
    table.add_row({spec->name, spec->vendor, spec->architecture, figure_cell(&spec->memory_gb, format, any_uncertain),
                   figure_cell(&spec->memory_bandwidth_gbs, format, any_uncertain),
                   figure_cell(spec->peak(Precision::bf16), format, any_uncertain),
                   figure_cell(spec->peak(Precision::fp8), format, any_uncertain),
                   figure_cell(&spec->tdp_w, format, any_uncertain), purchase ? Cell{purchase->usd} : Cell{},
                   cloud ? Cell{cloud->usd_per_gpu_hr} : Cell{}});
  }
  table.notes.push_back(kDenseNote);
  table.notes.push_back(
      "Price: reference purchase price (basis varies: bare GPU, system/8, all-in); Cloud: reference "
      "on-demand $/GPU-hr. Sources and dates: `gpuscout gpus show NAME`.");
  if (any_uncertain) table.notes.push_back(kUncertainNote);
  ctx.out << report::render(table, format);
}

// ---- gpus show -------------------------------------------------------------------------------

std::string join(const std::vector<std::string>& items) {
  return items.empty() ? std::string("-") : fmt::format("{}", fmt::join(items, ", "));
}

Table identity_table(const GpuSpec& spec) {
  Table t;
  t.key = "identity";
  t.title = spec.name;
  t.add_column("field", "Field");
  t.add_column("value", "Value");
  auto row = [&](std::string field, std::string value) { t.add_row({std::move(field), std::move(value)}); };
  row("name", spec.name);
  row("aliases", join(spec.aliases));
  row("vendor", spec.vendor);
  row("architecture", spec.architecture);
  row("chip", spec.chip);
  if (spec.compute_capability) row("compute_capability", *spec.compute_capability);
  if (spec.gfx_target) row("gfx_target", *spec.gfx_target);
  row("form_factor", spec.form_factor);
  row("release_year", fmt::format("{}", spec.release_year));
  std::vector<std::string> ids;
  for (auto id : spec.pci_device_ids) ids.push_back(fmt::format("0x{:04x}", id));
  row("pci_device_ids", join(ids));
  row("memory.type", spec.memory_type);
  row("interconnect.scale_up", spec.scale_up_label() + (spec.bridge_only ? " (bridge only)" : ""));
  if (!spec.host_link.empty()) row("interconnect.host_link", spec.host_link);
  row("features.fp8", spec.fp8 ? "yes" : "no");
  row("features.transformer_engine",
      spec.transformer_engine + (spec.transformer_engine_uncertain.empty()
                                     ? ""
                                     : fmt::format(" (uncertain: {})", spec.transformer_engine_uncertain)));
  row("features.sparsity_2to4", spec.sparsity_2to4 ? "yes (sparse peaks are 2x the dense ones below)" : "no");
  row("sources.default", spec.default_source);
  for (const auto& other : spec.other_sources) row("sources.also", other);
  row("file", spec.origin);
  return t;
}

Table figures_table(const GpuSpec& spec, Format format) {
  Table t;
  t.key = "figures";
  t.title = "Figures (dense peaks)";
  t.add_column("field", "Field");
  t.add_column("label", "Figure");
  t.add_column("value", "Value", "", -1, Align::right);
  t.add_column("unit", "Unit");
  t.add_column("source", "Source");
  t.add_column("uncertain", "Uncertain");
  bool any_uncertain = false;
  for (const auto& field : specs::figure_fields()) {
    const Figure* figure = specs::find_figure(spec, field.key);
    if (figure == nullptr) {
      // An absent peak means the hardware lacks that precision; other absent figures are unknown.
      if (field.key.starts_with("peak_dense.")) {
        t.add_row({field.key, field.label, Cell{}, field.unit, "not supported by this GPU", std::string()});
      }
      continue;
    }
    t.add_row({field.key, field.label, figure_cell(figure, format, any_uncertain), field.unit, figure->source,
               Cell{figure->uncertain}});
  }
  t.notes.push_back(kDenseNote);
  if (any_uncertain) t.notes.push_back("? = uncertain value; the Uncertain column says why.");
  return t;
}

Table derived_table(const GpuSpec& spec) {
  Table t;
  t.key = "derived";
  t.title = "Derived";
  t.add_column("metric", "Metric");
  t.add_column("value", "Value", "", -1, Align::right);
  t.add_column("unit", "Unit");
  t.add_column("from", "Computed from");
  for (Precision p : {Precision::bf16, Precision::fp8}) {
    if (!spec.peak(p)) continue;
    const std::string name(specs::to_string(p));
    t.add_row({fmt::format("{}_tflops_per_w", name), number(rounded(specs::tflops_per_watt(spec, p), 3)),
               fmt::format("{}/W", specs::peak_unit(p)), fmt::format("peak_dense.{} / power.tdp_w", name)});
    t.add_row({fmt::format("usd_per_dense_{}_tflops", name), number(rounded(specs::usd_per_dense_tflops(spec, p), 2)),
               fmt::format("USD per {}", specs::peak_unit(p)), "reference purchase price / peak"});
    t.add_row({fmt::format("cloud_usd_per_hr_per_dense_{}_pflops", name),
               number(rounded(specs::cloud_usd_per_hr_per_pflops(spec, p), 3)), "$/hr per PFLOP/s",
               "reference cloud price / peak"});
  }
  return t;
}

Table purchase_table(const GpuSpec& spec) {
  Table t;
  t.key = "purchase_prices";
  t.title = "Purchase prices (first = reference)";
  t.add_column("usd", "Price", "USD", -1, Align::right);
  t.add_column("date", "Date");
  t.add_column("basis", "Basis");
  t.add_column("source", "Source");
  t.add_column("uncertain", "Uncertain");
  for (const auto& p : spec.purchase_prices) {
    t.add_row({p.usd, p.date, p.basis, p.source, p.uncertain});
  }
  return t;
}

Table cloud_table(const GpuSpec& spec) {
  Table t;
  t.key = "cloud_prices";
  t.title = "Cloud prices (first = reference)";
  t.add_column("usd_per_gpu_hr", "Price", "$/GPU-hr", -1, Align::right);
  t.add_column("provider", "Provider");
  t.add_column("sku", "SKU");
  t.add_column("pricing", "Pricing");
  t.add_column("date", "Date");
  t.add_column("source", "Source");
  for (const auto& c : spec.cloud_prices) {
    std::string sku = c.sku;
    if (!c.region.empty()) sku += fmt::format(" ({})", c.region);
    t.add_row({c.usd_per_gpu_hr, c.provider, sku, c.pricing, c.date,
               c.uncertain.empty() ? c.source : fmt::format("{} [uncertain: {}]", c.source, c.uncertain)});
  }
  return t;
}

Table notes_table(const GpuSpec& spec) {
  Table t;
  t.key = "notes";
  t.title = "Notes and cross-checks";
  t.add_column("kind", "Kind");
  t.add_column("text", "Text");
  for (const auto& n : spec.notes) t.add_row({std::string("note"), n});
  for (const auto& c : spec.cross_checks) t.add_row({std::string("cross_check"), c});
  return t;
}

void run_show(AppContext& ctx, const std::string& name) {
  const GpuSpec& spec = ctx.specs().get(name);
  const Format format = ctx.format();
  if (format == Format::json) {
    ctx.out << specs::to_json(spec).dump(2) << "\n";
    return;
  }
  std::vector<Table> tables{identity_table(spec), figures_table(spec, format), derived_table(spec)};
  if (!spec.purchase_prices.empty()) tables.push_back(purchase_table(spec));
  if (!spec.cloud_prices.empty()) tables.push_back(cloud_table(spec));
  tables.push_back(notes_table(spec));
  print(ctx, tables);
}

// ---- gpus compare ----------------------------------------------------------------------------

// One compared metric: its key and unit, and how to read it (the figure when there is one, so
// uncertainty shows; otherwise a derived number).
struct Metric {
  std::string key;
  std::string unit;
  std::function<const Figure*(const GpuSpec&)> figure;
  std::function<std::optional<double>(const GpuSpec&)> value;
};

std::vector<Metric> compare_metrics() {
  std::vector<Metric> metrics;
  auto fig = [](std::string key, std::string unit, std::string figure_key) {
    return Metric{std::move(key), std::move(unit),
                  [figure_key](const GpuSpec& s) { return specs::find_figure(s, figure_key); }, nullptr};
  };
  auto val = [](std::string key, std::string unit, std::function<std::optional<double>(const GpuSpec&)> f) {
    return Metric{std::move(key), std::move(unit), nullptr, std::move(f)};
  };
  for (Precision p : specs::kAllPrecisions) {
    const std::string name(specs::to_string(p));
    metrics.push_back(fig(name + (p == Precision::int8 ? "_tops" : "_tflops"), std::string(specs::peak_unit(p)),
                          "peak_dense." + name));
  }
  metrics.push_back(fig("memory_gb", "GB", "memory.size_gb"));
  metrics.push_back(fig("bandwidth_gbs", "GB/s", "memory.bandwidth_gbs"));
  metrics.push_back(fig("l2_mb", "MB", "memory.l2_mb"));
  metrics.push_back(fig("scale_up_bw_gbs_bidir", "GB/s", "interconnect.scale_up_bw_gbs_bidir"));
  metrics.push_back(fig("pcie_gen", "", "interconnect.pcie_gen"));
  metrics.push_back(fig("tdp_w", "W", "power.tdp_w"));
  metrics.push_back(val("bf16_tflops_per_w", "TFLOP/s/W",
                        [](const GpuSpec& s) { return rounded(specs::tflops_per_watt(s, Precision::bf16), 3); }));
  metrics.push_back(val("usd_per_dense_bf16_tflops", "USD per TFLOP/s",
                        [](const GpuSpec& s) { return rounded(specs::usd_per_dense_tflops(s, Precision::bf16), 2); }));
  metrics.push_back(val("price_usd", "USD", [](const GpuSpec& s) -> std::optional<double> {
    if (const auto* p = s.reference_purchase()) return p->usd;
    return std::nullopt;
  }));
  metrics.push_back(val("cloud_usd_per_gpu_hr", "$/GPU-hr", [](const GpuSpec& s) -> std::optional<double> {
    if (const auto* c = s.reference_cloud()) return c->usd_per_gpu_hr;
    return std::nullopt;
  }));
  return metrics;
}

std::optional<double> metric_value(const Metric& metric, const GpuSpec& spec) {
  if (metric.figure) {
    const Figure* figure = metric.figure(spec);
    return figure ? std::optional<double>(figure->value) : std::nullopt;
  }
  return metric.value(spec);
}

struct CompareOptions {
  std::vector<std::string> names;
  std::string model;  // empty: no model table
  std::string weights = "bf16";
};

// Spec-sheet bounds of one model on each compared GPU (src/model/spec_sheet_fit.cpp).
Table model_fit_table(AppContext& ctx, const std::vector<const GpuSpec*>& gpus, const CompareOptions& options) {
  const workloads::ModelInfo& model = ctx.models().get(options.model);
  const model::Quantization weights = model::parse_quantization(options.weights, "--weights");
  const model::FitAssumptions assumptions;
  Table table;
  table.key = "model_fit";
  table.title = fmt::format("{} with {} weights: spec-sheet bounds", model.name, weights.name);
  table.add_column("metric", "Metric");
  table.add_column("unit", "Unit");
  std::vector<model::SpecSheetFit> fits;
  for (const GpuSpec* spec : gpus) {
    table.add_column(spec->name, spec->name, "", 1, Align::right);
    fits.push_back(model::spec_sheet_fit(*spec, model, weights, assumptions));
  }
  auto add = [&](std::string key, std::string unit, auto value) {
    std::vector<Cell> row{std::move(key), std::move(unit)};
    for (const auto& fit : fits) row.push_back(value(fit));
    table.add_row(std::move(row));
  };
  auto optional_cell = [](std::optional<double> v) -> Cell { return v ? Cell(*v) : Cell(); };
  add("weights_gib", "GiB", [](const model::SpecSheetFit& f) -> Cell { return f.weight_gib; });
  add("gpus_needed", "GPUs",
      [](const model::SpecSheetFit& f) -> Cell { return f.gpus_needed ? Cell(std::int64_t{*f.gpus_needed}) : Cell(); });
  add("kv_cache_room_tokens", "tokens", [](const model::SpecSheetFit& f) {
    return f.kv_tokens_capacity ? Cell(static_cast<std::int64_t>(*f.kv_tokens_capacity)) : Cell();
  });
  add("decode_bound_batch1", "tokens/s",
      [&](const model::SpecSheetFit& f) { return optional_cell(f.decode_tokens_per_s_bound); });
  add("prefill_bound", "tokens/s",
      [&](const model::SpecSheetFit& f) { return optional_cell(f.prefill_tokens_per_s_bound); });
  {
    std::vector<Cell> row{std::string("cloud_usd_per_hr"), std::string("$/hr")};
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const auto* cloud = gpus[i]->reference_cloud();
      row.push_back(cloud != nullptr && fits[i].gpus_needed ? Cell(cloud->usd_per_gpu_hr * *fits[i].gpus_needed)
                                                            : Cell());
    }
    table.add_row(std::move(row));
  }
  table.notes = model::describe(assumptions);
  table.notes.push_back("cloud_usd_per_hr: GPUs needed x the reference on-demand price (gpuscout gpus show NAME)");
  table.notes.push_back(fmt::format("{}: {:.2f}B parameters, KV cache {:.0f} KiB per token (BF16, all GPUs)",
                                    model.name, static_cast<double>(model.params().total) / 1e9,
                                    workloads::kv_cache_bytes_per_token(model.arch, 2.0) / 1024));
  for (const auto& fit : fits) {
    for (const auto& note : fit.notes) table.notes.push_back(note);
  }
  return table;
}

void run_compare(AppContext& ctx, const CompareOptions& options) {
  const auto& names = options.names;
  if (names.size() < 2) throw UsageError("gpus compare: expected at least two GPU names");
  const Format format = ctx.format();
  std::vector<const GpuSpec*> gpus;
  for (const auto& name : names) {
    const GpuSpec* spec = &ctx.specs().get(name);
    if (std::find(gpus.begin(), gpus.end(), spec) != gpus.end()) {
      throw UsageError(fmt::format("gpus compare: '{}' names {} a second time", name, spec->name));
    }
    gpus.push_back(spec);
  }

  Table values;
  values.key = "compare";
  values.title = "Dense peaks and figures";
  values.add_column("metric", "Metric");
  values.add_column("unit", "Unit");
  Table ratios;
  ratios.key = "ratio_to_first";
  ratios.title = fmt::format("Ratio to {}", gpus.front()->name);
  ratios.add_column("metric", "Metric");
  for (const GpuSpec* spec : gpus) {
    values.add_column(spec->name, spec->name, "", -1, Align::right);
    ratios.add_column(spec->name, spec->name, "", 2, Align::right);
  }

  bool any_uncertain = false;
  std::vector<std::string> uncertain_notes;
  for (const Metric& metric : compare_metrics()) {
    std::vector<Cell> row{metric.key, metric.unit};
    std::vector<Cell> ratio_row{metric.key};
    const auto base = metric_value(metric, *gpus.front());
    for (const GpuSpec* spec : gpus) {
      if (metric.figure) {
        const Figure* figure = metric.figure(*spec);
        row.push_back(figure_cell(figure, format, any_uncertain));
        if (figure != nullptr && figure->is_uncertain()) {
          uncertain_notes.push_back(fmt::format("{} {}: {}", spec->name, metric.key, figure->uncertain));
        }
      } else {
        row.push_back(number(metric.value(*spec)));
      }
      ratio_row.push_back(number(rounded(specs::ratio(metric_value(metric, *spec), base), 3)));
    }
    values.add_row(std::move(row));
    ratios.add_row(std::move(ratio_row));
    if (metric.key == "l2_mb") {
      // The scale-up link type is text; it sits with the interconnect rows and has no ratio.
      std::vector<Cell> link{std::string("scale_up"), std::string("")};
      for (const GpuSpec* spec : gpus) {
        std::string label = spec->scale_up_label();
        if (spec->bridge_only) label += " (bridge)";
        link.emplace_back(std::in_place_type<std::string>, std::move(label));
      }
      values.add_row(std::move(link));
    }
  }
  values.notes.push_back(kDenseNote);
  values.notes.push_back("n/a: the GPU lacks that precision, or the figure is unknown.");
  values.notes.push_back(
      "Price: reference purchase price (bases differ: bare GPU, system/8, all-in); cloud: reference on-demand "
      "$/GPU-hr. See `gpuscout gpus show NAME`.");
  if (any_uncertain) values.notes.push_back(kUncertainNote);
  for (const auto& note : uncertain_notes) values.notes.push_back("uncertain: " + note);
  std::vector<Table> tables{values, ratios};
  if (!options.model.empty()) tables.push_back(model_fit_table(ctx, gpus, options));
  print(ctx, tables);
}

}  // namespace

void register_gpus_command(CLI::App& app, AppContext& ctx) {
  CLI::App* gpus = app.add_subcommand("gpus", "The GPU spec database: list, show and compare GPUs (dense peaks)");
  // Checked in a callback rather than with require_subcommand(1), so that a bad flag such as
  // `gpus --no-such-flag` is reported as that flag rather than as a missing subcommand.
  gpus->callback([gpus] {
    if (gpus->get_subcommands().empty()) throw CLI::RequiredError("A subcommand (list, show or compare)");
  });

  auto list_options = std::make_shared<ListOptions>();
  CLI::App* list = gpus->add_subcommand("list", "One row per GPU: memory, bandwidth, BF16/FP8 dense peaks, TDP, price");
  list->add_option("--vendor", list_options->vendor, "Only GPUs from this vendor (NVIDIA, AMD)");
  list->add_option("--arch", list_options->arch, "Only GPUs of this architecture (Hopper, Blackwell, CDNA 3, ...)");
  list->callback([&ctx, list_options] { run_list(ctx, *list_options); });

  auto show_name = std::make_shared<std::string>();
  CLI::App* show = gpus->add_subcommand("show", "Every figure of one GPU, each with its source");
  show->add_option("name", *show_name, "GPU name or alias (h100, \"NVIDIA H200\", mi300x)")->required();
  show->callback([&ctx, show_name] { run_show(ctx, *show_name); });

  auto compare_options = std::make_shared<CompareOptions>();
  CLI::App* compare = gpus->add_subcommand("compare", "GPUs side by side, with ratios to the first one");
  compare->add_option("names", compare_options->names, "Two or more GPU names or aliases")->required();
  compare->add_option("--model", compare_options->model,
                      "Add a table of spec-sheet bounds for this model on each GPU (memory fit, KV room, decode and "
                      "prefill rooflines)");
  compare
      ->add_option("--weights", compare_options->weights,
                   "Weight format for --model: bf16, fp16, fp32, fp8, int8 or int4")
      ->capture_default_str();
  compare->callback([&ctx, compare_options] { run_compare(ctx, *compare_options); });

  for (CLI::App* sub : {list, show, compare}) sub->fallthrough();
}

}  // namespace gpuscout::cli
