#include "gpuscout/advise/advisor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "gpuscout/model/serving_sim.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::advise {

namespace {

constexpr double kHoursPerYear = tco::kHoursPerYear;

std::string upper(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string layout_text(const model::Parallelism& par) {
  std::string out = fmt::format("TP{}", par.tp);
  if (par.pp > 1) out += fmt::format(" PP{}", par.pp);
  if (par.dp > 1) out += fmt::format(" DP{}", par.dp);
  if (par.ep > 1) out += fmt::format(" EP{}", par.ep);
  return out;
}

std::string gib(double bytes) {
  return fmt::format("{:.1f} GiB", bytes / model::kGiB);
}

std::string gpu_label(const specs::GpuSpec& gpu, const MigProfile& profile) {
  return profile.name.empty() ? gpu.name : fmt::format("{} MIG {}", gpu.name, profile.name);
}

// Rank order of why a layout failed: the further it got, the better it explains the group's rejection.
int progress(const std::string& rejected_by) {
  if (rejected_by == "memory") return 1;
  if (rejected_by == "slo" || rejected_by == "deadline") return 2;
  if (rejected_by == "count") return 3;
  if (rejected_by == "power") return 4;
  if (rejected_by == "budget") return 5;
  return 0;
}

// Prices of one GPU type: the owner's cost per GPU-hour (TCO model) and the rent prices, each optional.
struct GpuPrices {
  std::optional<tco::TcoResult> own;
  std::optional<double> on_demand, reserved;
  std::string on_demand_source, reserved_source, own_source;
  double kw_per_gpu = 0;
  double gpus_per_server = 8;
  double utilization = 1;
};

GpuPrices gpu_prices(const specs::GpuSpec& gpu, const Workload& w, const AdvisorInputs& in) {
  GpuPrices p;
  auto inputs = tco::TcoInputs::resolve(*in.tco, gpu);
  for (const auto& o : in.tco_overrides) inputs.set_from_text(o);
  inputs.set("years", w.constraints.years, "workload constraints.years");
  if (w.constraints.utilization) inputs.set("utilization", *w.constraints.utilization, "workload");
  p.kw_per_gpu = inputs.get("it_power_kw_per_gpu") * (1 + inputs.get("network_storage_power_overhead"));
  p.gpus_per_server = inputs.get("gpus_per_server");
  p.utilization = inputs.get("utilization");
  const auto* capex = inputs.find("server_capex_usd");
  if (capex && capex->value > 0) {
    p.own = tco::compute_tco(inputs, 1);
    p.own_source = fmt::format("TCO model: server ${:.0f} / {} GPUs ({}), {} years, data/tco.toml", capex->value,
                               p.gpus_per_server, capex->origin, w.constraints.years);
  }
  if (const auto* od = inputs.find("rent_on_demand_usd_per_gpu_hr")) {
    p.on_demand = od->value;
    p.on_demand_source = od->note.empty() ? od->source : od->note;
  }
  if (const auto* rs = inputs.find("rent_reserved_usd_per_gpu_hr")) {
    p.reserved = rs->value;
    p.reserved_source = rs->note.empty() ? rs->source : rs->note;
  }
  return p;
}

// Fills the prices of an option and picks the one the workload ranks by. Serve: the GPUs run every
// hour of the horizon; train: they run for the GPU-hours of the run, owned GPUs charged per useful hour
// (the owner keeps them busy `utilization` of the time with other work).
void price(Option& o, const GpuPrices& p, const Workload& w, double output_tokens_per_s, double run_gpu_hours) {
  const bool serve = w.task == Task::serve;
  const double gpus = static_cast<double>(o.gpus);
  const double hours = w.constraints.years * kHoursPerYear;
  auto add = [&](std::string way, double per_gpu_hr, std::string source) {
    Pricing pr;
    pr.way = std::move(way);
    pr.usd_per_gpu_hr = per_gpu_hr;
    pr.source = std::move(source);
    if (serve) {
      pr.usd_total = per_gpu_hr * gpus * hours;
      pr.usd_per_unit = tco::usd_per_mtok(per_gpu_hr, gpus, output_tokens_per_s);
    } else {
      pr.usd_total = per_gpu_hr * run_gpu_hours;
      pr.usd_per_unit = pr.usd_total;
    }
    o.pricing.push_back(std::move(pr));
  };
  if (p.own && w.constraints.pricing != "rent") {
    add("own", serve ? p.own->usd_per_gpu_hr : p.own->usd_per_useful_gpu_hr, p.own_source);
    o.own_terms = {p.own->capital_usd_per_gpu_hr, p.own->energy_usd_per_gpu_hr, p.own->colo_usd_per_gpu_hr,
                   p.own->opex_usd_per_gpu_hr};
  }
  if (w.constraints.pricing != "own") {
    if (p.on_demand) add("rent on-demand", *p.on_demand, p.on_demand_source);
    // A reserved contract runs for years: it suits a service, not a one-off run.
    if (p.reserved && serve) add("rent reserved", *p.reserved, p.reserved_source);
  }
  o.best_pricing = 0;
  for (std::size_t i = 1; i < o.pricing.size(); ++i) {
    if (o.pricing[i].usd_per_unit < o.pricing[o.best_pricing].usd_per_unit) o.best_pricing = i;
  }
  if (!o.pricing.empty()) o.cost = o.pricing[o.best_pricing].usd_per_unit;
}

std::string pricing_reason(const Option& o, const GpuPrices& p, bool serve) {
  std::string out;
  for (std::size_t i = 0; i < o.pricing.size(); ++i) {
    const auto& pr = o.pricing[i];
    out += fmt::format("{}{} ${:.2f}/GPU-hr -> ${:.4g} {}{}", i ? "; " : "", pr.way, pr.usd_per_gpu_hr, pr.usd_per_unit,
                       o.unit, i == o.best_pricing ? " (cheapest)" : "");
  }
  if (p.own && !o.pricing.empty()) {
    out += fmt::format(
        ". Own per GPU-hr: capital {:.2f} + energy {:.2f} + colocation {:.2f} + opex {:.2f}{}", o.own_terms.capital,
        o.own_terms.energy, o.own_terms.colocation, o.own_terms.opex,
        serve ? " (paid every hour)" : fmt::format(", / utilization {:.2f} per useful hour", p.utilization));
  }
  return out;
}

// Power and budget checks shared by both tasks; returns false (and sets the rejection) on a miss.
bool check_constraints(Option& o, const GpuPrices& p, const Workload& w) {
  const auto& c = w.constraints;
  o.power_kw = p.kw_per_gpu * static_cast<double>(o.gpus);
  if (c.power_kw && o.power_kw > *c.power_kw) {
    o.rejected_by = "power";
    o.reasons.push_back(
        fmt::format("{} GPUs draw {:.1f} kW (IT, {:.2f} kW per GPU incl. server and network share) > "
                    "power_kw {:.1f}",
                    o.gpus, o.power_kw, p.kw_per_gpu, *c.power_kw));
    return false;
  }
  if (c.rack_power_kw) {
    const double per_server = std::min(static_cast<double>(o.gpus), p.gpus_per_server);
    const double server_kw = per_server * p.kw_per_gpu;
    if (server_kw > *c.rack_power_kw) {
      o.rejected_by = "power";
      o.reasons.push_back(fmt::format("one server of {} GPUs draws {:.1f} kW > rack_power_kw {:.1f}", per_server,
                                      server_kw, *c.rack_power_kw));
      return false;
    }
    const double servers_per_rack = std::floor(*c.rack_power_kw / server_kw);
    const double servers = std::ceil(static_cast<double>(o.gpus) / per_server);
    o.reasons.push_back(fmt::format("{} server(s) of {} GPUs at {:.1f} kW each, {} per {:.1f} kW rack: {} rack(s)",
                                    servers, per_server, server_kw, servers_per_rack, *c.rack_power_kw,
                                    std::ceil(servers / servers_per_rack)));
  }
  if (o.pricing.empty()) {
    o.rejected_by = "price";
    o.reasons.push_back(fmt::format(
        "no {} price for {} in the spec DB or data/tco.toml",
        c.pricing == "own" ? "purchase" : (c.pricing == "rent" ? "cloud" : "purchase or cloud"), o.gpu->name));
    return false;
  }
  const auto& best = o.pricing[o.best_pricing];
  if (c.budget_usd && best.usd_total > *c.budget_usd) {
    o.rejected_by = "budget";
    o.reasons.push_back(fmt::format("{} costs ${:.0f} {} > budget ${:.0f}", best.way, best.usd_total,
                                    w.task == Task::serve ? fmt::format("over {} years", c.years) : "per run",
                                    *c.budget_usd));
    return false;
  }
  return true;
}

struct Group {
  std::optional<Option> best;                 // cheapest feasible
  std::optional<Option> furthest;             // the failure that got furthest
  std::vector<std::string> smaller_failures;  // why smaller layouts fail, for the explanation
  std::map<std::int64_t, Option> misses;      // first deadline/SLO miss per GPU count
};

// Bytes per weight of a precision: at equal cost the higher precision (better quality) ranks first.
double precision_bits(const std::string& precision) {
  return model::parse_quantization(precision, "precisions").bits_per_weight;
}

// Cheaper first; at equal cost (within rounding) fewer GPUs, then whole GPUs before slices.
bool better(const Option& a, const Option& b) {
  const double tol = 1e-9 * std::max(a.cost, b.cost);
  if (std::abs(a.cost - b.cost) > tol) return a.cost < b.cost;
  if (a.gpus != b.gpus) return a.gpus < b.gpus;
  return a.instances_per_gpu < b.instances_per_gpu;
}

void consider(Group& g, Option o) {
  if (o.feasible) {
    if (!g.best || better(o, *g.best)) g.best = std::move(o);
    return;
  }
  if (o.rejected_by == "deadline" || o.rejected_by == "slo") g.misses.emplace(o.gpus, o);
  // Why smaller whole-GPU layouts fail explains the option; slices that cannot hold the model do not.
  if (o.rejected_by == "memory" && o.mig.empty() && g.smaller_failures.size() < 2 && !o.reasons.empty()) {
    g.smaller_failures.push_back(o.reasons.back());
  }
  if (!g.furthest || progress(o.rejected_by) > progress(g.furthest->rejected_by) ||
      (progress(o.rejected_by) == progress(g.furthest->rejected_by) && o.mig.empty() && o.gpus > g.furthest->gpus)) {
    g.furthest = std::move(o);
  }
}

Option base_option(const std::string& tier, const specs::GpuSpec& gpu, const MigProfile& profile,
                   const std::string& precision, const model::Calibration& cal) {
  Option o;
  o.tier = tier;
  o.gpu = &gpu;
  o.mig = profile.name;
  o.instances_per_gpu = profile.instances;
  o.precision = precision;
  o.calibration_tier = cal.tier;
  o.calibration_source = cal.source;
  o.error_band = cal.error_band();
  return o;
}

// ---- serving ---------------------------------------------------------------------------------

Option serve_layout(const Workload& w, const ServeDemand& d, const AdvisorInputs& in, const specs::GpuSpec& gpu,
                    const MigProfile& profile, const specs::GpuSpec& slice, const model::SpeedContext& sc,
                    const std::string& precision, const model::Parallelism& par, const GpuPrices& prices) {
  Option o = base_option(d.name, gpu, profile, precision, sc.calibration);
  o.unit = "USD/Mtok output";
  o.par = par;
  const std::string where = fmt::format("{}{} {}", par.tp * par.pp > 1 ? fmt::format("{}x ", par.tp * par.pp) : "",
                                        gpu_label(gpu, profile), layout_text(par));
  model::InferenceSetup setup;
  setup.arch = in.arch;
  setup.par = par;
  setup.weights = model::parse_quantization(precision, "precisions");
  setup.kv_bytes_per_element = d.kv_precision == "fp8" ? 1 : 2;
  model::InferenceConfig cfg;
  cfg.weights = setup.weights;
  cfg.kv_bytes_per_element = setup.kv_bytes_per_element;
  cfg.context = d.isl + d.osl;
  cfg.batch = 1;
  cfg.runtime.memory_fraction = sc.framework.memory_fraction;
  const double capacity = model::gpu_capacity_bytes(slice);
  const auto mem = model::inference_memory(in.arch, par, cfg, capacity);
  const double weights = mem.breakdown.bytes_of("weights_linear") + mem.breakdown.bytes_of("weights_other");
  const double fixed = mem.breakdown.total_bytes - mem.breakdown.bytes_of("kv_cache");
  o.capacity_gib = capacity / model::kGiB;
  o.memory_gib = mem.breakdown.total_bytes / model::kGiB;
  o.kv_tokens = mem.kv_tokens_capacity;
  if (mem.max_batch_at_context < 1) {
    o.rejected_by = "memory";
    o.reasons.push_back(fmt::format(
        "{} {} weights {} per GPU + runtime and activations {} = {} do not fit {} usable ({:.0f}% of {}) on {} "
        "with one {}-token sequence",
        in.model_name, upper(precision), gib(weights), gib(fixed - weights), gib(fixed),
        gib(mem.breakdown.usable_bytes), sc.framework.memory_fraction * 100, gib(capacity), where, cfg.context));
    return o;
  }
  const auto p = model::best_batch_under_bounds(sc, setup, static_cast<double>(d.isl), static_cast<double>(d.osl),
                                                mem.max_batch_at_context, d.ttft_ms / 1e3, d.tpot_ms / 1e3);
  const std::string kv = fmt::format(
      "{}: weights {} per GPU leave {} for KV cache = {:.0f} tokens = {} sequences of {}", where, gib(weights),
      gib(mem.breakdown.usable_bytes - fixed), mem.kv_tokens_capacity, mem.max_batch_at_context, cfg.context);
  if (p.batch < 1) {
    o.rejected_by = "slo";
    o.ttft_ms = p.ttft_s * 1e3;
    o.tpot_ms = p.tpot_s * 1e3;
    o.reasons.push_back(kv);
    std::string miss;
    if (d.ttft_ms > 0 && o.ttft_ms > d.ttft_ms) miss += fmt::format("TTFT {:.1f} ms > {:.1f} ms", o.ttft_ms, d.ttft_ms);
    if (d.tpot_ms > 0 && o.tpot_ms > d.tpot_ms) {
      miss += fmt::format("{}TPOT {:.2f} ms > {:.2f} ms", miss.empty() ? "" : ", ", o.tpot_ms, d.tpot_ms);
    }
    o.reasons.push_back(fmt::format("even one sequence misses the SLO: {}", miss));
    return o;
  }
  o.batch = p.batch;
  o.ttft_ms = p.ttft_s * 1e3;
  o.tpot_ms = p.tpot_s * 1e3;
  o.replica_tokens_per_s = p.output_tokens_per_s;
  const double need = d.output_tokens_per_s();
  o.replicas = static_cast<std::int64_t>(std::ceil(need / p.output_tokens_per_s - 1e-9));
  const std::int64_t instances = o.replicas * d.tenants;
  o.gpus =
      profile.instances > 1 ? (instances + profile.instances - 1) / profile.instances : instances * par.tp * par.pp;
  o.reasons.push_back(kv);
  std::string bounds;
  if (d.ttft_ms > 0) bounds += fmt::format("TTFT <= {:.0f} ms", d.ttft_ms);
  if (d.tpot_ms > 0) bounds += fmt::format("{}TPOT <= {:.0f} ms", bounds.empty() ? "" : ", ", d.tpot_ms);
  o.reasons.push_back(
      fmt::format("{}: batch {:.0f} (TTFT {:.1f} ms, TPOT {:.2f} ms) = {:.0f} output tokens/s per replica",
                  bounds.empty() ? "no latency bound, KV-capacity batch" : "largest batch within " + bounds, p.batch,
                  o.ttft_ms, o.tpot_ms, p.output_tokens_per_s));
  o.reasons.push_back(fmt::format("{:.0f} output tokens/s{} need {} replica(s){} = {} GPU(s){}", need,
                                  d.tenants > 1 ? fmt::format(" for each of {} tenants", d.tenants) : "", o.replicas,
                                  d.tenants > 1 ? fmt::format(" each, {} in all", instances) : "", o.gpus,
                                  profile.instances > 1 ? fmt::format(" ({} slices per GPU)", profile.instances) : ""));
  if (o.gpus > w.constraints.max_gpus) {
    o.rejected_by = "count";
    o.reasons.push_back(fmt::format("{} GPUs > max_gpus {}", o.gpus, w.constraints.max_gpus));
    return o;
  }
  price(o, prices, w, need * static_cast<double>(d.tenants), 0);
  if (!check_constraints(o, prices, w)) return o;
  o.reasons.push_back(pricing_reason(o, prices, true));
  o.feasible = true;
  return o;
}

// ---- training --------------------------------------------------------------------------------

Option train_layout(const Workload& w, const AdvisorInputs& in, const specs::GpuSpec& gpu,
                    const model::SpeedContext& sc, const std::string& precision, const model::Parallelism& par,
                    std::int64_t micro_batch, const GpuPrices& prices) {
  const auto& t = w.train;
  Option o = base_option("train", gpu, MigProfile{}, precision, sc.calibration);
  o.unit = "USD/run";
  o.par = par;
  o.micro_batch = micro_batch;
  o.gpus = par.gpus();
  const std::string where = fmt::format("{}x {} {} micro-batch {}", o.gpus, gpu.name, layout_text(par), micro_batch);
  model::TrainingSetup setup;
  setup.arch = in.arch;
  setup.par = par;
  setup.global_batch = t.global_batch;
  setup.config.precision = precision;
  setup.config.seq = t.seq;
  setup.config.recompute = model::parse_recompute(t.recompute, "train.recompute");
  setup.config.zero_stage = t.zero_stage;
  setup.config.micro_batch = micro_batch;
  setup.config.fine_tune = t.fine_tune == "lora"    ? model::FineTune::lora
                           : t.fine_tune == "qlora" ? model::FineTune::qlora
                                                    : model::FineTune::full;
  const double capacity = model::gpu_capacity_bytes(gpu);
  const auto mem = model::training_memory(in.arch, par, setup.config, capacity);
  o.capacity_gib = capacity / model::kGiB;
  o.memory_gib = mem.breakdown.total_bytes / model::kGiB;
  if (!mem.breakdown.fits()) {
    std::string top;
    for (const char* key : {"weights", "gradients", "optimizer", "activations"}) {
      if (const auto* term = mem.breakdown.find(key)) top += fmt::format("{} {}, ", key, gib(term->bytes));
    }
    o.rejected_by = "memory";
    o.reasons.push_back(fmt::format("{}: {}ZeRO-{}, {} recompute: {} per GPU > {} ({})", where, top, t.zero_stage,
                                    t.recompute, gib(mem.breakdown.total_bytes), gib(mem.breakdown.usable_bytes),
                                    mem.breakdown.stage));
    return o;
  }
  const auto r = model::training_step(sc, setup);
  o.step_s = r.step_s;
  o.mfu = r.mfu;
  o.train_tokens_per_s = r.tokens_per_s;
  o.days = t.tokens / r.tokens_per_s / 86400.0;
  o.reasons.push_back(fmt::format(
      "{}: {} per GPU of {}; step {:.2f} s, {:.0f} tokens/s, MFU {:.1f}% ({}): {:.3g} tokens in {:.2f} days", where,
      gib(mem.breakdown.total_bytes), gib(mem.breakdown.usable_bytes), r.step_s, r.tokens_per_s, r.mfu * 100,
      r.peak_label, t.tokens, o.days));
  if (t.deadline_days > 0 && o.days > t.deadline_days) {
    o.rejected_by = "deadline";
    o.reasons.push_back(fmt::format("{:.2f} days > deadline {:.2f} days", o.days, t.deadline_days));
    return o;
  }
  price(o, prices, w, 0, static_cast<double>(o.gpus) * o.days * 24.0);
  if (!check_constraints(o, prices, w)) return o;
  o.reasons.push_back(pricing_reason(o, prices, false));
  o.feasible = true;
  return o;
}

// Serving layouts of one replica, fewest GPUs first (so "not fewer" names the smallest that failed),
// then fewer pipeline stages. Slices take no TP/PP: MIG instances have no peer-to-peer.
// MoE models also try expert parallelism over the TP group (whole experts per GPU, all-to-all dispatch)
// beside experts split by TP.
std::vector<model::Parallelism> serve_layouts(const MigProfile& profile, std::int64_t max_gpus, bool moe) {
  if (!profile.name.empty()) return {model::Parallelism{}};
  std::vector<model::Parallelism> out;
  for (std::int64_t tp : {1, 2, 4, 8}) {
    for (std::int64_t pp : {1, 2, 4}) {
      if (tp * pp > max_gpus) continue;
      out.push_back({tp, pp, 1, 1});
      if (moe && tp > 1) out.push_back({tp, pp, 1, tp});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::pair{a.tp * a.pp, a.pp} < std::pair{b.tp * b.pp, b.pp};
  });
  return out;
}

// Training GPU counts: every power of two (global batches are mostly powers of two, so DP is too) and the
// multiples of a server of `node` GPUs: each one up to 16 servers, then steps of about 1/8 (a 1024-GPU
// limit tries 60 counts, not 128).
std::vector<std::int64_t> training_counts(std::int64_t max_gpus, std::int64_t node) {
  std::set<std::int64_t> out;
  for (std::int64_t n = 1; n <= max_gpus; n *= 2) out.insert(n);
  for (std::int64_t k = 1; k * node <= max_gpus; k += std::max<std::int64_t>(1, k / 8)) out.insert(k * node);
  return {out.begin(), out.end()};
}

// Turns the groups into options and rejections, ranked per tier.
void collect(Advice& advice, std::map<std::tuple<std::string, std::string, std::string>, Group>& groups) {
  for (auto& [key, g] : groups) {
    if (g.best) {
      Option o = std::move(*g.best);
      std::vector<std::string> why_not_fewer;
      for (const auto& s : g.smaller_failures) why_not_fewer.push_back("not fewer: " + s);
      // The largest smaller count that ran but missed the deadline or SLO says most about the count.
      const auto f = g.misses.lower_bound(o.gpus);
      if (f != g.misses.begin()) {
        std::string text;
        for (const auto& r : std::prev(f)->second.reasons) text += (text.empty() ? "" : "; ") + r;
        why_not_fewer.push_back("not fewer: " + text);
      }
      o.reasons.insert(o.reasons.begin(), why_not_fewer.begin(), why_not_fewer.end());
      advice.options.push_back(std::move(o));
    } else if (g.furthest) {
      advice.rejections.push_back(std::move(*g.furthest));
    }
  }
  std::stable_sort(advice.options.begin(), advice.options.end(), [](const Option& a, const Option& b) {
    if (a.tier != b.tier) return a.tier < b.tier;
    if (better(a, b) || better(b, a)) return better(a, b);
    return precision_bits(a.precision) > precision_bits(b.precision);
  });
  std::string tier;
  int rank = 0;
  for (auto& o : advice.options) {
    if (o.tier != tier) {
      tier = o.tier;
      rank = 0;
    }
    o.rank = ++rank;
  }
  std::stable_sort(advice.rejections.begin(), advice.rejections.end(), [](const Option& a, const Option& b) {
    return std::tie(a.tier, a.rejected_by) < std::tie(b.tier, b.rejected_by);
  });
}

// The cheapest option of each tier with a latency bound, under Poisson arrivals: the queueing simulation
// (model/serving_sim.hpp) finds the peak rate one replica sustains within the p99 bounds, and the reason
// says whether the demand per replica stays below it. The ranking keeps the steady-state sizing (the
// simulation per layout would cost seconds per GPU type); this line tells when bursts need more.
void check_queueing(Advice& advice, const Workload& w, const AdvisorInputs& in,
                    const model::FrameworkProfile& framework) {
  for (auto& o : advice.options) {
    if (o.rank != 1) continue;
    const auto d = std::find_if(w.tiers.begin(), w.tiers.end(), [&](const ServeDemand& t) { return t.name == o.tier; });
    if (d == w.tiers.end() || (d->ttft_ms <= 0 && d->tpot_ms <= 0) || o.replica_tokens_per_s <= 0) continue;
    MigProfile profile;
    for (const auto& p : mig_profiles(*o.gpu)) {
      if (p.name == o.mig) profile = p;
    }
    const specs::GpuSpec slice = slice_spec(*o.gpu, profile);
    const model::SpeedContext sc{&slice, model::calibration_for(*o.gpu, in.calibrations), framework};
    model::InferenceSetup setup;
    setup.arch = in.arch;
    setup.par = o.par;
    setup.weights = model::parse_quantization(o.precision, "precisions");
    setup.kv_bytes_per_element = d->kv_precision == "fp8" ? 1 : 2;
    model::QueueingSettings q;
    q.isl = static_cast<int>(d->isl);
    q.osl = static_cast<int>(d->osl);
    q.ttft_bound_ms = d->ttft_ms;
    q.tpot_bound_ms = d->tpot_ms;
    const double osl = static_cast<double>(d->osl);
    const auto peak = model::simulate_peak(sc, setup, model::EngineLimits{}, q, o.replica_tokens_per_s / osl);
    const double per_replica = d->output_tokens_per_s() / osl / static_cast<double>(o.replicas);
    std::string verdict;
    if (!peak.found) {
      verdict = "no Poisson rate meets the p99 bounds: the steady-state sizing is optimistic";
    } else if (per_replica <= peak.peak_rate) {
      verdict = "the sizing holds under bursts";
    } else {
      verdict = fmt::format("bursts need {} replica(s) per tenant, not {}",
                            static_cast<std::int64_t>(std::ceil(d->output_tokens_per_s() / osl / peak.peak_rate)),
                            o.replicas);
    }
    o.reasons.push_back(fmt::format(
        "queueing check (Poisson arrivals, scheduler simulation, {} probes): one replica keeps p99 TTFT/TPOT within "
        "the bounds up to {:.2f} requests/s; the demand puts {:.2f} requests/s on each of {} replica(s): {}",
        peak.probes.size(), peak.peak_rate, per_replica, o.replicas, verdict));
  }
}

}  // namespace

std::vector<MigProfile> mig_profiles(const specs::GpuSpec& gpu) {
  std::vector<MigProfile> out{MigProfile{}};
  const int n = gpu.mig_max_instances ? static_cast<int>(gpu.mig_max_instances->value) : 0;
  if (n < 2) return out;
  const double gb = gpu.memory_gb.value;
  if (gpu.vendor == "AMD") {
    for (auto [instances, name] : {std::pair{8, "CPX"}, std::pair{4, "QPX"}, std::pair{2, "DPX"}}) {
      if (instances > n) continue;
      out.push_back({name, instances, 1.0 / instances, 1.0 / instances});
    }
    return out;
  }
  // A GPU listing fewer instances gets only the partitions it has.
  for (auto [instances, compute, memory] : {std::tuple{7, 1, 1}, std::tuple{3, 2, 2}, std::tuple{2, 3, 4}}) {
    if (instances > n) continue;
    out.push_back({fmt::format("{}g.{:.0f}gb", compute, gb * memory / 8.0), instances, compute / 7.0, memory / 8.0});
  }
  return out;
}

specs::GpuSpec slice_spec(const specs::GpuSpec& gpu, const MigProfile& profile) {
  specs::GpuSpec s = gpu;
  if (profile.name.empty()) return s;
  for (auto& peak : s.peak_dense) {
    if (peak) peak->value *= profile.compute_share;
  }
  s.memory_bandwidth_gbs.value *= profile.memory_share;
  s.memory_gb.value *= profile.memory_share;
  s.scale_up = "none";  // slices have no peer-to-peer
  return s;
}

std::string precision_unsupported(const specs::GpuSpec& gpu, const std::string& precision) {
  const auto q = model::parse_quantization(precision, "precision");
  if (gpu.peak(q.compute)) return "";
  // Weight-only INT4 computes in bf16 or fp16: either will do.
  if (precision == "int4" && gpu.peak(specs::Precision::fp16)) return "";
  return fmt::format("{} has no {} dense peak in the spec DB ({} needs {} tensor math)", gpu.name,
                     specs::display_name(q.compute), upper(precision), specs::display_name(q.compute));
}

Advice advise(const Workload& w, const AdvisorInputs& in) {
  if (!in.tco) throw std::logic_error("advise: no TCO defaults");
  Advice advice;
  advice.workload = w;
  if (w.task == Task::serve && in.arch.kind != workloads::ModelKind::decoder) {
    throw UsageError(fmt::format("model: {} is an encoder; the advisor serves decoders", in.model_name));
  }
  const std::string framework_key = !w.framework.empty()    ? w.framework
                                    : w.task == Task::serve ? "tensorrt-llm"
                                                            : "megatron";
  const auto& framework = model::find_framework(in.frameworks, framework_key, "framework");
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  for (const specs::GpuSpec* gpu : in.gpus) {
    const GpuPrices prices = gpu_prices(*gpu, w, in);
    const model::Calibration cal = model::calibration_for(*gpu, in.calibrations);
    for (const auto& precision : w.precisions) {
      if (const std::string why = precision_unsupported(*gpu, precision); !why.empty()) {
        Option o =
            base_option(w.task == Task::serve ? w.tiers.front().name : "train", *gpu, MigProfile{}, precision, cal);
        o.rejected_by = "precision";
        o.reasons.push_back(why);
        for (const auto& d : w.tiers) {
          o.tier = d.name;
          advice.rejections.push_back(o);
        }
        if (w.task == Task::train) advice.rejections.push_back(o);
        continue;
      }
      if (w.task == Task::serve) {
        for (const auto& d : w.tiers) {
          auto& g = groups[{d.name, gpu->name, precision}];
          for (const auto& profile : mig_profiles(*gpu)) {
            if (!profile.name.empty() && !w.constraints.mig) continue;
            const specs::GpuSpec slice = slice_spec(*gpu, profile);
            model::SpeedContext sc{&slice, cal, framework};
            for (const auto& par : serve_layouts(profile, w.constraints.max_gpus, in.arch.is_moe())) {
              try {
                model::check_parallelism(in.arch, par);
              } catch (const UsageError&) {
                continue;  // a layout the model cannot take is no option
              }
              ++advice.evaluated;
              consider(g, serve_layout(w, d, in, *gpu, profile, slice, sc, precision, par, prices));
            }
          }
        }
      } else {
        model::SpeedContext sc{gpu, cal, framework};
        auto& g = groups[{"train", gpu->name, precision}];
        const auto node = static_cast<std::int64_t>(std::max(1.0, prices.gpus_per_server));
        const bool moe = in.arch.is_moe();
        for (std::int64_t n : training_counts(w.constraints.max_gpus, node)) {
          for (std::int64_t tp : {1, 2, 4, 8}) {
            for (std::int64_t pp : {1, 2, 4, 8, 16}) {
              if (tp * pp > n || n % (tp * pp) != 0) continue;
              const std::int64_t dp = n / (tp * pp);
              // MoE: experts split by TP (EP 1) or whole experts over EP ranks of the TP x DP group.
              for (std::int64_t ep : {1, 2, 4, 8, 16, 32, 64}) {
                if (ep > 1 && (!moe || (tp * dp) % ep != 0)) continue;
                model::Parallelism par{tp, pp, dp, ep};
                try {
                  model::check_parallelism(in.arch, par);
                } catch (const UsageError&) {
                  continue;
                }
                // Micro-batches 1-8: a larger one runs faster GEMMs but holds more activations; once one
                // does not fit, larger ones do not either.
                for (std::int64_t mb : {1, 2, 4, 8}) {
                  if (w.train.global_batch % (dp * mb) != 0) continue;
                  ++advice.evaluated;
                  Option o = train_layout(w, in, *gpu, sc, precision, par, mb, prices);
                  const bool out_of_memory = o.rejected_by == "memory";
                  // Only the first micro-batch's memory failure explains "not fewer".
                  if (!out_of_memory || mb == 1) consider(g, std::move(o));
                  if (out_of_memory) break;
                }
              }
            }
          }
        }
      }
    }
  }
  collect(advice, groups);
  if (w.task == Task::serve) check_queueing(advice, w, in, framework);
  advice.assumptions = {
      "Memory: the model of `gpuscout plan` (framework memory fraction, CUDA context, NCCL buffers, activations).",
      "Speed: the per-operator model of `gpuscout predict`, calibrated per GPU (tier and error band per option).",
      "Prices: owning from the TCO model (data/tco.toml, sources printed by `gpuscout tco`); renting from the spec "
      "DB's reference cloud prices.",
  };
  if (w.task == Task::serve) {
    advice.assumptions.push_back(
        "Serving: continuous batching at the largest batch within the SLO; GPUs provisioned for the demand every "
        "hour of the horizon; USD per M output tokens = hourly cost / output tokens per hour at the demand rate.");
    advice.assumptions.push_back(
        "MIG: a 7/3/2-way slice gets 1/7, 2/7, 3/7 of the compute and 1/8, 2/8, 4/8 of the memory and bandwidth "
        "(ASSUMPTION after the A100/H100 MIG profiles); slices run one replica each, no tensor parallelism.");
  } else {
    advice.assumptions.push_back(
        "Training: GPU counts that are powers of two or multiples of the server size; micro-batch 1, 2, 4 or 8 (the "
        "fastest that "
        "fits); experts split by TP or by expert parallelism for MoE models; the workload's recompute and ZeRO stage, "
        "1F1B pipeline; USD per run = GPU-hours x "
        "price; owned GPUs are charged per useful hour (owner cost / utilization: the rest of the time they serve "
        "other work).");
  }
  return advice;
}

std::vector<const Option*> best_per_tier(const Advice& advice) {
  std::vector<const Option*> out;
  for (const auto& o : advice.options) {
    if (o.rank == 1) out.push_back(&o);
  }
  return out;
}

}  // namespace gpuscout::advise
