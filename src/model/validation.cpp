// Validation of the speed model against published and own measurements (validation.hpp).
#include "gpuscout/model/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
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
      v.what = fmt::format("NCCL all-reduce {:.0f} B over {} x {} ({})", bytes, ranks, spec.name,
                           ctx.calibration.allreduce->time_by_bytes.empty() ? "α-β line" : "measured curve");
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

namespace {

// A measured load run of the gpuscout engine, set up for the queueing simulation as it ran.
struct MeasuredLoad {
  SpeedContext ctx;
  InferenceSetup setup;
  EngineLimits limits;
  QueueingSettings q;
  std::string where, calibration;
};

// The serve/engine record that goes with a serve record of key serve/KIND/MODEL/tpN[-fp8]/...:
// serve/engine/MODEL/tpN[-fp8]; empty when the key has no such parts.
std::string engine_key_of(const std::string& key) {
  const auto kind_end = key.find('/', std::string("serve/").size());
  if (key.rfind("serve/", 0) != 0 || kind_end == std::string::npos) return {};
  const auto model_end = key.find('/', kind_end + 1);
  if (model_end == std::string::npos) return {};
  const auto tp_end = key.find('/', model_end + 1);
  return "serve/engine" + key.substr(kind_end, tp_end == std::string::npos ? std::string::npos : tp_end - kind_end);
}

// The simulation's inputs for the load record `load` of `set` (its serve/engine record gives the engine's
// limits; `load` the lengths, bounds and step budget); nullopt when the file lacks what it needs.
std::optional<MeasuredLoad> measured_load(const results::ResultSet& set, const results::Record& load,
                                          const specs::SpecDb& specs, const workloads::ModelCatalog& catalog,
                                          const std::vector<Calibration>& calibrations,
                                          const FrameworkProfile& framework) {
  const std::string engine_key = engine_key_of(load.key);
  const auto engine = std::find_if(set.records.begin(), set.records.end(),
                                   [&](const results::Record& r) { return r.key == engine_key; });
  if (engine == set.records.end() || set.gpus.empty() || set.gpus[0].spec_name.empty()) return std::nullopt;
  MeasuredLoad m;
  const auto& gpu = specs.get(set.gpus[0].spec_name);
  const auto& info = catalog.get(load.params.value("model", ""));
  m.ctx.gpu = &gpu;
  m.ctx.calibration = calibration_for(gpu, calibrations);
  m.ctx.framework = framework;
  // The engine as it ran: files from before the pruned last layer (session 16) do not say so.
  m.ctx.framework.prunes_last_layer = engine->params.value("last_layer_pruned", false);
  // And its gate/up GEMM: files from before the fused SwiGLU kernel (session 21) carry no swiglu_min_rows,
  // and ran without it.
  m.ctx.framework.fused_swiglu_min_tokens = engine->params.value("swiglu_min_rows", 0.0);
  m.ctx.framework.fused_swiglu_min_waves = 0;
  m.setup.arch = info.arch;
  m.setup.par.tp = load.params.value("tp", std::int64_t{1});
  m.setup.weights = parse_quantization(load.params.value("dtype", "bf16"), "dtype");
  m.limits.max_running = engine->params.value("max_running", m.limits.max_running);
  // The load run's own step budget where its records carry it; older result files carry only the
  // engine's, which was then also the budget.
  m.limits.max_step_tokens =
      load.params.value("max_step_tokens", engine->params.value("max_step_tokens", m.limits.max_step_tokens));
  m.limits.block_size = engine->params.value("kv_block_size", m.limits.block_size);
  // And its KV cache as it was sized (the engine takes a fraction of the memory left after the
  // weights, not the memory model's share of the whole GPU): where the two differ, a static batch
  // that the engine held at once would otherwise be simulated in waves. Files without it (none of the
  // committed serve files lacks it) fall back to the memory model.
  m.limits.kv_tokens = engine->params.value("kv_cache_tokens", std::int64_t{0});
  m.q.isl = load.params.value("input_tokens", 0);
  m.q.osl = load.params.value("output_tokens", 0);
  m.q.range_ratio = load.params.value("range_ratio", 0.0);
  m.q.ttft_bound_ms = load.params.value("ttft_bound_ms", 0.0);
  m.q.tpot_bound_ms = load.params.value("tpot_bound_ms", 0.0);
  m.q.warmup_requests = load.params.value("warmup_requests", m.q.warmup_requests);
  m.where = fmt::format("{} TP{} on {} x {}, ISL {} / OSL {}", info.name, m.setup.par.tp, m.setup.par.tp, gpu.name,
                        m.q.isl, m.q.osl);
  m.calibration = fmt::format("{}, framework gpuscout", m.ctx.calibration.tier);
  return m;
}

// One own_serving row: the record `id` of `file`, measured against predicted.
ValidationRow serving_row(const std::string& id, const std::string& what, double measured, double predicted,
                          const std::string& unit, const MeasuredLoad& m, const std::string& file) {
  ValidationRow v;
  v.id = id;
  v.category = "own_serving";
  v.what = what;
  v.measured = measured;
  v.predicted = predicted;
  v.unit = unit;
  v.calibration = m.calibration;
  v.source = fmt::format("{} ({})", file, id);
  return v;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void validate_serving(ValidationReport& report, const std::vector<results::ResultSet>& sets, const specs::SpecDb& specs,
                      const workloads::ModelCatalog& catalog, const std::vector<Calibration>& calibrations,
                      const std::vector<FrameworkProfile>& frameworks, const std::vector<std::string>& names) {
  const auto& framework = find_framework(frameworks, "gpuscout", "framework");
  for (std::size_t f = 0; f < sets.size(); ++f) {
    const auto& set = sets[f];
    const std::string file = f < names.size() ? names[f] : "result file";
    for (const auto& load : set.records) {
      if (load.benchmark != "serve") continue;
      const bool passed = load.outcome == results::Outcome::passed;
      if (load.key.rfind("serve/decode/", 0) == 0) {
        if (!passed) continue;
        // A decode case: B sequences at C tokens of context, one step of the engine (its median).
        const auto* step = load.find_metric("step_time");
        const double batch = load.params.value("batch", 0.0), context = load.params.value("context_tokens", 0.0);
        auto m = measured_load(set, load, specs, catalog, calibrations, framework);
        if (!step || batch < 1 || !m) continue;
        const double predicted = engine_step(m->ctx, m->setup, {{batch, 1, context}}, batch).seconds * 1e3;
        report.rows.push_back(serving_row(
            load.key, fmt::format("decode step at batch {} and {} tokens of context: {}", batch, context, m->where),
            step->value, predicted, "ms", *m, file));
        continue;
      }
      if (load.key.rfind("serve/static/", 0) == 0) {
        if (!passed) continue;
        // The static batch: its requests all at once (a closed loop of as many clients as requests, none
        // replaced), under the run's step budget; output tokens/s and the median TTFT.
        const auto* output = load.find_metric("output_tokens_per_s");
        const auto* ttft = load.find_metric("ttft");
        const int requests = load.params.value("requests", 0);
        auto m = measured_load(set, load, specs, catalog, calibrations, framework);
        if (!output || !ttft || requests < 1 || !m) continue;
        m->q.min_requests = requests;
        m->q.warmup_requests = 0;
        m->q.min_duration_s = 0;
        const auto predicted = simulate_concurrency(m->ctx, m->setup, m->limits, m->q, requests);
        const std::string what = fmt::format("static batch of {}: {}", requests, m->where);
        report.rows.push_back(serving_row(load.key + "/output_tokens_per_s", "output tokens/s, " + what, output->value,
                                          predicted.output_tokens_per_s, "tokens/s", *m, file));
        report.rows.push_back(serving_row(load.key + "/ttft", "median TTFT, " + what, ttft->value,
                                          predicted.ttft_ms.p50, "ms", *m, file));
        continue;
      }
      if (load.key.rfind("serve/load/", 0) != 0) continue;
      const std::string suffix = "/server/peak";
      if (ends_with(load.key, suffix)) {
        // Find-peak: the peak rate and the median TPOT of its first probe.
        const auto* peak_rate = load.find_metric("peak_rate");
        const std::string base = load.key.substr(0, load.key.size() - suffix.size());  // serve/load/MODEL/tpN
        const auto first_probe = std::find_if(set.records.begin(), set.records.end(), [&](const results::Record& r) {
          return r.key.rfind(base + "/server/probe_", 0) == 0;
        });
        if (!peak_rate || first_probe == set.records.end()) continue;
        auto m = measured_load(set, *first_probe, specs, catalog, calibrations, framework);
        if (!m) continue;
        const double first_rate = first_probe->params.value("target_rate", 1.0);
        const auto predicted = simulate_peak(m->ctx, m->setup, m->limits, m->q, first_rate);
        report.rows.push_back(serving_row(load.key,
                                          fmt::format("Server find-peak, p99 TTFT <= {} ms, p99 TPOT <= {} ms: {}",
                                                      m->q.ttft_bound_ms, m->q.tpot_bound_ms, m->where),
                                          peak_rate->value, predicted.peak_rate, "requests/s", *m, file));
        if (const auto* tpot = first_probe->find_metric("tpot")) {
          const auto at = simulate_server(m->ctx, m->setup, m->limits, m->q, first_rate);
          report.rows.push_back(serving_row(first_probe->key,
                                            fmt::format("median TPOT at {} requests/s: {}", first_rate, m->where),
                                            tpot->value, at.tpot_ms.p50, "ms", *m, file));
        }
        continue;
      }
      // A Concurrency point (.../concurrency/c<N>): its output tokens/s, the closed loop simulated with
      // the same clients and measured request count.
      const std::string scenario = load.params.value("scenario", "");
      const auto* output = load.find_metric("output_tokens_per_s");
      const auto clients = load.params.value("concurrency", 0);
      const auto marker = load.key.rfind("/concurrency/c");
      if (scenario != "concurrency" || !output || clients < 1 || marker == std::string::npos ||
          load.outcome != results::Outcome::passed) {
        continue;
      }
      auto m = measured_load(set, load, specs, catalog, calibrations, framework);
      if (!m) continue;
      m->q.min_requests = std::max(1, load.params.value("requests", m->q.min_requests));
      m->q.min_duration_s = 0;  // the measured count already is what the run's duration gave
      const auto predicted = simulate_concurrency(m->ctx, m->setup, m->limits, m->q, clients);
      report.rows.push_back(serving_row(load.key,
                                        fmt::format("output tokens/s with {} request{} in flight (closed loop): {}",
                                                    clients, clients == 1 ? "" : "s", m->where),
                                        output->value, predicted.output_tokens_per_s, "tokens/s", *m, file));
    }
  }
  report.summarize();
}

}  // namespace gpuscout::model
