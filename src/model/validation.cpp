// Validation of the speed model against published and own measurements (validation.hpp).
#include "gpuscout/model/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "gpuscout/model/serving_sim.hpp"
#include "gpuscout/util/error.hpp"

namespace gpuscout::model {
namespace {

std::string get(const std::map<std::string, std::string>& row, const std::string& key) {
  const auto it = row.find(key);
  return it == row.end() ? std::string() : it->second;
}

double number(const std::map<std::string, std::string>& row, const std::string& key) {
  const auto it = row.find(key);
  if (it == row.end() || it->second.empty()) {
    throw DataError("validation/public_results.csv", get(row, "id"), key, "is empty");
  }
  return std::stod(it->second);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void ValidationReport::summarize() {
  mape_pct.clear();
  count.clear();
  for (const auto& r : rows) {
    mape_pct[r.category] += std::abs(r.error_pct());
    count[r.category] += 1;
  }
  for (auto& [cat, sum] : mape_pct) sum /= static_cast<double>(count[cat]);
}

std::vector<std::map<std::string, std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      fields.push_back(std::move(field));
      field.clear();
      lines.push_back(std::move(fields));
      fields.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  if (!field.empty() || !fields.empty()) {
    fields.push_back(std::move(field));
    lines.push_back(std::move(fields));
  }
  std::vector<std::map<std::string, std::string>> out;
  if (lines.empty()) return out;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::map<std::string, std::string> row;
    for (std::size_t j = 0; j < lines[0].size() && j < lines[i].size(); ++j) row[lines[0][j]] = lines[i][j];
    out.push_back(std::move(row));
  }
  return out;
}

workloads::ModelArch validation_arch(const std::string& text, const workloads::ModelCatalog& catalog) {
  if (!text.starts_with("gpt:")) return catalog.get(text).arch;
  workloads::ModelArch a;
  std::stringstream ss(text.substr(4));
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    const auto eq = kv.find('=');
    const auto key = kv.substr(0, eq);
    const auto value = std::stoll(kv.substr(eq + 1));
    if (key == "layers") a.layers = value;
    if (key == "hidden") a.hidden = value;
    if (key == "heads") a.heads = value;
  }
  a.kv_heads = a.heads;
  a.head_dim = a.hidden / a.heads;
  a.ffn_hidden = 4 * a.hidden;
  a.gated_mlp = false;
  a.activation = "gelu";
  a.norm = workloads::NormType::layernorm;
  a.position = workloads::PositionType::learned;
  a.max_positions = 2048;
  a.vocab = 51200;
  a.tied_embeddings = true;
  a.bias = {true, true, true};
  return a;
}

ValidationReport validate_public(const std::string& csv_text, const specs::SpecDb& specs,
                                 const workloads::ModelCatalog& catalog, const std::vector<Calibration>& calibrations,
                                 const std::vector<FrameworkProfile>& frameworks) {
  ValidationReport report;
  for (const auto& row : parse_csv(csv_text)) {
    const auto id = get(row, "id");
    const auto metric = get(row, "gpuscout_metric");
    if (metric.empty()) {
      report.skipped.push_back(
          fmt::format("{}: {} (no gpuscout mapping: a microbenchmark of another GPU)", id, get(row, "workload")));
      continue;
    }
    SpeedContext ctx;
    ctx.gpu = &specs.get(get(row, "gpuscout_gpu"));
    ctx.calibration = calibration_for(*ctx.gpu, calibrations);
    ctx.framework = find_framework(frameworks, get(row, "gpuscout_framework"), "gpuscout_framework");
    const auto arch = validation_arch(get(row, "gpuscout_model"), catalog);
    Parallelism par;
    par.tp = static_cast<std::int64_t>(number(row, "gpuscout_tp"));
    par.pp = static_cast<std::int64_t>(number(row, "gpuscout_pp"));
    const auto gpus = static_cast<std::int64_t>(number(row, "gpuscout_gpus"));
    par.dp = gpus / (par.tp * par.pp);
    ValidationRow v;
    v.id = id;
    v.measured = number(row, "gpuscout_value");
    v.calibration = ctx.calibration.tier;
    v.source = get(row, "source");
    v.what = fmt::format("{} {} x{} {} {}: {}", get(row, "model"), ctx.gpu->name, gpus, get(row, "parallelism"),
                         get(row, "precision"), get(row, "workload"));
    const double batch = number(row, "gpuscout_batch");
    if (get(row, "phase") == "infer") {
      InferenceSetup setup;
      setup.arch = arch;
      setup.par = par;
      setup.weights = parse_quantization(get(row, "gpuscout_precision"), "gpuscout_precision");
      const double isl = number(row, "gpuscout_isl"), osl = number(row, "gpuscout_osl");
      const auto r = static_batch(ctx, setup, batch, isl, osl);
      if (metric == "ttft_ms") {
        v.category = "ttft";
        v.predicted = r.ttft_s * 1e3;
        v.unit = "ms";
      } else {
        v.category = "inference_throughput";
        v.predicted = r.output_tokens_per_s / (metric == "output_tokens_per_s_per_gpu" ? static_cast<double>(gpus) : 1);
        v.unit = "tokens/s";
      }
    } else {
      TrainingSetup setup;
      setup.arch = arch;
      setup.par = par;
      setup.global_batch = static_cast<std::int64_t>(batch);
      setup.config.precision = get(row, "gpuscout_precision");
      setup.config.seq = static_cast<std::int64_t>(number(row, "gpuscout_seq"));
      setup.config.micro_batch = 1;
      setup.config.recompute = parse_recompute(get(row, "gpuscout_recompute"), "gpuscout_recompute");
      const auto v_stages = static_cast<std::int64_t>(number(row, "gpuscout_interleave"));
      if (v_stages > 1) {
        setup.config.schedule = PipelineSchedule::interleaved;
        setup.config.virtual_stages = v_stages;
      }
      const auto r = training_step(ctx, setup);
      v.category = "training";
      if (metric == "iteration_s") {
        v.predicted = r.step_s;
        v.unit = "s";
      } else {
        // Narayanan et al.'s 96-factor TFLOP/s per GPU counts the recomputed forward (HFU-like).
        v.predicted = r.hardware_flops_per_step / static_cast<double>(gpus) / r.step_s / 1e12;
        v.unit = "TFLOP/s per GPU";
      }
    }
    report.rows.push_back(std::move(v));
  }
  report.summarize();
  return report;
}

