#include "gpuscout/model/spec_sheet_fit.hpp"

#include <fmt/format.h>

namespace gpuscout::model {
namespace {

double weight_bytes(const InferenceMemory& memory) {
  return memory.breakdown.bytes_of("weights_linear") + memory.breakdown.bytes_of("weights_other");
}

}  // namespace

SpecSheetFit spec_sheet_fit(const specs::GpuSpec& gpu, const workloads::ModelInfo& model, const Quantization& weights,
                            const FitAssumptions& assumptions) {
  SpecSheetFit fit;
  const auto& arch = model.arch;
  InferenceConfig config;
  config.weights = weights;
  config.context = assumptions.context;
  config.batch = 1;
  config.runtime = assumptions.runtime;
  const double capacity = gpu_capacity_bytes(gpu);
  fit.weight_gib = weight_bytes(inference_memory(arch, Parallelism{}, config, capacity)) / kGiB;

  std::optional<InferenceMemory> chosen;
  for (int tp = 1; tp <= assumptions.max_gpus; tp *= 2) {
    if (arch.heads % tp != 0) break;  // tensor parallelism splits whole attention heads
    auto memory = inference_memory(arch, Parallelism{tp, 1, 1, 1}, config, capacity);
    if (!memory.breakdown.fits()) continue;
    fit.gpus_needed = tp;
    fit.kv_tokens_capacity = memory.kv_tokens_capacity;
    chosen = std::move(memory);
    break;
  }
  if (!chosen) {
    fit.notes.push_back(
        fmt::format("{} {} weights ({:.0f} GiB) and one {}-token request do not fit {} x {} with tensor parallelism",
                    model.name, weights.name, fit.weight_gib, assumptions.context, assumptions.max_gpus, gpu.name));
    return fit;
  }
  // Batch 1: each GPU streams its own share of the weights once per token, all GPUs at once.
  fit.decode_tokens_per_s_bound = gpu.memory_bandwidth_gbs.value * 1e9 / weight_bytes(*chosen);
  if (const auto peak = gpu.peak_tflops(weights.compute)) {
    const auto params = model.params();
    const double active = static_cast<double>(params.active > 0 ? params.active : params.total);
    fit.prefill_tokens_per_s_bound = *fit.gpus_needed * *peak * 1e12 / (2.0 * active);
  } else {
    fit.notes.push_back(fmt::format("{} has no {} tensor-core peak: prefill bound not given", gpu.name,
                                    specs::display_name(weights.compute)));
  }
  return fit;
}

std::vector<std::string> describe(const FitAssumptions& a) {
  return {
      fmt::format("GPUs: smallest tensor-parallel degree up to {} that holds the weights and one {}-token request "
                  "(memory model of `gpuscout plan`: {:.0f}% of memory usable, CUDA context, NCCL buffers, "
                  "activations of the prefill chunk; labelled assumptions there)",
                  a.max_gpus, a.context, a.runtime.memory_fraction * 100),
      "KV room: tokens of BF16 KV cache left beside that request, per replica",
      "decode bound: batch 1, every weight of a GPU read once per token at the datasheet bandwidth (no efficiency "
      "applied)",
      "prefill bound: 2 FLOPs per active parameter per token at the dense peak (attention ignored, no efficiency)",
  };
}

}  // namespace gpuscout::model
