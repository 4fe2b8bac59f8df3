#include "gpuscout/tco/tco.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::tco {

using data::TomlEntry;

namespace {

constexpr std::string_view kReservedLabel = "reserved 3-yr contract (billed every hour)";

// Keys whose value is a fraction in [0, 1].
bool is_fraction(std::string_view key) {
  return key == "network_capex_fraction" || key == "network_storage_power_overhead" || key == "avg_load_factor" ||
         key == "cost_of_capital" || key == "maintenance_fraction_per_year" || key == "utilization" ||
         key == "residual_value_fraction";
}

Parameter read_parameter(const TomlEntry& e, const std::string& key, const std::string& value_key,
                         const std::string& low_key, const std::string& high_key, const std::string& unit,
                         const std::string& source_key) {
  Parameter p;
  p.key = key;
  p.value = e.required_number(value_key, 0);
  p.low = e.optional_number(low_key, 0);
  p.high = e.optional_number(high_key, 0);
  if (p.low && p.high && *p.low > *p.high) e.fail(low_key, fmt::format("low {} exceeds high {}", *p.low, *p.high));
  if ((p.low && p.value < *p.low) || (p.high && p.value > *p.high)) {
    e.fail(value_key, fmt::format("{} lies outside its range [{}, {}]", p.value, p.low.value_or(p.value),
                                  p.high.value_or(p.value)));
  }
  p.unit = unit;
  p.source = e.required_string(source_key);
  p.origin = "default";
  return p;
}

}  // namespace

// ---- defaults -----------------------------------------------------------------------------------

TcoDefaults TcoDefaults::parse(const data::DataFile& file) {
  const toml::table table = data::parse_toml(file);
  TomlEntry root(table, file.origin, "");
  root.reject_unknown_keys({"parameter", "gpu"});
  TcoDefaults d;
  for (const TomlEntry& e : root.array_of_tables("parameter")) {
    e.reject_unknown_keys({"key", "value", "low", "high", "unit", "source", "note"});
    const std::string key = e.required_string("key");
    TomlEntry named = e;
    named.set_entry(key);
    if (d.find(key)) named.fail("key", "defined twice");
    Parameter p = read_parameter(named, key, "value", "low", "high", named.required_string("unit"), "source");
    p.note = named.optional_string("note").value_or("");
    if (is_fraction(key) && p.value > 1) named.fail("value", "a fraction must lie in [0, 1]");
    d.parameters_.push_back(std::move(p));
  }
  for (const char* required :
       {"pue", "electricity_usd_per_kwh", "colo_usd_per_kw_month", "network_capex_fraction", "install_usd_per_gpu",
        "network_storage_power_overhead", "avg_load_factor", "years", "cost_of_capital",
        "maintenance_fraction_per_year", "staff_usd_per_gpu_year", "utilization", "residual_value_fraction",
        "server_capex_overhead_factor", "server_power_overhead_factor"}) {
    if (!d.find(required)) root.fail("parameter", fmt::format("no [[parameter]] with key = \"{}\"", required));
  }
  if (d.find("years")->value < 1) root.fail("parameter", "years must be at least 1");
  if (d.find("utilization")->value <= 0) root.fail("parameter", "utilization must be above 0");

  for (const TomlEntry& e : root.array_of_tables("gpu")) {
    e.reject_unknown_keys({"gpu", "server_capex_usd", "server_capex_low", "server_capex_high", "gpus_per_server",
                           "capex_source", "it_power_kw_per_gpu", "it_power_low", "it_power_high", "power_source",
                           "reserved_usd_per_gpu_hr", "reserved_source"});
    GpuCostData g;
    g.gpu = e.required_string("gpu");
    TomlEntry named = e;
    named.set_entry(g.gpu);
    if (d.for_gpu(g.gpu)) named.fail("gpu", "listed twice");
    if (named.has("server_capex_usd")) {
      g.server_capex_usd = read_parameter(named, "server_capex_usd", "server_capex_usd", "server_capex_low",
                                          "server_capex_high", "USD per server", "capex_source");
      g.gpus_per_server = static_cast<double>(named.required_int("gpus_per_server", 1, 1024));
    }
    if (named.has("it_power_kw_per_gpu")) {
      g.it_power_kw_per_gpu =
          read_parameter(named, "it_power_kw_per_gpu", "it_power_kw_per_gpu", "it_power_low", "it_power_high",
                         "kW per GPU (max server IT power / GPUs)", "power_source");
    }
    if (named.has("reserved_usd_per_gpu_hr")) {
      Parameter p;
      p.key = "rent_reserved_usd_per_gpu_hr";
      p.value = named.required_number("reserved_usd_per_gpu_hr", 0);
      p.unit = "USD per GPU-hour";
      p.source = named.required_string("reserved_source");
      p.origin = "default";
      g.reserved_usd_per_gpu_hr = p;
    }
    d.gpus_.push_back(std::move(g));
  }
  return d;
}