void validate_own(ValidationReport& report, const std::vector<results::ResultSet>& sets, const specs::GpuSpec& spec,
                  const std::vector<std::string>& names) {
  // Measured value per record key: median over the files that have it.
  std::map<std::string, std::vector<double>> measured;
  std::map<std::string, const results::Record*> first;
  for (const auto& set : sets) {
    for (const auto& r : set.records) {
      if (r.outcome != results::Outcome::passed) continue;
      if (r.benchmark == "gemm") {
        const auto* tp = r.find_metric("throughput");
        const auto prec = r.params.value("precision", "");
        if (!tp || (prec != "bf16" && prec != "fp8" && prec != "fp16" && prec != "int8")) continue;
        measured[r.key].push_back(tp->value);
      } else if (r.benchmark == "memory") {
        const auto* bw = r.find_metric("bandwidth");
        if (!bw || r.params.value("l2_resident", false) || r.params.value("op", "") == "ce_copy") continue;
        measured[r.key].push_back(bw->value);
      } else if (r.benchmark == "collectives" && r.params.value("op", "") == "all_reduce") {
        const auto* time = r.find_metric("time");
        if (!time || time->unit != "us") continue;
        measured[r.key].push_back(time->value);
      } else {
        continue;
      }
      first.emplace(r.key, &r);
    }
  }
  const std::string files = fmt::format("{} result file(s), first {}", names.size(), names.empty() ? "" : names[0]);
  for (const auto& [key, values] : measured) {
    const auto& r = *first[key];
    SpeedContext ctx;
    ctx.gpu = &spec;
    try {
      ctx.calibration = calibration_from_results(sets, spec, key);  // leave this record out
    } catch (const UsageError&) {
      // The files hold no other record to calibrate from: this row cannot be predicted, the others can.
      report.skipped.push_back(
          fmt::format("{}: no other GEMM, memory or collective record of {} in the files to "
                      "predict it from (leave-one-out)",
                      key, spec.name));
      continue;
    }
    ValidationRow v;
    v.id = key;
    v.measured = median(values);
    v.calibration = "measured, leave-one-out";
    v.source = files;
    if (r.benchmark == "gemm") {
      const auto prec = *specs::parse_precision(r.params.value("precision", ""));
      const double m = r.params.value("m", 0.0), n = r.params.value("n", 0.0), k = r.params.value("k", 0.0);
      const double eb = prec == specs::Precision::bf16 || prec == specs::Precision::fp16 ? 2 : 1;
      const auto op = gemm_time(ctx, prec, key, m, n, k, eb);
      v.category = "own_gemm";
      v.predicted = op.flops / op.seconds / 1e12;
      v.unit = "TFLOP/s";
      v.what = fmt::format("GEMM {} m={} n={} k={} on {}", specs::to_string(prec), m, n, k, spec.name);
    } else if (r.benchmark == "collectives") {
      const double bytes = r.params.value("bytes", 0.0);
      const auto ranks = r.params.value("ranks", std::int64_t{2});
      if (!ctx.calibration.allreduce) continue;
      v.category = "own_collective";
      v.predicted = allreduce_seconds(*ctx.calibration.allreduce, bytes, ranks) * 1e6;
      v.unit = "us";
      v.what = fmt::format("NCCL all-reduce {:.0f} B over {} x {} (α-β)", bytes, ranks, spec.name);
    } else {
      const double bytes = r.params.value("array_bytes", 0.0);
      v.category = "own_memory";
      v.predicted = spec.memory_bandwidth_gbs.value * ctx.calibration.memory_efficiency(bytes);
      v.unit = "GB/s";
      v.what = fmt::format("memory {} {:.0f} MiB on {}", r.params.value("op", ""), bytes / (1 << 20), spec.name);
    }
    report.rows.push_back(std::move(v));
  }
  report.summarize();
}

