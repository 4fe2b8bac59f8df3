#pragma once
// First-order "does this model fit, and how fast could it be at best" figures for serving a model on
// a GPU, from the spec sheet: the memory model (model/memory.hpp) picks the smallest tensor-parallel
// degree that holds the weights plus one long request, and the two serving rooflines bound the speed
// (batch-1 decode streams every weight of a GPU once per token; prefill is bound by the dense peak).
// The bounds apply no efficiency and say so; `gpuscout plan` gives the full memory breakdown.
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/model/memory.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::model {

struct FitAssumptions {
  int max_gpus = 8;             // one 8-GPU node: tensor parallelism stays inside NVLink
  std::int64_t context = 8192;  // KV room for one request of this many tokens, or it does not "fit"
  RuntimeReserve runtime;       // memory fraction, CUDA context, NCCL buffers (labelled assumptions)
};

struct SpecSheetFit {
  double weight_gib = 0;  // all weights at the chosen format (one copy, unsplit)
  // Smallest tensor-parallel degree (1, 2, 4, 8 up to max_gpus) that the model's heads allow and whose
  // usable memory holds its share of the weights plus one `context`-token request; nullopt when none.
  std::optional<int> gpus_needed;
  std::optional<double> kv_tokens_capacity;          // KV cache room per replica at gpus_needed, tokens
  std::optional<double> decode_tokens_per_s_bound;   // batch 1: bandwidth / weight bytes per GPU
  std::optional<double> prefill_tokens_per_s_bound;  // gpus x dense peak / (2 x active params)
  std::vector<std::string> notes;                    // why a figure is missing
};

SpecSheetFit spec_sheet_fit(const specs::GpuSpec& gpu, const workloads::ModelInfo& model, const Quantization& weights,
                            const FitAssumptions& assumptions = {});

// The assumptions as printable lines, for the notes under a table.
std::vector<std::string> describe(const FitAssumptions& assumptions);

}  // namespace gpuscout::model
