#include "gpuscout/model/spec_sheet_fit.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuscout/util/error.hpp"

namespace gpuscout::model {

WeightFormat parse_weight_format(const std::string& text, const std::string& flag) {
  if (text == "bf16") return {"bf16", 2.0, specs::Precision::bf16};
  if (text == "fp16") return {"fp16", 2.0, specs::Precision::fp16};
  if (text == "fp8") return {"fp8", 1.0, specs::Precision::fp8};
  if (text == "int8") return {"int8", 1.0, specs::Precision::int8};
  throw UsageError(fmt::format("{}: '{}' is not a weight format; expected bf16, fp16, fp8 or int8", flag, text));
}

SpecSheetFit spec_sheet_fit(const specs::GpuSpec& gpu, const workloads::ModelInfo& model, const WeightFormat& weights,
                            const FitAssumptions& assumptions) {
  SpecSheetFit fit;
  const auto params = model.params();
  const double weight_bytes = static_cast<double>(params.total) * weights.bytes_per_param;
  fit.weight_gb = weight_bytes / 1e9;
  fit.kv_bytes_per_token = workloads::kv_cache_bytes_per_token(model.arch, 2.0);

  const double usable_per_gpu =
      gpu.memory_gb.value * 1e9 * assumptions.usable_memory_fraction - assumptions.runtime_reserve_gb * 1e9;
  const auto& arch = model.arch;
  for (int tp = 1; tp <= assumptions.max_gpus; tp *= 2) {
    if (arch.heads % tp != 0) break;  // tensor parallelism splits whole attention heads
    const double free_per_gpu = usable_per_gpu - weight_bytes / tp;
    if (free_per_gpu <= 0) continue;
    // MLA caches one latent per token that every rank keeps; GQA splits KV heads across ranks and
    // replicates them once the ranks outnumber the KV heads.
    double kv_per_gpu = fit.kv_bytes_per_token;
    if (!arch.is_mla() && arch.kv_heads > 0) {
      kv_per_gpu *=
          static_cast<double>(std::max<std::int64_t>(arch.kv_heads / tp, 1)) / static_cast<double>(arch.kv_heads);
    }
    const double kv_tokens = kv_per_gpu > 0 ? free_per_gpu / kv_per_gpu : 0.0;
    if (kv_per_gpu > 0 && kv_tokens < assumptions.min_kv_tokens) continue;
    fit.gpus_needed = tp;
    fit.kv_tokens_capacity = kv_tokens;
    break;
  }
  if (!fit.gpus_needed) {
    fit.notes.push_back(fmt::format(
        "{} {} weights ({:.0f} GB) and {:.0f} tokens of KV cache do not fit {} x {} with tensor parallelism",
        model.name, weights.name, fit.weight_gb, assumptions.min_kv_tokens, assumptions.max_gpus, gpu.name));
    return fit;
  }
  const double gpus = *fit.gpus_needed;
  fit.decode_tokens_per_s_bound = gpus * gpu.memory_bandwidth_gbs.value * 1e9 / weight_bytes;
  if (const auto peak = gpu.peak_tflops(weights.compute)) {
    const double active = static_cast<double>(params.active > 0 ? params.active : params.total);
    fit.prefill_tokens_per_s_bound = gpus * *peak * 1e12 / (2.0 * active);
  } else {
    fit.notes.push_back(fmt::format("{} has no {} tensor-core peak: prefill bound not given", gpu.name,
                                    specs::display_name(weights.compute)));
  }
  return fit;
}

std::vector<std::string> describe(const FitAssumptions& a) {
  return {
      fmt::format("assumption: {:.0f}% of GPU memory usable (vLLM default), minus {:.1f} GB per GPU for the CUDA "
                  "context and workspaces",
                  a.usable_memory_fraction * 100, a.runtime_reserve_gb),
      fmt::format("GPUs: smallest tensor-parallel degree up to {} that holds the weights and KV cache for {:.0f} "
                  "tokens (one long request); KV cache in BF16",
                  a.max_gpus, a.min_kv_tokens),
      "decode bound: batch 1, every weight read once per token at the datasheet bandwidth (no efficiency applied)",
      "prefill bound: 2 FLOPs per active parameter per token at the dense peak (attention ignored, no efficiency)",
  };
}

}  // namespace gpuscout::model
