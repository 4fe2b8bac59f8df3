// Validation of the speed model against published and own measurements (validation.hpp).
#include "gpuscout/model/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

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
    ctx.calibration = calibration_from_results(sets, spec, key);  // leave this record out
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

}  // namespace gpuscout::model
