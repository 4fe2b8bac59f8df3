// gpuscout tco: owning vs renting one GPU type. Owner cost per GPU-hour from data/tco.toml defaults
// (overridden by --config FILE.toml, --years and --set key=value, in that order) against cloud
// on-demand and reserved prices; every input is printed with its value, range, origin and source.
// The model is include/gpuscout/tco/tco.hpp; this file only reads flags and prints.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/tco/tco.hpp"

namespace gpuscout::cli {
namespace {

using report::Align;
using report::Cell;
using report::Table;

struct TcoOptions {
  std::string gpu;
  double gpus = 1;
  std::optional<double> years;
  std::string config;
  std::vector<std::string> sets;
  std::optional<double> tokens_per_s;
};

double round_to(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

Cell optional_cell(const std::optional<double>& value, int digits) {
  return value ? Cell{round_to(*value, digits)} : Cell{};
}

Table cost_table(const tco::TcoResult& r) {
  Table t;
  t.key = "cost";
  t.title = fmt::format("Cost of {} GPU(s) over {} years: own vs rent", r.gpus, r.years);
  t.add_column("option", "Option");
  t.add_column("usd_per_gpu_hr", "Per GPU-hour", "USD", 3, Align::right);
  t.add_column("usd_per_useful_gpu_hr", "Per useful GPU-hour", "USD", 3, Align::right);
  t.add_column("total_usd", "Total", "USD", 0, Align::right);
  t.add_column("usd_per_mtok", "Per M tokens", "USD", 4, Align::right);
  t.add_column("source", "Source");
  t.add_row({std::string("own"), round_to(r.usd_per_gpu_hr, 4), round_to(r.usd_per_useful_gpu_hr, 4),
             std::round(r.total_usd), optional_cell(r.usd_per_mtok, 4), std::string("this model, inputs below")});
  for (const auto& rent : r.rent) {
    t.add_row({"rent " + rent.label, round_to(rent.usd_per_gpu_hr, 4), round_to(rent.usd_per_useful_gpu_hr, 4),
               std::round(rent.total_usd), optional_cell(rent.usd_per_mtok, 4), rent.source});
  }
  t.notes.push_back(
      "Per useful GPU-hour: owning and reserved contracts pay every hour, so divide by utilization; on-demand is "
      "billed only for the hours used. Total: the same useful GPU-hours (hours x years x utilization x GPUs) for "
      "every option; reserved pays all hours.");
  if (r.tokens_per_s) {
    t.notes.push_back(fmt::format(
        "Per M tokens: USD per useful GPU-hour x {} GPUs / ({} tokens/s x 3600) x 1e6, the tokens/s given for all "
        "GPUs together while busy.",
        r.gpus, *r.tokens_per_s));
  } else {
    t.notes.push_back("Per M tokens: give --tokens-per-s (throughput of all the GPUs together).");
  }
  if (r.break_even_utilization) {
    t.notes.push_back(fmt::format(
        "Owning costs less than the on-demand price above {:.1f}% utilization (owner $/GPU-hr / on-demand price).",
        *r.break_even_utilization * 100));
  }
  return t;
}

Table owner_table(const tco::TcoResult& r) {
  Table t;
  t.key = "owner";
  t.title = "Owner cost per GPU (specs.md §8.4)";
  t.add_column("item", "Item");
  t.add_column("usd_per_year", "Per year", "USD", 0, Align::right);
  t.add_column("usd_per_gpu_hr", "Per GPU-hour", "USD", 4, Align::right);
  t.add_column("share_pct", "Share", "%", 1, Align::right);
  t.add_column("formula", "Formula");
  auto row = [&](std::string item, double annual, std::string formula) {
    t.add_row({std::move(item), std::round(annual), round_to(annual / tco::kHoursPerYear, 4),
               round_to(100 * annual / r.annual_total_usd, 1), std::move(formula)});
  };
  row("capital", r.annual_capital_usd,
      fmt::format("(capex ${:.0f} - residual discounted) x CRF {:.5f}; capex = server / GPUs per server x (1 + "
                  "network) + install",
                  r.capex_per_gpu_usd, r.crf));
  row("energy", r.annual_energy_usd,
      fmt::format("{:.4f} kW provisioned (IT x (1 + network/storage)) x load x PUE x 8760 h x $/kWh",
                  r.it_kw_provisioned));
  row("colocation", r.annual_colo_usd, fmt::format("{:.4f} kW x $/kW-month x 12", r.it_kw_provisioned));
  row("maintenance", r.annual_maintenance_usd, "maintenance fraction x capex");
  row("staff", r.annual_staff_usd, "staff USD per GPU-year");
  row("total", r.annual_total_usd, "sum; per GPU-hour = / 8760");
  return t;
}

Table inputs_table(const tco::TcoInputs& in) {
  Table t;
  t.key = "inputs";
  t.title = fmt::format("Inputs for {} (override with --config FILE.toml or --set key=value)", in.gpu);
  t.add_column("key", "Key");
  t.add_column("value", "Value", "", -1, Align::right);
  t.add_column("low", "Low", "", -1, Align::right);
  t.add_column("high", "High", "", -1, Align::right);
  t.add_column("unit", "Unit");
  t.add_column("origin", "Origin");
  t.add_column("source", "Source");
  for (const auto& p : in.all()) {
    std::string source = p.source;
    if (!p.note.empty()) source = source.empty() ? p.note : fmt::format("{} [{}]", source, p.note);
    t.add_row(
        {p.key, round_to(p.value, 6), optional_cell(p.low, 6), optional_cell(p.high, 6), p.unit, p.origin, source});
  }
  t.notes = in.notes;
  t.notes.push_back("ASSUMPTION in a source: no primary source was found; replace it with your own figure.");
  return t;
}

void run_tco(AppContext& ctx, const TcoOptions& o) {
  if (!(o.gpus >= 1) || std::floor(o.gpus) != o.gpus) {
    throw UsageError(fmt::format("--gpus: must be a whole number of at least 1, got {}", o.gpus));
  }
  if (o.years && !(*o.years >= 1)) throw UsageError(fmt::format("--years: must be at least 1, got {}", *o.years));
  if (o.tokens_per_s && !(*o.tokens_per_s > 0)) {
    throw UsageError(fmt::format("--tokens-per-s: must be above 0, got {}", *o.tokens_per_s));
  }
  const auto& gpu = ctx.specs().get(o.gpu);
  const auto defaults = tco::TcoDefaults::load(ctx.data());
  auto inputs = tco::TcoInputs::resolve(defaults, gpu);
  if (!o.config.empty()) {
    std::ifstream file(o.config);
    if (!file) throw UsageError(fmt::format("--config: cannot read '{}'", o.config));
    std::stringstream text;
    text << file.rdbuf();
    inputs.apply_config({o.config, o.config, text.str()});
  }
  if (o.years) inputs.set("years", *o.years, "--years");
  for (const auto& assignment : o.sets) inputs.set_from_text(assignment);
  inputs.require_purchase_price();
  const auto result = tco::compute_tco(inputs, o.gpus, o.tokens_per_s);
  ctx.out << report::render(std::vector<Table>{cost_table(result), owner_table(result), inputs_table(inputs)},
                            ctx.format());
}

}  // namespace

void register_tco_command(CLI::App& app, AppContext& ctx) {
  auto o = std::make_shared<TcoOptions>();
  CLI::App* tco =
      app.add_subcommand("tco", "Total cost of ownership: owning a GPU type vs renting it, every input listed");
  tco->add_option("--gpu", o->gpu, "GPU name or alias from the spec database")->required();
  tco->add_option("--gpus", o->gpus, "How many GPUs (totals scale with it)");
  tco->add_option("--years", o->years, "Useful life and horizon in years (the 'years' parameter)");
  tco->add_option("--config", o->config, "TOML file of key = number overrides (keys as in the inputs table)");
  tco->add_option("--set", o->sets, "key=value override, repeatable; applied after --config and --years");
  tco->add_option("--tokens-per-s", o->tokens_per_s, "Throughput of all the GPUs together, for cost per M tokens");
  tco->fallthrough();
  tco->callback([&ctx, o] { run_tco(ctx, *o); });
}

}  // namespace gpuscout::cli
