#include "gpuscout/advise/workload.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuscout/data/toml_reader.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/util/names.hpp"

namespace gpuscout::advise {

using data::TomlEntry;

std::string to_string(Task task) {
  return task == Task::train ? "train" : "serve";
}

double ServeDemand::output_tokens_per_s() const {
  if (requests_per_s) return *requests_per_s * static_cast<double>(osl);
  return output_tokens_per_day.value_or(0) / 86400.0;
}

namespace {

ServeDemand read_demand(const TomlEntry& e, const std::string& default_name) {
  e.reject_unknown_keys({"name", "isl", "osl", "requests_per_s", "output_tokens_per_day", "ttft_ms", "tpot_ms",
                         "kv_precision", "tenants"});
  ServeDemand d;
  d.name = e.optional_string("name").value_or(default_name);
  d.isl = e.required_int("isl", 1);
  d.osl = e.required_int("osl", 1);
  d.requests_per_s = e.optional_number("requests_per_s", 0);
  d.output_tokens_per_day = e.optional_number("output_tokens_per_day", 0);
  if (d.requests_per_s.has_value() == d.output_tokens_per_day.has_value()) {
    e.fail("requests_per_s", "give exactly one of requests_per_s and output_tokens_per_day");
  }
  if (d.output_tokens_per_s() <= 0) e.fail("requests_per_s", "the demand must be above 0");
  d.ttft_ms = e.optional_number("ttft_ms", 0).value_or(0);
  d.tpot_ms = e.optional_number("tpot_ms", 0).value_or(0);
  if (e.has("kv_precision")) d.kv_precision = e.required_choice("kv_precision", {"bf16", "fp16", "fp8"});
  d.tenants = e.optional_int("tenants", 1, 100000).value_or(1);
  return d;
}

}  // namespace

void validate_workload(const Workload& w, const std::string& where) {
  auto fail = [&](const std::string& field, const std::string& problem) {
    throw DataError(where, w.name, field, problem);
  };
  if (w.model.empty()) fail("model", "a model name is required");
  if (w.precisions.empty()) fail("precisions", "at least one precision is required");
  for (const auto& p : w.precisions) {
    const bool serve_ok = p == "bf16" || p == "fp16" || p == "fp8" || p == "int8" || p == "int4";
    const bool train_ok = p == "bf16" || p == "fp8";
    if (w.task == Task::serve ? !serve_ok : !train_ok) {
      fail("precisions", fmt::format("'{}' is not one of {}", p,
                                     w.task == Task::serve ? "bf16, fp16, fp8, int8, int4" : "bf16, fp8 (training)"));
    }
  }
  if (w.task == Task::serve) {
    if (w.tiers.empty()) fail("serve", "a serving workload needs [serve] or [[tier]]");
    for (const auto& t : w.tiers) {
      if (t.isl < 1 || t.osl < 1) fail(t.name + ".isl", "isl and osl must be at least 1");
      if (t.output_tokens_per_s() <= 0) fail(t.name + ".requests_per_s", "the demand must be above 0");
      if (t.ttft_ms < 0 || t.tpot_ms < 0) fail(t.name + ".ttft_ms", "latency bounds must be >= 0");
      if (t.tenants < 1) fail(t.name + ".tenants", "must be at least 1");
    }
  } else {
    const auto& t = w.train;
    if (t.tokens <= 0) fail("train.tokens", "must be above 0");
    if (t.deadline_days < 0) fail("train.deadline_days", "must be >= 0");
    if (t.global_batch < 1) fail("train.global_batch", "must be at least 1");
    if (t.seq < 1) fail("train.seq", "must be at least 1");
    if (t.zero_stage < 0 || t.zero_stage > 3) fail("train.zero_stage", "must be 0-3");
  }
  const auto& c = w.constraints;
  if (c.max_gpus < 1) fail("constraints.max_gpus", "must be at least 1");
  if (c.years <= 0) fail("constraints.years", "must be above 0");
  if (c.budget_usd && *c.budget_usd <= 0) fail("constraints.budget_usd", "must be above 0");
  if (c.power_kw && *c.power_kw <= 0) fail("constraints.power_kw", "must be above 0");
  if (c.rack_power_kw && *c.rack_power_kw <= 0) fail("constraints.rack_power_kw", "must be above 0");
  if (c.utilization && (*c.utilization <= 0 || *c.utilization > 1)) {
    fail("constraints.utilization", "must lie in (0, 1]");
  }
  if (c.pricing != "own" && c.pricing != "rent" && c.pricing != "cheapest") {
    fail("constraints.pricing", fmt::format("'{}' is not own, rent or cheapest", c.pricing));
  }
}

Workload parse_workload(const data::DataFile& file) {
  const toml::table table = data::parse_toml(file);
  TomlEntry root(table, file.origin, "");
  root.reject_unknown_keys(
      {"name", "description", "task", "model", "precisions", "framework", "serve", "tier", "train", "constraints"});
  Workload w;
  w.origin = file.origin;
  w.name = root.required_string("name");
  root.set_entry(w.name);
  w.description = root.optional_string("description").value_or("");
  w.task = root.required_choice("task", {"train", "serve"}) == "train" ? Task::train : Task::serve;
  w.model = root.required_string("model");
  w.precisions = root.string_list("precisions");
  if (w.precisions.empty()) root.fail("precisions", "a non-empty list of precisions is required");
  w.framework = root.optional_string("framework").value_or("");
  if (w.task == Task::serve) {
    if (root.has("train")) root.fail("train", "a serving workload has no [train] table");
    if (auto serve = root.optional_table("serve")) w.tiers.push_back(read_demand(*serve, "serve"));
    for (const TomlEntry& tier : root.array_of_tables("tier")) {
      if (!tier.has("name")) tier.fail("name", "every [[tier]] needs a name");
      w.tiers.push_back(read_demand(tier, ""));
    }
    if (w.tiers.empty()) root.fail("serve", "a serving workload needs a [serve] table or [[tier]] tables");
    for (std::size_t i = 0; i < w.tiers.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (w.tiers[i].name == w.tiers[j].name) root.fail("tier", fmt::format("tier '{}' twice", w.tiers[i].name));
      }
    }
  } else {
    if (root.has("serve") || root.has("tier")) root.fail("serve", "a training workload has no [serve] or [[tier]]");
    const TomlEntry t = root.required_table("train");
    t.reject_unknown_keys({"tokens", "deadline_days", "global_batch", "seq", "recompute", "fine_tune", "zero_stage"});
    w.train.tokens = t.required_number("tokens", 1);
    w.train.deadline_days = t.optional_number("deadline_days", 0).value_or(0);
    w.train.global_batch = t.required_int("global_batch", 1);
    w.train.seq = t.required_int("seq", 1);
    if (t.has("recompute")) w.train.recompute = t.required_choice("recompute", {"none", "selective", "full"});
    if (t.has("fine_tune")) w.train.fine_tune = t.required_choice("fine_tune", {"full", "lora", "qlora"});
    w.train.zero_stage = static_cast<int>(t.optional_int("zero_stage", 0, 3).value_or(1));
  }
  if (auto c = root.optional_table("constraints")) {
    c->reject_unknown_keys({"gpus", "exclude_gpus", "max_gpus", "budget_usd", "power_kw", "rack_power_kw", "years",
                            "utilization", "pricing", "mig"});
    auto& k = w.constraints;
    k.gpus = c->string_list("gpus");
    k.exclude_gpus = c->string_list("exclude_gpus");
    k.max_gpus = c->optional_int("max_gpus", 1, 1 << 20).value_or(k.max_gpus);
    k.budget_usd = c->optional_number("budget_usd", 0);
    k.power_kw = c->optional_number("power_kw", 0);
    k.rack_power_kw = c->optional_number("rack_power_kw", 0);
    k.years = c->optional_number("years", 0.1, 30).value_or(k.years);
    k.utilization = c->optional_number("utilization", 0, 1);
    if (c->has("pricing")) k.pricing = c->required_choice("pricing", {"own", "rent", "cheapest"});
    k.mig = c->optional_bool("mig").value_or(true);
  }
  validate_workload(w, file.origin);
  return w;
}

std::vector<Workload> load_workloads(const data::DataSource& source) {
  std::vector<Workload> out;
  for (const auto& file : source.list("workloads", ".toml")) out.push_back(parse_workload(file));
  return out;
}

Workload find_workload(const data::DataSource& source, const std::string& name) {
  const auto all = load_workloads(source);
  NameIndex index;
  for (std::size_t i = 0; i < all.size(); ++i) index.add(i, all[i].name, {});
  if (auto i = index.find(name)) return all[*i];
  throw NotFoundError("workload", name, index.suggest(name));
}

}  // namespace gpuscout::advise
