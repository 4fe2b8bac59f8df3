// The advice as a result set (kind "advise"), so `report --advice` and the history read it like any
// other result file. Record conventions: docs/advise.md "Result file".
#include <fmt/format.h>

#include <cmath>

#include "gpuscout/advise/advisor.hpp"

namespace gpuscout::advise {

namespace {

using nlohmann::ordered_json;

results::Metric metric(std::string name, double value, std::string unit, std::string note = "") {
  results::Metric m;
  m.name = std::move(name);
  // Modelled figures: a few significant digits are all the model can claim.
  m.value = value == 0 ? 0 : std::round(value * 1e4) / 1e4;
  m.unit = std::move(unit);
  m.statistic = "value";
  m.note = std::move(note);
  return m;
}

results::Record option_record(const Advice& advice, const Option& o) {
  const bool serve = advice.workload.task == Task::serve;
  results::Record r;
  r.benchmark = "advise";
  r.key = o.feasible ? fmt::format("advise/{}/{}", o.tier, o.rank)
                     : fmt::format("advise/{}/rejected/{}{}/{}", o.tier, o.gpu->name,
                                   o.mig.empty() ? "" : "-mig-" + o.mig, o.precision);
  r.params = ordered_json{{"workload", advice.workload.name},
                          {"task", to_string(advice.workload.task)},
                          {"tier", o.tier},
                          {"rank", o.rank},
                          {"gpu", o.gpu->name},
                          {"mig", o.mig},
                          {"instances_per_gpu", o.instances_per_gpu},
                          {"gpus", o.gpus},
                          {"tp", o.par.tp},
                          {"pp", o.par.pp},
                          {"dp", o.par.dp},
                          {"ep", o.par.ep},
                          {"micro_batch", o.micro_batch},
                          {"replicas", o.replicas},
                          {"precision", o.precision}};
  if (o.feasible) {
    const auto& best = o.pricing[o.best_pricing];
    r.metrics.push_back(metric("cost", o.cost, o.unit, "ranking figure, " + best.way));
    r.metrics.push_back(metric("usd_per_gpu_hr", best.usd_per_gpu_hr, "USD/GPU-hr", best.way));
    r.metrics.push_back(metric("total_usd", best.usd_total, "USD",
                               serve ? fmt::format("over {} years", advice.workload.constraints.years) : "one run"));
  }
  if (serve) {
    if (o.batch > 0) {
      r.metrics.push_back(metric("ttft", o.ttft_ms, "ms", "steady state, one request"));
      r.metrics.push_back(metric("tpot", o.tpot_ms, "ms", "engine step"));
      r.metrics.push_back(metric("batch", o.batch, "sequences", "per replica"));
      r.metrics.push_back(metric("replica_output_throughput", o.replica_tokens_per_s, "tokens/s", "one replica"));
    }
    if (o.kv_tokens > 0) r.metrics.push_back(metric("kv_capacity", o.kv_tokens, "tokens", "per replica"));
  } else if (o.step_s > 0) {
    r.metrics.push_back(metric("time_to_train", o.days, "days"));
    r.metrics.push_back(metric("step_time", o.step_s, "s"));
    r.metrics.push_back(metric("mfu", o.mfu * 100, "%"));
    r.metrics.push_back(metric("tokens_per_s", o.train_tokens_per_s, "tokens/s"));
  }
  r.metrics.push_back(metric("memory_per_gpu", o.memory_gib, "GiB", fmt::format("of {:.1f} GiB", o.capacity_gib)));
  if (o.power_kw > 0) r.metrics.push_back(metric("power", o.power_kw, "kW", "IT power incl. server and network share"));
  ordered_json pricing = ordered_json::array();
  for (const auto& p : o.pricing) {
    pricing.push_back({{"way", p.way},
                       {"usd_per_gpu_hr", p.usd_per_gpu_hr},
                       {"usd_per_unit", p.usd_per_unit},
                       {"unit", o.unit},
                       {"usd_total", p.usd_total},
                       {"source", p.source}});
  }
  r.extra = ordered_json{{"unit", o.unit},
                         {"pricing", pricing},
                         {"best_pricing", o.pricing.empty() ? "" : o.pricing[o.best_pricing].way},
                         {"own_usd_per_gpu_hr",
                          {{"capital", o.own_terms.capital},
                           {"energy", o.own_terms.energy},
                           {"colocation", o.own_terms.colocation},
                           {"opex", o.own_terms.opex}}},
                         {"reasons", o.reasons},
                         {"rejected_by", o.rejected_by},
                         {"calibration",
                          {{"tier", o.calibration_tier},
                           {"source", o.calibration_source},
                           {"error_band_pct", std::round(o.error_band * 100)}}}};
  if (!o.feasible) {
    r.outcome = results::Outcome::skipped;
    std::string reason;
    for (const auto& s : o.reasons) reason += (reason.empty() ? "" : "; ") + s;
    r.reason = fmt::format("rejected ({}): {}", o.rejected_by, reason);
  }
  return r;
}

}  // namespace

results::ResultSet to_result_set(const Advice& advice) {
  results::ResultSet set;
  set.kind = "advise";
  const auto& w = advice.workload;
  results::Record head;
  head.key = "advise/workload";
  head.benchmark = "advise-workload";
  head.params = ordered_json{{"workload", w.name},
                             {"task", to_string(w.task)},
                             {"model", w.model},
                             {"precisions", w.precisions},
                             {"framework", w.framework},
                             {"years", w.constraints.years},
                             {"pricing", w.constraints.pricing},
                             {"max_gpus", w.constraints.max_gpus}};
  if (w.task == Task::serve) {
    ordered_json tiers = ordered_json::array();
    for (const auto& t : w.tiers) {
      tiers.push_back({{"name", t.name},
                       {"isl", t.isl},
                       {"osl", t.osl},
                       {"output_tokens_per_s", t.output_tokens_per_s()},
                       {"ttft_ms", t.ttft_ms},
                       {"tpot_ms", t.tpot_ms},
                       {"tenants", t.tenants}});
    }
    head.params["tiers"] = tiers;
  } else {
    head.params["train"] = {{"tokens", w.train.tokens},
                            {"deadline_days", w.train.deadline_days},
                            {"global_batch", w.train.global_batch},
                            {"seq", w.train.seq}};
  }
  if (w.constraints.budget_usd) head.params["budget_usd"] = *w.constraints.budget_usd;
  if (w.constraints.power_kw) head.params["power_kw"] = *w.constraints.power_kw;
  if (w.constraints.rack_power_kw) head.params["rack_power_kw"] = *w.constraints.rack_power_kw;
  head.extra = ordered_json{{"description", w.description},
                            {"origin", w.origin},
                            {"assumptions", advice.assumptions},
                            {"notes", advice.notes},
                            {"layouts_evaluated", advice.evaluated}};
  set.records.push_back(std::move(head));
  for (const auto& o : advice.options) set.records.push_back(option_record(advice, o));
  for (const auto& o : advice.rejections) set.records.push_back(option_record(advice, o));
  return set;
}

}  // namespace gpuscout::advise
