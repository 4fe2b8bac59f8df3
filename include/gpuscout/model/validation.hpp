#pragma once
// Validation of the speed model (docs/modeling.md "Validation"): published measured results kept as test
// data with their sources (data/validation/public_results.csv), and the project's own measured H200
// GEMM and memory figures predicted leave-one-out (each record from a calibration built without it).
// Per-row error and per-category mean absolute percentage error (MAPE). No per-row tuning.
#include <map>
#include <string>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/calibration.hpp"
#include "gpuscout/model/speed.hpp"
#include "gpuscout/results/result.hpp"
#include "gpuscout/specs/spec_db.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model {

struct ValidationRow {
  std::string id;
  std::string category;  // "training", "inference_throughput", "ttft", "own_gemm", "own_memory"
  std::string what;
  double measured = 0;
  double predicted = 0;
  std::string unit;
  std::string calibration;  // tier of the calibration used
  std::string source;
  double error_pct() const { return measured != 0 ? 100 * (predicted - measured) / measured : 0; }
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<std::string> skipped;          // rows without a gpuscout mapping, with why
  std::map<std::string, double> mape_pct;    // per category
  std::map<std::string, std::size_t> count;  // rows per category
  void summarize();
};

// CSV rows of one file: header names -> values. Quoted fields may hold commas.
std::vector<std::map<std::string, std::string>> parse_csv(const std::string& text);

// Builds the architecture of a row's `gpuscout_model`: a catalog name, or "gpt:layers=L,hidden=H,heads=A"
// (GPT-3-style: LayerNorm, MLP 4h with GELU, learned positions 2048, vocabulary 51200, tied embeddings).
workloads::ModelArch validation_arch(const std::string& text, const workloads::ModelCatalog& catalog);

// Runs the public table. `calibrations`: the measured tables available (embedded H200 by default).
ValidationReport validate_public(const std::string& csv_text, const specs::SpecDb& specs,
                                 const workloads::ModelCatalog& catalog, const std::vector<Calibration>& calibrations,
                                 const std::vector<FrameworkProfile>& frameworks);

// Predicts every passed GEMM and HBM memory record of `sets` (one GPU type) leave-one-out and adds them to
// `report` (categories own_gemm, own_memory).
void validate_own(ValidationReport& report, const std::vector<results::ResultSet>& sets, const specs::GpuSpec& spec,
                  const std::vector<std::string>& names);

// Predicts the project's own measured serve runs under the gpuscout engine's framework profile (category
// own_serving), each with the serve/engine record of the same model and TP: Server find-peak runs
// (serve/load/MODEL/tpN/server/peak and their probes: the peak rate and the median TPOT of the first
// probe) and Concurrency points (output tokens/s) with the queueing simulation (serving_sim.hpp); the
// passed decode cases (serve/decode/...: the step time, one engine_step of the batch at its context); and
// the static batch (serve/static/...: output tokens/s and the median TTFT, its requests simulated all at
// once under the run's step budget). The engine's limits (max running, step tokens, KV block) come from
// its record; its KV room comes from the memory model (a prediction, not the measured figure).
void validate_serving(ValidationReport& report, const std::vector<results::ResultSet>& sets, const specs::SpecDb& specs,
                      const workloads::ModelCatalog& catalog, const std::vector<Calibration>& calibrations,
                      const std::vector<FrameworkProfile>& frameworks, const std::vector<std::string>& names);

}  // namespace gpuscout::model
