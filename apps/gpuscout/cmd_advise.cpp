// gpuscout advise FILE|--workload NAME: the advisor (include/gpuscout/advise/advisor.hpp) for one
// workload: ranked options with their key numbers, why each was chosen, and every GPU type that was
// rejected with the numbers that rejected it. Writes the advice as a result file (--out) and to the run
// history. This file reads flags, resolves the data and prints; the advisor decides.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "context.hpp"
#include "gpuscout/advise/advisor.hpp"
#include "gpuscout/advise/workload.hpp"
#include "gpuscout/results/result_json.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/util/file.hpp"
#include "gpuscout/workloads/model_catalog.hpp"
#include "history_cli.hpp"

namespace gpuscout::cli {
namespace {

using report::Align;
using report::Cell;
using report::Table;

struct AdviseFlags {
  std::string file, workload;
  bool list = false;
  std::vector<std::string> gpus, exclude_gpus, calibration, sets;
  std::int64_t top = 10;
  std::string out;
  // Flag equivalents of the workload fields (override the file; with --task they make the workload).
  std::string task, model, framework, pricing, kv_precision;
  std::vector<std::string> precisions;
  std::optional<std::int64_t> isl, osl, tenants, max_gpus, global_batch, seq;
  std::optional<double> requests_per_s, tokens_per_day, ttft_ms, tpot_ms, train_tokens, deadline_days, budget_usd,
      power_kw, rack_power_kw, years, utilization;
  bool no_mig = false;
};

// Splits "a,b" list flags as well as repeated flags.
std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::stringstream ss(item);
    for (std::string part; std::getline(ss, part, ',');) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

void non_negative(const std::optional<double>& v, const char* flag) {
  if (v && *v < 0) throw UsageError(fmt::format("{}: must be >= 0, got {}", flag, *v));
}
void positive(const std::optional<double>& v, const char* flag) {
  if (v && *v <= 0) throw UsageError(fmt::format("{}: must be above 0, got {}", flag, *v));
}
void positive(const std::optional<std::int64_t>& v, const char* flag) {
  if (v && *v < 1) throw UsageError(fmt::format("{}: must be at least 1, got {}", flag, *v));
}

advise::Workload resolve_workload(AppContext& ctx, const AdviseFlags& f) {
  const int sources = (!f.file.empty() ? 1 : 0) + (!f.workload.empty() ? 1 : 0) + (!f.task.empty() ? 1 : 0);
  if (sources == 0) {
    throw UsageError("advise: give a workload FILE, --workload NAME (see --list) or --task serve|train with --model");
  }
  if (sources > 1) throw UsageError("advise: give only one of FILE, --workload NAME and --task");
  for (auto [v, flag] :
       {std::pair{f.isl, "--isl"}, std::pair{f.osl, "--osl"}, std::pair{f.tenants, "--tenants"},
        std::pair{f.max_gpus, "--max-gpus"}, std::pair{f.global_batch, "--global-batch"}, std::pair{f.seq, "--seq"}}) {
    positive(v, flag);
  }
  for (auto [v, flag] : {std::pair{f.requests_per_s, "--requests-per-s"},
                         std::pair{f.tokens_per_day, "--tokens-per-day"}, std::pair{f.train_tokens, "--train-tokens"},
                         std::pair{f.budget_usd, "--budget-usd"}, std::pair{f.power_kw, "--power-kw"},
                         std::pair{f.rack_power_kw, "--rack-power-kw"}, std::pair{f.years, "--years"}}) {
    positive(v, flag);
  }
  for (auto [v, flag] : {std::pair{f.ttft_ms, "--ttft-ms"}, std::pair{f.tpot_ms, "--tpot-ms"},
                         std::pair{f.deadline_days, "--deadline-days"}}) {
    non_negative(v, flag);
  }
  if (f.utilization && (*f.utilization <= 0 || *f.utilization > 1)) {
    throw UsageError(fmt::format("--utilization: must lie in (0, 1], got {}", *f.utilization));
  }
  if (f.requests_per_s && f.tokens_per_day) {
    throw UsageError("--requests-per-s: give either --requests-per-s or --tokens-per-day, not both");
  }
  advise::Workload w;
  std::string where = "flags";
  if (!f.file.empty()) {
    data::DataFile file{f.file, f.file, read_file(f.file)};
    w = advise::parse_workload(file);
    where = f.file + " with flag overrides";
  } else if (!f.workload.empty()) {
    w = advise::find_workload(ctx.data(), f.workload);
    where = w.origin + " with flag overrides";
  } else {
    if (f.task != "serve" && f.task != "train")
      throw UsageError(fmt::format("--task: '{}' is not serve or train", f.task));
    if (f.model.empty()) throw UsageError("--model: required with --task");
    w.name = "flags";
    w.task = f.task == "train" ? advise::Task::train : advise::Task::serve;
    w.precisions = {"bf16"};
    if (w.task == advise::Task::serve) {
      if (!f.isl || !f.osl) throw UsageError("--isl/--osl: required with --task serve");
      if (!f.requests_per_s && !f.tokens_per_day) {
        throw UsageError("--requests-per-s: --task serve needs --requests-per-s or --tokens-per-day");
      }
      advise::ServeDemand d;
      d.name = "serve";
      w.tiers.push_back(d);
    } else {
      if (!f.train_tokens || !f.global_batch || !f.seq) {
        throw UsageError("--train-tokens/--global-batch/--seq: required with --task train");
      }
    }
  }
  if (!f.model.empty()) w.model = f.model;
  if (!f.precisions.empty()) w.precisions = split_list(f.precisions);
  if (!f.framework.empty()) w.framework = f.framework;
  const bool serve = w.task == advise::Task::serve;
  auto serve_only = [&](bool given, const char* flag) {
    if (given && !serve) throw UsageError(fmt::format("{}: applies to serving workloads; {} trains", flag, w.name));
  };
  auto train_only = [&](bool given, const char* flag) {
    if (given && serve) throw UsageError(fmt::format("{}: applies to training workloads; {} serves", flag, w.name));
  };
  serve_only(f.isl || f.osl || f.requests_per_s || f.tokens_per_day || f.ttft_ms || f.tpot_ms || f.tenants ||
                 !f.kv_precision.empty(),
             "--isl/--osl/--requests-per-s/--tokens-per-day/--ttft-ms/--tpot-ms/--tenants/--kv-precision");
  train_only(f.train_tokens || f.deadline_days || f.global_batch || f.seq,
             "--train-tokens/--deadline-days/--global-batch/--seq");
  for (auto& t : w.tiers) {
    if (f.isl) t.isl = *f.isl;
    if (f.osl) t.osl = *f.osl;
    if (f.requests_per_s) {
      t.requests_per_s = *f.requests_per_s;
      t.output_tokens_per_day.reset();
    }
    if (f.tokens_per_day) {
      t.output_tokens_per_day = *f.tokens_per_day;
      t.requests_per_s.reset();
    }
    if (f.ttft_ms) t.ttft_ms = *f.ttft_ms;
    if (f.tpot_ms) t.tpot_ms = *f.tpot_ms;
    if (f.tenants) t.tenants = *f.tenants;
    if (!f.kv_precision.empty()) {
      if (f.kv_precision != "bf16" && f.kv_precision != "fp16" && f.kv_precision != "fp8") {
        throw UsageError(fmt::format("--kv-precision: '{}' is not bf16, fp16 or fp8", f.kv_precision));
      }
      t.kv_precision = f.kv_precision;
    }
  }
  if (f.train_tokens) w.train.tokens = *f.train_tokens;
  if (f.deadline_days) w.train.deadline_days = *f.deadline_days;
  if (f.global_batch) w.train.global_batch = *f.global_batch;
  if (f.seq) w.train.seq = *f.seq;
  auto& c = w.constraints;
  if (!f.gpus.empty()) c.gpus = split_list(f.gpus);
  if (!f.exclude_gpus.empty()) c.exclude_gpus = split_list(f.exclude_gpus);
  if (f.max_gpus) c.max_gpus = *f.max_gpus;
  if (f.budget_usd) c.budget_usd = *f.budget_usd;
  if (f.power_kw) c.power_kw = *f.power_kw;
  if (f.rack_power_kw) c.rack_power_kw = *f.rack_power_kw;
  if (f.years) c.years = *f.years;
  if (f.utilization) c.utilization = *f.utilization;
  if (!f.pricing.empty()) {
    if (f.pricing != "own" && f.pricing != "rent" && f.pricing != "cheapest") {
      throw UsageError(fmt::format("--pricing: '{}' is not own, rent or cheapest", f.pricing));
    }
    c.pricing = f.pricing;
  }
  if (f.no_mig) c.mig = false;
  for (const auto& p : w.precisions) {
    if (p != "bf16" && p != "fp16" && p != "fp8" && p != "int8" && p != "int4") {
      throw UsageError(fmt::format("--precisions: '{}' is not bf16, fp16, fp8, int8 or int4", p));
    }
  }
  if (!f.task.empty()) {
    for (auto& t : w.tiers) {
      if (t.requests_per_s.has_value() == t.output_tokens_per_day.has_value()) {
        throw UsageError("--requests-per-s: give --requests-per-s or --tokens-per-day");
      }
    }
  }
  advise::validate_workload(w, where);
  return w;
}

// Candidate GPUs: the workload's list (names resolved, unknown ones are usage errors), else every GPU
// of the spec DB; minus the excluded ones.
std::vector<const specs::GpuSpec*> candidate_gpus(AppContext& ctx, const advise::Workload& w) {
  std::vector<const specs::GpuSpec*> out;
  std::set<std::string> excluded;
  for (const auto& name : w.constraints.exclude_gpus) excluded.insert(ctx.specs().get(name).name);
  if (w.constraints.gpus.empty()) {
    for (const auto& g : ctx.specs().all()) out.push_back(&g);
  } else {
    for (const auto& name : w.constraints.gpus) out.push_back(&ctx.specs().get(name));
  }
  std::erase_if(out, [&](const specs::GpuSpec* g) { return excluded.count(g->name) > 0; });
  if (out.empty()) throw UsageError("--gpus: no GPU type left after --exclude-gpus");
  return out;
}

// Measured calibration: --calibration result files first (for the GPU they were measured on), then the
// embedded tables (data/calibration/*.toml) for the others.
std::vector<model::Calibration> calibrations(AppContext& ctx, const std::vector<std::string>& files) {
  std::vector<model::Calibration> out;
  if (!files.empty()) out.push_back(model::calibration_from_files(files, ctx.specs(), nullptr));
  for (auto& cal : model::load_calibrations(ctx.data())) out.push_back(std::move(cal));
  return out;
}

std::string layout(const advise::Option& o) {
  // AMD partitions (CPX, QPX, DPX) are not MIG; say which.
  std::string out = o.mig.empty()               ? fmt::format("TP{}", o.par.tp)
                    : o.gpu->vendor == "NVIDIA" ? fmt::format("MIG {}", o.mig)
                                                : fmt::format("partition {}", o.mig);
  if (o.par.pp > 1) out += fmt::format(" PP{}", o.par.pp);
  if (o.par.dp > 1) out += fmt::format(" DP{}", o.par.dp);
  if (o.par.ep > 1) out += fmt::format(" EP{}", o.par.ep);
  if (o.micro_batch > 1) out += fmt::format(" mb{}", o.micro_batch);
  if (o.replicas > 1) out += fmt::format(" x{} replicas", o.replicas);
  return out;
}

double round_to(double v, int digits) {
  const double s = std::pow(10.0, digits);
  return std::round(v * s) / s;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::vector<Table> advice_tables(const advise::Advice& a, std::int64_t top) {
  const bool serve = a.workload.task == advise::Task::serve;
  std::vector<Table> tables;
  std::vector<std::string> tiers;
  if (serve) {
    for (const auto& t : a.workload.tiers) tiers.push_back(t.name);
  } else {
    tiers.push_back("train");
  }
  for (const auto& tier : tiers) {
    Table t;
    t.key = tiers.size() > 1 ? "options_" + tier : "options";
    std::string demand;
    if (serve) {
      for (const auto& d : a.workload.tiers) {
        if (d.name != tier) continue;
        demand = fmt::format("ISL {} / OSL {}, {:.0f} output tokens/s{}{}{}", d.isl, d.osl, d.output_tokens_per_s(),
                             d.tenants > 1 ? fmt::format(" x {} tenants", d.tenants) : "",
                             d.ttft_ms > 0 ? fmt::format(", TTFT <= {} ms", d.ttft_ms) : "",
                             d.tpot_ms > 0 ? fmt::format(", TPOT <= {} ms", d.tpot_ms) : "");
      }
    } else {
      demand = fmt::format(
          "{:.3g} tokens, GBS {} x seq {}{}", a.workload.train.tokens, a.workload.train.global_batch,
          a.workload.train.seq,
          a.workload.train.deadline_days > 0 ? fmt::format(", deadline {} days", a.workload.train.deadline_days) : "");
    }
    t.title = fmt::format("Ranked options: {} {} ({}{})", a.workload.name, tiers.size() > 1 ? "tier " + tier : "",
                          a.workload.model, demand.empty() ? "" : "; " + demand);
    t.add_column("rank", "#", "", -1, Align::right);
    t.add_column("gpu", "GPU");
    t.add_column("gpus", "GPUs", "", -1, Align::right);
    t.add_column("layout", "Layout");
    t.add_column("precision", "Precision");
    t.add_column("cost", serve ? "Cost" : "Cost", serve ? "USD/Mtok" : "USD/run", serve ? 4 : 0, Align::right);
    t.add_column("pay", "Pay");
    t.add_column("usd_per_gpu_hr", "Per GPU-hr", "USD", 2, Align::right);
    t.add_column("total_usd", serve ? "Total" : "Run", "USD", 0, Align::right);
    if (serve) {
      t.add_column("ttft_ms", "TTFT", "ms", 1, Align::right);
      t.add_column("tpot_ms", "TPOT", "ms", 2, Align::right);
      t.add_column("batch", "Batch", "", 0, Align::right);
    } else {
      t.add_column("days", "Time", "days", 2, Align::right);
      t.add_column("mfu_pct", "MFU", "%", 1, Align::right);
    }
    t.add_column("power_kw", "Power", "kW", 1, Align::right);
    t.add_column("calibration", "Calibration");
    std::int64_t shown = 0;
    for (const auto& o : a.options) {
      if (o.tier != tier || shown >= top) continue;
      ++shown;
      const auto& p = o.pricing[o.best_pricing];
      std::vector<Cell> row{static_cast<std::int64_t>(o.rank),
                            o.gpu->name,
                            o.gpus,
                            layout(o),
                            o.precision,
                            round_to(o.cost, serve ? 4 : 0),
                            p.way,
                            round_to(p.usd_per_gpu_hr, 2),
                            std::round(p.usd_total)};
      // One push_back per cell: GCC 12 warns -Wmaybe-uninitialized (falsely) on an initializer list of variants.
      if (serve) {
        row.push_back(round_to(o.ttft_ms, 1));
        row.push_back(round_to(o.tpot_ms, 2));
        row.push_back(o.batch);
      } else {
        row.push_back(round_to(o.days, 2));
        row.push_back(round_to(o.mfu * 100, 1));
      }
      row.push_back(round_to(o.power_kw, 1));
      row.push_back(fmt::format("{} ±{:.0f}%", o.calibration_tier, o.error_band * 100));
      t.add_row(std::move(row));
    }
    if (shown == 0) t.notes.push_back("No option meets every bound and constraint: see the rejections below.");
    t.notes.push_back(serve ? "Cost: USD per million output tokens at the demand rate, the cheapest way to pay "
                              "(own over the horizon, rent on-demand or reserved); Total: over the horizon."
                            : "Cost: USD per training run (GPU-hours x price), the cheapest way to pay.");
    tables.push_back(std::move(t));

    Table why;
    why.key = tiers.size() > 1 ? "reasons_" + tier : "reasons";
    why.title = "Why, in numbers";
    why.add_column("rank", "#", "", -1, Align::right);
    why.add_column("option", "Option");
    why.add_column("reasons", "Reasons");
    shown = 0;
    for (const auto& o : a.options) {
      if (o.tier != tier || shown >= std::min<std::int64_t>(top, 5)) continue;
      ++shown;
      for (std::size_t i = 0; i < o.reasons.size(); ++i) {
        why.add_row({i == 0 ? Cell{static_cast<std::int64_t>(o.rank)} : Cell{std::string()},
                     i == 0 ? Cell{fmt::format("{} x {} {}", o.gpus, o.gpu->name, o.precision)} : Cell{std::string()},
                     o.reasons[i]});
      }
    }
    if (shown > 0) tables.push_back(std::move(why));
  }
  Table rej;
  rej.key = "rejected";
  rej.title = "Rejected, grouped by reason";
  rej.add_column("by", "Rejected by");
  if (tiers.size() > 1) rej.add_column("tier", "Tier");
  rej.add_column("gpu", "GPU");
  rej.add_column("precision", "Precision");
  rej.add_column("reason", "Reason");
  for (const auto& o : a.rejections) {
    std::vector<Cell> row{o.rejected_by};
    if (tiers.size() > 1) row.push_back(o.tier);
    row.push_back(o.mig.empty() ? o.gpu->name : fmt::format("{} MIG {}", o.gpu->name, o.mig));
    row.push_back(o.precision);
    row.push_back(join(o.reasons, "; "));
    rej.add_row(std::move(row));
  }
  if (!a.rejections.empty()) tables.push_back(std::move(rej));

  // Which figures are measured and which come from the spec sheet.
  Table src;
  src.key = "sources";
  src.title = "Where the figures come from";
  src.add_column("gpu", "GPU");
  src.add_column("calibration", "Calibration");
  src.add_column("error_band_pct", "Band", "%", 0, Align::right);
  src.add_column("source", "Source");
  std::set<std::string> seen;
  auto add_source = [&](const advise::Option& o) {
    if (!seen.insert(o.gpu->name).second) return;
    src.add_row({o.gpu->name, o.calibration_tier, std::round(o.error_band * 100), o.calibration_source});
  };
  for (const auto& o : a.options) add_source(o);
  for (const auto& o : a.rejections) add_source(o);
  src.notes.push_back(
      "measured: efficiencies from result files of that GPU type (gpuscout bench); transferred: measured on another "
      "GPU of the same architecture, applied to this GPU's spec-sheet peaks (memory-bound ones moved to its "
      "bandwidth); public: documented public efficiencies "
      "on spec-sheet peaks. Peaks, memory, bandwidth and prices always come from the spec DB.");
  for (const auto& s : a.assumptions) src.notes.push_back("assumption: " + s);
  src.notes.push_back(fmt::format("{} layouts sized.", a.evaluated));
  tables.push_back(std::move(src));
  return tables;
}

void list_workloads(AppContext& ctx) {
  Table t;
  t.key = "workloads";
  t.title = "Embedded workloads (data/workloads)";
  t.add_column("name", "Name");
  t.add_column("task", "Task");
  t.add_column("model", "Model");
  t.add_column("description", "Description");
  for (const auto& w : advise::load_workloads(ctx.data())) {
    t.add_row({w.name, advise::to_string(w.task), w.model, w.description});
  }
  ctx.out << report::render(t, ctx.format());
}

void run_advise(AppContext& ctx, const AdviseFlags& f) {
  if (f.list) {
    list_workloads(ctx);
    return;
  }
  if (f.top < 1) throw UsageError(fmt::format("--top: must be at least 1, got {}", f.top));
  const advise::Workload w = resolve_workload(ctx, f);
  const auto& info = ctx.models().get(w.model);
  advise::AdvisorInputs in;
  in.model_name = info.name;
  in.arch = info.arch;
  in.gpus = candidate_gpus(ctx, w);
  in.calibrations = calibrations(ctx, f.calibration);
  in.frameworks = model::load_frameworks(ctx.data());
  const auto defaults = tco::TcoDefaults::load(ctx.data());
  in.tco = &defaults;
  in.tco_overrides = f.sets;
  const advise::Advice advice = advise::advise(w, in);

  results::ResultSet set = advise::to_result_set(advice);
  set.provenance = results::local_provenance(static_cast<int>(ctx.argv.size()), ctx.raw_argv);
  set.provenance.data_source = ctx.data().describe();
  if (!f.out.empty()) {
    results::write_result_file(f.out, set);
    fmt::print(stderr, "gpuscout advise: wrote {} ({} options, {} rejected)\n", f.out, advice.options.size(),
               advice.rejections.size());
  }
  append_to_history(ctx, set, "gpuscout advise: " + w.name);
  ctx.out << report::render(advice_tables(advice, f.top), ctx.format());
}

}  // namespace

void register_advise_command(CLI::App& app, AppContext& ctx) {
  auto f = std::make_shared<AdviseFlags>();
  CLI::App* cmd = app.add_subcommand(
      "advise", "Which GPU, how many, which layout and precision, own or rent: ranked options with reasons");
  cmd->add_option("file", f->file, "Workload file (TOML, docs/advise.md)");
  cmd->add_option("--workload", f->workload, "An embedded workload by name (--list)");
  cmd->add_flag("--list", f->list, "List the embedded workloads");
  cmd->add_option("--gpus", f->gpus, "GPU types to consider (comma-separated or repeated; default: the workload's)");
  cmd->add_option("--exclude-gpus", f->exclude_gpus, "GPU types never to consider");
  cmd->add_option("--top", f->top, "Options shown per tier (default 10)");
  cmd->add_option("--out", f->out, "Write the advice as a result file (JSON, atomically) for report --advice");
  cmd->add_option("--calibration", f->calibration, "Measured result files (gpuscout bench) to calibrate from");
  cmd->add_option("--set", f->sets, "TCO parameter override key=value (gpuscout tco lists the keys)");
  cmd->add_option("--task", f->task, "serve or train: build the workload from flags");
  cmd->add_option("--model", f->model, "Model name (gpuscout models list)");
  cmd->add_option("--precisions", f->precisions, "Allowed precisions: bf16, fp16, fp8, int8, int4 (comma-separated)");
  cmd->add_option("--framework", f->framework, "Framework profile (data/frameworks.toml)");
  cmd->add_option("--isl", f->isl, "serve: input tokens per request");
  cmd->add_option("--osl", f->osl, "serve: output tokens per request");
  cmd->add_option("--requests-per-s", f->requests_per_s, "serve: request rate per tenant");
  cmd->add_option("--tokens-per-day", f->tokens_per_day, "serve: output tokens per day per tenant");
  cmd->add_option("--ttft-ms", f->ttft_ms, "serve: TTFT bound in ms (0: none)");
  cmd->add_option("--tpot-ms", f->tpot_ms, "serve: TPOT bound in ms (0: none)");
  cmd->add_option("--tenants", f->tenants, "serve: independent copies of the model");
  cmd->add_option("--kv-precision", f->kv_precision, "serve: KV cache bf16 or fp8");
  cmd->add_option("--train-tokens", f->train_tokens, "train: tokens to train on");
  cmd->add_option("--deadline-days", f->deadline_days, "train: deadline in days (0: none)");
  cmd->add_option("--global-batch", f->global_batch, "train: sequences per step");
  cmd->add_option("--seq", f->seq, "train: sequence length");
  cmd->add_option("--max-gpus", f->max_gpus, "Most GPUs an option may use");
  cmd->add_option("--budget-usd", f->budget_usd, "Budget: serve over the horizon, train per run");
  cmd->add_option("--power-kw", f->power_kw, "IT power available to the whole deployment");
  cmd->add_option("--rack-power-kw", f->rack_power_kw, "Power one rack supplies");
  cmd->add_option("--years", f->years, "Horizon for own vs rent");
  cmd->add_option("--utilization", f->utilization, "Owner's busy fraction (TCO)");
  cmd->add_option("--pricing", f->pricing, "Rank by own, rent or cheapest");
  cmd->add_flag("--no-mig", f->no_mig, "Do not consider MIG slices");
  cmd->callback([&ctx, f] { run_advise(ctx, *f); });
}

}  // namespace gpuscout::cli