TcoDefaults TcoDefaults::load(const data::DataSource& source) {
  auto file = source.read("tco.toml");
  if (!file) throw DataError(source.describe(), "", "tco.toml", "missing: the TCO defaults file");
  return parse(*file);
}

const Parameter* TcoDefaults::find(std::string_view key) const {
  for (const auto& p : parameters_) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

const GpuCostData* TcoDefaults::for_gpu(std::string_view name) const {
  for (const auto& g : gpus_) {
    if (g.gpu == name) return &g;
  }
  return nullptr;
}

// ---- inputs -------------------------------------------------------------------------------------

namespace {

bool is_on_demand(const specs::CloudPrice& c) {
  return c.pricing == "on-demand" || c.pricing == "pay-as-you-go";
}

}  // namespace

TcoInputs TcoInputs::resolve(const TcoDefaults& defaults, const specs::GpuSpec& gpu) {
  TcoInputs in;
  in.gpu = gpu.name;
  in.params_ = defaults.parameters();
  const GpuCostData* data = defaults.for_gpu(gpu.name);

  // Capex: a server price from tco.toml, else the spec DB's reference purchase price x server overhead.
  if (data && data->server_capex_usd) {
    in.params_.push_back(*data->server_capex_usd);
    in.params_.push_back({"gpus_per_server", *data->gpus_per_server, std::nullopt, std::nullopt, "GPUs",
                          data->server_capex_usd->source, "", "default"});
  } else if (const auto* price = gpu.reference_purchase()) {
    const double factor = defaults.find("server_capex_overhead_factor")->value;
    Parameter p{"server_capex_usd",
                price->usd * factor * 8,
                std::nullopt,
                std::nullopt,
                "USD per server",
                price->source,
                fmt::format("spec DB purchase price ${:.0f} ({}) x server overhead {} x 8 GPUs", price->usd,
                            price->basis, factor),
                "derived"};
    in.params_.push_back(p);
    in.params_.push_back({"gpus_per_server", 8, std::nullopt, std::nullopt, "GPUs", "assumption", "", "derived"});
    in.notes.push_back(
        fmt::format("{}: no server price in tco.toml; capex derived from the spec DB purchase price "
                    "(${:.0f}, basis: {}) x {} server overhead (Epoch)",
                    gpu.name, price->usd, price->basis, factor));
  } else {
    in.params_.push_back({"server_capex_usd", 0, std::nullopt, std::nullopt, "USD per server",
                          "no price known: set it with --set server_capex_usd=...", "", "missing"});
    in.params_.push_back({"gpus_per_server", 8, std::nullopt, std::nullopt, "GPUs", "assumption", "", "derived"});
    in.notes.push_back(fmt::format("{}: no purchase price known; set --set server_capex_usd=USD", gpu.name));
  }

  if (data && data->it_power_kw_per_gpu) {
    in.params_.push_back(*data->it_power_kw_per_gpu);
  } else {
    const double factor = defaults.find("server_power_overhead_factor")->value;
    in.params_.push_back({"it_power_kw_per_gpu", gpu.tdp_w.value / 1000.0 * factor, std::nullopt, std::nullopt,
                          "kW per GPU (max server IT power / GPUs)", gpu.tdp_w.source,
                          fmt::format("TDP {} W x server power overhead {}", gpu.tdp_w.value, factor), "derived"});
  }

  // Rent: the spec DB's reference on-demand price, and a reserved contract price when tco.toml has one.
  const specs::CloudPrice* on_demand = nullptr;
  for (const auto& c : gpu.cloud_prices) {
    if (is_on_demand(c)) {
      on_demand = &c;
      break;
    }
  }
  if (on_demand) {
    in.params_.push_back(
        {"rent_on_demand_usd_per_gpu_hr", on_demand->usd_per_gpu_hr, std::nullopt, std::nullopt, "USD per GPU-hour",
         on_demand->source,
         fmt::format("{} {} ({}, {})", on_demand->provider, on_demand->sku, on_demand->pricing, on_demand->date),
         "default"});
    const specs::CloudPrice* cheapest = on_demand;
    for (const auto& c : gpu.cloud_prices) {
      if (is_on_demand(c) && c.usd_per_gpu_hr < cheapest->usd_per_gpu_hr) cheapest = &c;
    }
    if (cheapest != on_demand) {
      in.params_.push_back({"rent_cheapest_on_demand_usd_per_gpu_hr", cheapest->usd_per_gpu_hr, std::nullopt,
                            std::nullopt, "USD per GPU-hour", cheapest->source,
                            fmt::format("{} {} ({})", cheapest->provider, cheapest->sku, cheapest->date), "default"});
    }
  }
  if (data && data->reserved_usd_per_gpu_hr) in.params_.push_back(*data->reserved_usd_per_gpu_hr);
  return in;
}

const Parameter* TcoInputs::find(std::string_view key) const {
  for (const auto& p : params_) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

bool TcoInputs::has(std::string_view key) const {
  return find(key) != nullptr;
}

double TcoInputs::get(std::string_view key) const {
  const Parameter* p = find(key);
  if (!p) throw std::logic_error(fmt::format("TCO input '{}' missing", key));
  return p->value;
}

std::vector<std::string> TcoInputs::keys() const {
  std::vector<std::string> out;
  for (const auto& p : params_) out.push_back(p.key);
  for (const char* optional :
       {"rent_on_demand_usd_per_gpu_hr", "rent_cheapest_on_demand_usd_per_gpu_hr", "rent_reserved_usd_per_gpu_hr"}) {
    if (!has(optional)) out.emplace_back(optional);
  }
  return out;
}

void TcoInputs::require_purchase_price() const {
  const Parameter* capex = find("server_capex_usd");
  if (!capex || capex->origin == "missing") {
    throw UsageError(
        fmt::format("{} has no purchase price in the spec database or tco.toml; give one with --set "
                    "server_capex_usd=USD (per server of gpus_per_server GPUs)",
                    gpu));
  }
}

void TcoInputs::set(std::string_view key, double value, const std::string& origin) {
  Parameter* p = nullptr;
  for (auto& candidate : params_) {
    if (candidate.key == key) p = &candidate;
  }
  const bool rent = key == "rent_on_demand_usd_per_gpu_hr" || key == "rent_reserved_usd_per_gpu_hr" ||
                    key == "rent_cheapest_on_demand_usd_per_gpu_hr";
  if (!p && !rent) {
    throw UsageError(fmt::format("{}: unknown TCO parameter '{}'; known: {}", origin, key, fmt::join(keys(), ", ")));
  }
  if (!std::isfinite(value) || value < 0) {
    throw UsageError(fmt::format("{}: {} = {} must be a number >= 0", origin, key, value));
  }
  if (is_fraction(key) && value > 1) {
    throw UsageError(fmt::format("{}: {} = {} is a fraction and must lie in [0, 1]", origin, key, value));
  }
  if ((key == "utilization" || key == "years" || key == "gpus_per_server") && value <= 0) {
    throw UsageError(fmt::format("{}: {} must be above 0", origin, key));
  }
  if (!p) {
    params_.push_back({std::string(key), value, std::nullopt, std::nullopt, "USD per GPU-hour", "", "", origin});
    return;
  }
  p->value = value;
  p->origin = origin;
}

void TcoInputs::set_from_text(std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw UsageError(fmt::format("--set: '{}' is not key=value", assignment));
  }
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw UsageError(fmt::format("--set: '{}' needs a number after '=', got '{}'", key, text));
  }
  set(key, value, "--set");
}

