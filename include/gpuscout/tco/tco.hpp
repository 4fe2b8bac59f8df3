#pragma once
// Total cost of ownership of GPUs: the owner's cost per GPU-hour (capital recovered at a cost of
// capital, energy, colocation, maintenance, staff, residual value, utilization) against renting
// (cloud on-demand and reserved prices). Defaults, ranges and sources live in data/tco.toml; every
// parameter can be overridden (a TOML file, --set key=value) and is printed with the result.
// Formulas: docs/tco.md (after ../shared/reference/specs.md §8.4).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/gpu_spec.hpp"

namespace gpuscout::tco {

// One input of the model, with where its value came from.
struct Parameter {
  std::string key;  // "pue", "server_capex_usd", ...
  double value = 0;
  std::optional<double> low, high;  // plausible range (from the data file)
  std::string unit;
  std::string source;  // document behind the default
  std::string note;
  std::string origin;  // "default", "derived", "config FILE", "--set"
};

// Per-GPU cost data from data/tco.toml (any field may be absent: the model falls back to the spec DB).
struct GpuCostData {
  std::string gpu;  // spec DB name
  std::optional<Parameter> server_capex_usd;
  std::optional<double> gpus_per_server;
  std::optional<Parameter> it_power_kw_per_gpu;
  std::optional<Parameter> reserved_usd_per_gpu_hr;
};

class TcoDefaults {
 public:
  // tco.toml of the data source; throws DataError naming file, entry and field.
  static TcoDefaults load(const data::DataSource& source);
  static TcoDefaults parse(const data::DataFile& file);

  const std::vector<Parameter>& parameters() const { return parameters_; }
  const Parameter* find(std::string_view key) const;
  const std::vector<GpuCostData>& gpus() const { return gpus_; }
  // The entry for a spec DB name (exact canonical name), or nullptr.
  const GpuCostData* for_gpu(std::string_view name) const;

 private:
  std::vector<Parameter> parameters_;
  std::vector<GpuCostData> gpus_;
};

// Every input of one computation, resolved for one GPU type: the general parameters plus
// server_capex_usd, gpus_per_server, it_power_kw_per_gpu, install_usd_per_gpu,
// rent_on_demand_usd_per_gpu_hr, rent_reserved_usd_per_gpu_hr.
class TcoInputs {
 public:
  // Resolves the GPU-specific values: data/tco.toml first, then derived from the spec DB (reference
  // purchase price x server overhead factor; TDP x server power factor), labelled "derived".
  static TcoInputs resolve(const TcoDefaults& defaults, const specs::GpuSpec& gpu);

  const std::vector<Parameter>& all() const { return params_; }
  double get(std::string_view key) const;  // throws std::logic_error when absent (a bug)
  bool has(std::string_view key) const;
  const Parameter* find(std::string_view key) const;
  // Overrides one value; UsageError naming `origin` for an unknown key, a negative value or a fraction
  // out of [0, 1] (utilization must be > 0).
  void set(std::string_view key, double value, const std::string& origin);
  // "key=value"; UsageError naming --set.
  void set_from_text(std::string_view assignment);
  // A TOML file of key = number pairs (any of the keys above); DataError names the file and key.
  void apply_config(const data::DataFile& file);
  std::vector<std::string> keys() const;
  // UsageError (naming --set) when the GPU has no purchase price in the spec DB or tco.toml.
  void require_purchase_price() const;

  std::string gpu;
  std::vector<std::string> notes;  // e.g. where a rent price came from

 private:
  std::vector<Parameter> params_;
};

struct RentOption {
  std::string label;  // "on-demand (AWS p5.48xlarge)", "reserved 3-yr (SemiAnalysis)"
  double usd_per_gpu_hr = 0;
  double usd_per_useful_gpu_hr = 0;  // on-demand: billed only while used; reserved: / utilization
  double total_usd = 0;              // the same useful GPU-hours as the owner over the years
  std::optional<double> usd_per_mtok;
  std::string source;
};

struct TcoResult {
  double gpus = 1;
  double years = 5;
  double capex_per_gpu_usd = 0;  // server / gpus_per_server x (1 + network) + install
  double crf = 0;                // capital recovery factor
  double annual_capital_usd = 0;
  double it_kw_provisioned = 0;  // per GPU, incl. network and storage
  double annual_energy_usd = 0;
  double annual_colo_usd = 0;
  double annual_maintenance_usd = 0;
  double annual_staff_usd = 0;
  double annual_total_usd = 0;
  double usd_per_gpu_hr = 0;
  double capital_usd_per_gpu_hr = 0, energy_usd_per_gpu_hr = 0, colo_usd_per_gpu_hr = 0, opex_usd_per_gpu_hr = 0;
  double usd_per_useful_gpu_hr = 0;
  double total_usd = 0;  // all GPUs over the years
  std::optional<double> tokens_per_s;
  std::optional<double> usd_per_mtok;            // owner, at the given throughput while busy
  std::optional<double> break_even_utilization;  // owning beats on-demand above this utilization
  std::vector<RentOption> rent;
};

constexpr double kHoursPerYear = 8760;

double capital_recovery_factor(double rate, double years);

// gpus: how many GPUs (totals scale with it); tokens_per_s: throughput of all of them together.
TcoResult compute_tco(const TcoInputs& inputs, double gpus, std::optional<double> tokens_per_s = std::nullopt);

// USD per million tokens: `gpus` GPUs at `usd_per_gpu_hr` each producing `tokens_per_s` together.
double usd_per_mtok(double usd_per_gpu_hr, double gpus, double tokens_per_s);

// One way to pay (own, then every rent option of a TcoResult) at its price per useful GPU-hour (owning
// and reserved contracts pay idle hours too: / utilization; on-demand bills the hours used).
struct WayToPay {
  std::string way;  // "own", "rent on-demand (...)", ...
  double usd_per_gpu_hr = 0;
  double usd_per_useful_gpu_hr = 0;
  std::string source;
  bool contract = false;  // a reserved contract (years): suits a service, not a one-off run
};
std::vector<WayToPay> ways_to_pay(const TcoResult& r);

// Serving cost per million tokens, input and output apart. The GPU time is split by phase: input
// tokens carry the prefill's share of the busy time (`prefill_time_share`), output tokens the rest, so
// input_tokens_per_s x input price + output_tokens_per_s x output price = the hourly cost.
struct TokenCost {
  WayToPay pay;
  double input_usd_per_mtok = 0;
  double output_usd_per_mtok = 0;
  double total_usd_per_mtok = 0;  // blended: cost / (input + output tokens)
};
// Throws UsageError when a throughput is not above 0 or the share lies outside [0, 1].
std::vector<TokenCost> token_costs(const TcoResult& r, double input_tokens_per_s, double output_tokens_per_s,
                                   double prefill_time_share);

// Cost of one job of `hours` on the TcoResult's GPUs, each way to pay except reserved contracts.
struct RunCost {
  WayToPay pay;
  double gpu_hours = 0;
  double usd = 0;
};
std::vector<RunCost> run_costs(const TcoResult& r, double hours);

}  // namespace gpuscout::tco