void validate_serving(ValidationReport& report, const std::vector<results::ResultSet>& sets, const specs::SpecDb& specs,
                      const workloads::ModelCatalog& catalog, const std::vector<Calibration>& calibrations,
                      const std::vector<FrameworkProfile>& frameworks, const std::vector<std::string>& names) {
  const auto& framework = find_framework(frameworks, "gpuscout", "framework");
  for (std::size_t f = 0; f < sets.size(); ++f) {
    const auto& set = sets[f];
    for (const auto& peak : set.records) {
      const std::string suffix = "/server/peak";
      if (peak.benchmark != "serve" || peak.key.size() < suffix.size() ||
          peak.key.compare(peak.key.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      const auto* peak_rate = peak.find_metric("peak_rate");
      const std::string base = peak.key.substr(0, peak.key.size() - suffix.size());  // serve/load/MODEL/tpN
      const std::string engine_key = "serve/engine" + base.substr(std::string("serve/load").size());
      const results::Record* engine = nullptr;
      const results::Record* first_probe = nullptr;
      for (const auto& r : set.records) {
        if (r.key == engine_key) engine = &r;
        if (!first_probe && r.key.rfind(base + "/server/probe_", 0) == 0) first_probe = &r;
      }
      if (!peak_rate || !engine || !first_probe || set.gpus.empty() || set.gpus[0].spec_name.empty()) continue;
      const auto& gpu = specs.get(set.gpus[0].spec_name);
      const auto& info = catalog.get(peak.params.value("model", ""));
      SpeedContext ctx;
      ctx.gpu = &gpu;
      ctx.calibration = calibration_for(gpu, calibrations);
      ctx.framework = framework;
      // The engine as it ran: files from before the pruned last layer (session 16) do not say so.
      ctx.framework.prunes_last_layer = engine->params.value("last_layer_pruned", false);
      InferenceSetup setup;
      setup.arch = info.arch;
      setup.par.tp = peak.params.value("tp", std::int64_t{1});
      setup.weights = parse_quantization(peak.params.value("dtype", "bf16"), "dtype");
      EngineLimits limits;
      limits.max_running = engine->params.value("max_running", limits.max_running);
      // The load run's own step budget where its records carry it; older result files carry only the
      // engine's, which was then also the budget.
      limits.max_step_tokens =
          peak.params.value("max_step_tokens", engine->params.value("max_step_tokens", limits.max_step_tokens));
      limits.block_size = engine->params.value("kv_block_size", limits.block_size);
      QueueingSettings q;
      q.isl = peak.params.value("input_tokens", 0);
      q.osl = peak.params.value("output_tokens", 0);
      q.ttft_bound_ms = peak.params.value("ttft_bound_ms", 0.0);
      q.tpot_bound_ms = peak.params.value("tpot_bound_ms", 0.0);
      q.warmup_requests = first_probe->params.value("warmup_requests", q.warmup_requests);
      const double first_rate = first_probe->params.value("target_rate", 1.0);
      const std::string where = fmt::format("{} TP{} on {} x {}, ISL {} / OSL {}", info.name, setup.par.tp,
                                            setup.par.tp, gpu.name, q.isl, q.osl);
      const std::string source = fmt::format("{} ({})", f < names.size() ? names[f] : "result file", peak.key);
      const std::string cal = fmt::format("{}, framework gpuscout", ctx.calibration.tier);
      const auto predicted = simulate_peak(ctx, setup, limits, q, first_rate);
      ValidationRow v;
      v.id = peak.key;
      v.category = "own_serving";
      v.what = fmt::format("Server find-peak, p99 TTFT <= {} ms, p99 TPOT <= {} ms: {}", q.ttft_bound_ms,
                           q.tpot_bound_ms, where);
      v.measured = peak_rate->value;
      v.predicted = predicted.peak_rate;
      v.unit = "requests/s";
      v.calibration = cal;
      v.source = source;
      report.rows.push_back(v);
      if (const auto* tpot = first_probe->find_metric("tpot")) {
        const auto at = simulate_server(ctx, setup, limits, q, first_rate);
        v.id = first_probe->key;
        v.what = fmt::format("median TPOT at {} requests/s: {}", first_rate, where);
        v.measured = tpot->value;
        v.predicted = at.tpot_ms.p50;
        v.unit = "ms";
        v.source = fmt::format("{} ({})", f < names.size() ? names[f] : "result file", first_probe->key);
        report.rows.push_back(v);
      }
    }
  }
  report.summarize();
}

}  // namespace gpuscout::model