void TcoInputs::apply_config(const data::DataFile& file) {
  const toml::table table = data::parse_toml(file);
  TomlEntry root(table, file.origin, "");
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    (void)node;
    const double value = root.required_number(key);
    try {
      set(key, value, fmt::format("config {}", file.origin));
    } catch (const UsageError& e) {
      throw DataError(file.origin, "", key, e.what());
    }
  }
}

// ---- model --------------------------------------------------------------------------------------

double capital_recovery_factor(double rate, double years) {
  if (rate <= 0) return 1.0 / years;
  const double g = std::pow(1.0 + rate, years);
  return rate * g / (g - 1.0);
}

TcoResult compute_tco(const TcoInputs& in, double gpus, std::optional<double> tokens_per_s) {
  if (!(gpus >= 1)) throw UsageError(fmt::format("--gpus: must be at least 1, got {}", gpus));
  if (tokens_per_s && !(*tokens_per_s > 0)) {
    throw UsageError(fmt::format("--tokens-per-s: must be above 0, got {}", *tokens_per_s));
  }
  TcoResult r;
  r.gpus = gpus;
  r.years = in.get("years");
  const double rate = in.get("cost_of_capital");
  r.capex_per_gpu_usd =
      in.get("server_capex_usd") / in.get("gpus_per_server") * (1 + in.get("network_capex_fraction")) +
      in.get("install_usd_per_gpu");
  r.crf = capital_recovery_factor(rate, r.years);
  const double residual = in.get("residual_value_fraction") * r.capex_per_gpu_usd;
  r.annual_capital_usd = (r.capex_per_gpu_usd - residual / std::pow(1 + rate, r.years)) * r.crf;
  r.it_kw_provisioned = in.get("it_power_kw_per_gpu") * (1 + in.get("network_storage_power_overhead"));
  r.annual_energy_usd = r.it_kw_provisioned * in.get("avg_load_factor") * in.get("pue") * kHoursPerYear *
                        in.get("electricity_usd_per_kwh");
  r.annual_colo_usd = r.it_kw_provisioned * in.get("colo_usd_per_kw_month") * 12;
  r.annual_maintenance_usd = in.get("maintenance_fraction_per_year") * r.capex_per_gpu_usd;
  r.annual_staff_usd = in.get("staff_usd_per_gpu_year");
  r.annual_total_usd =
      r.annual_capital_usd + r.annual_energy_usd + r.annual_colo_usd + r.annual_maintenance_usd + r.annual_staff_usd;
  r.capital_usd_per_gpu_hr = r.annual_capital_usd / kHoursPerYear;
  r.energy_usd_per_gpu_hr = r.annual_energy_usd / kHoursPerYear;
  r.colo_usd_per_gpu_hr = r.annual_colo_usd / kHoursPerYear;
  r.opex_usd_per_gpu_hr = (r.annual_maintenance_usd + r.annual_staff_usd) / kHoursPerYear;
  r.usd_per_gpu_hr = r.annual_total_usd / kHoursPerYear;
  const double util = in.get("utilization");
  r.usd_per_useful_gpu_hr = r.usd_per_gpu_hr / util;
  r.total_usd = r.annual_total_usd * r.years * gpus;
  r.tokens_per_s = tokens_per_s;
  // Cost per million tokens while the GPUs work at the given throughput: useful GPU-hours x GPUs / tokens.
  auto per_mtok = [&](double usd_per_useful_gpu_hr) -> std::optional<double> {
    if (!tokens_per_s) return std::nullopt;
    return usd_per_mtok(usd_per_useful_gpu_hr, gpus, *tokens_per_s);
  };
  r.usd_per_mtok = per_mtok(r.usd_per_useful_gpu_hr);
  const double useful_hours = kHoursPerYear * r.years * util * gpus;

  if (const Parameter* p = in.find("rent_on_demand_usd_per_gpu_hr")) {
    RentOption o{fmt::format("on-demand{}", p->note.empty() ? "" : fmt::format(" ({})", p->note)),
                 p->value,
                 p->value,
                 p->value * useful_hours,
                 per_mtok(p->value),
                 p->source};
    r.rent.push_back(o);
    if (p->value > 0) r.break_even_utilization = r.usd_per_gpu_hr / p->value;
  }
  if (const Parameter* p = in.find("rent_cheapest_on_demand_usd_per_gpu_hr")) {
    r.rent.push_back({fmt::format("cheapest on-demand listed{}", p->note.empty() ? "" : fmt::format(" ({})", p->note)),
                      p->value, p->value, p->value * useful_hours, per_mtok(p->value), p->source});
  }
  if (const Parameter* p = in.find("rent_reserved_usd_per_gpu_hr")) {
    // A reserved contract bills every hour, used or not.
    r.rent.push_back({std::string(kReservedLabel), p->value, p->value / util, p->value * kHoursPerYear * r.years * gpus,
                      per_mtok(p->value / util), p->source});
  }
  return r;
}

