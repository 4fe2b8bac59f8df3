#pragma once
// First-order "does this model fit, and how fast could it be at best" figures for a model on a GPU,
// from the spec sheet alone: weight bytes against memory, KV cache room, and the two rooflines of
// serving (batch-1 decode streams every weight once per token; prefill is bound by dense peak).
// These are upper bounds with no efficiency applied, and say so; the calibrated models come later.
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model {

struct WeightFormat {
  std::string name;            // "bf16", "fp16", "fp8", "int8"
  double bytes_per_param = 2;  // storage per weight
  specs::Precision compute;    // the tensor-core precision the GEMMs run in
};
// Parses bf16, fp16, fp8, int8; throws UsageError naming `flag` otherwise.
WeightFormat parse_weight_format(const std::string& text, const std::string& flag);

struct FitAssumptions {
  // Labelled assumptions, printed with the result.
  double usable_memory_fraction = 0.90;  // vLLM's default gpu_memory_utilization
  double runtime_reserve_gb = 1.0;       // CUDA context and workspaces per GPU
  int max_gpus = 8;                      // one 8-GPU node: tensor parallel stays inside NVLink
  double min_kv_tokens = 8192;           // KV room for at least one 8k-token request, or it does not "fit"
};

struct SpecSheetFit {
  double weight_gb = 0;  // all weights at the chosen format, 1e9 bytes
  // Smallest tensor-parallel degree (1, 2, 4, 8 up to max_gpus, dividing the attention heads) whose
  // usable memory holds the weights and min_kv_tokens of KV cache; nullopt when none does.
  std::optional<int> gpus_needed;
  double kv_bytes_per_token = 0;                     // whole model, all layers, BF16 cache
  std::optional<double> kv_tokens_capacity;          // KV cache room at gpus_needed, tokens
  std::optional<double> decode_tokens_per_s_bound;   // batch 1: gpus × bandwidth / weight bytes
  std::optional<double> prefill_tokens_per_s_bound;  // gpus × dense peak / (2 × active params)
  std::vector<std::string> notes;                    // why a figure is missing
};

SpecSheetFit spec_sheet_fit(const specs::GpuSpec& gpu, const workloads::ModelInfo& model, const WeightFormat& weights,
                            const FitAssumptions& assumptions = {});

// The assumptions as printable lines, for the notes under a table.
std::vector<std::string> describe(const FitAssumptions& assumptions);

}  // namespace gpuscout::model