double usd_per_mtok(double usd_per_gpu_hr, double gpus, double tokens_per_s) {
  return usd_per_gpu_hr * gpus / (tokens_per_s * 3600.0) * 1e6;
}

std::vector<WayToPay> ways_to_pay(const TcoResult& r) {
  std::vector<WayToPay> out;
  out.push_back({"own", r.usd_per_gpu_hr, r.usd_per_useful_gpu_hr, "TCO model (inputs: gpuscout tco)", false});
  for (const auto& rent : r.rent) {
    out.push_back({"rent " + rent.label, rent.usd_per_gpu_hr, rent.usd_per_useful_gpu_hr, rent.source,
                   rent.label == kReservedLabel});
  }
  return out;
}

std::vector<TokenCost> token_costs(const TcoResult& r, double input_tokens_per_s, double output_tokens_per_s,
                                   double prefill_time_share) {
  if (!(input_tokens_per_s > 0) || !(output_tokens_per_s > 0)) {
    throw UsageError(fmt::format("token cost: throughputs must be above 0 (input {} tokens/s, output {} tokens/s)",
                                 input_tokens_per_s, output_tokens_per_s));
  }
  if (!(prefill_time_share >= 0 && prefill_time_share <= 1)) {
    throw UsageError(fmt::format("token cost: prefill time share {} is not in [0, 1]", prefill_time_share));
  }
  std::vector<TokenCost> out;
  for (auto& pay : ways_to_pay(r)) {
    TokenCost c;
    c.pay = pay;
    const double per_hr = pay.usd_per_useful_gpu_hr * prefill_time_share;
    c.input_usd_per_mtok = usd_per_mtok(per_hr, r.gpus, input_tokens_per_s);
    c.output_usd_per_mtok =
        usd_per_mtok(pay.usd_per_useful_gpu_hr * (1 - prefill_time_share), r.gpus, output_tokens_per_s);
    c.total_usd_per_mtok = usd_per_mtok(pay.usd_per_useful_gpu_hr, r.gpus, input_tokens_per_s + output_tokens_per_s);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<RunCost> run_costs(const TcoResult& r, double hours) {
  if (!(hours > 0)) throw UsageError(fmt::format("run cost: the run must last more than 0 hours, got {}", hours));
  std::vector<RunCost> out;
  for (auto& pay : ways_to_pay(r)) {
    if (pay.contract) continue;
    RunCost c;
    c.pay = pay;
    c.gpu_hours = hours * r.gpus;
    c.usd = c.gpu_hours * pay.usd_per_useful_gpu_hr;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace gpuscout::tco
