#include "gpuscout/bench/serve_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

namespace gpuscout::bench {

std::int64_t layer_params(const infer::TransformerConfig& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t per_layer = h * m.qkv_dim() + static_cast<std::int64_t>(m.q_dim()) * h +
                                 3 * h * static_cast<std::int64_t>(m.ffn_hidden) + 2 * h;
  return m.layers * per_layer;
}

DecodeStepBytes decode_step_bytes(const infer::TransformerConfig& m, int batch, int context, int tp,
                                  infer::WeightFormat format) {
  constexpr int kBf16 = 2;
  DecodeStepBytes b;
  const std::int64_t embedding = m.tied_embeddings ? 0 : std::int64_t{m.vocab} * m.hidden;
  const std::int64_t projections = m.projection_params();
  const std::int64_t others = m.weight_params() - embedding - projections;
  b.weight_bytes = projections * (format == infer::WeightFormat::fp8_e4m3 ? 1 : kBf16) + others * kBf16;
  b.kv_bytes = std::int64_t{batch} * (context + 1) * m.kv_bytes_per_token(kBf16);
  b.per_gpu = static_cast<double>(b.weight_bytes + b.kv_bytes) / tp;
  return b;
}

double roofline_step_ms(double bytes_per_gpu, double copy_gbps) {
  return 1e3 * bytes_per_gpu / (copy_gbps * 1e9);
}

double hbm_roofline_pct(double bytes_per_gpu, double step_seconds, double copy_gbps) {
  return 100.0 * bytes_per_gpu / step_seconds / (copy_gbps * 1e9);
}

std::int64_t kv_blocks_for(std::int64_t tokens, int block_size) {
  return (tokens + block_size - 1) / block_size;
}

double prefill_flops(const infer::TransformerConfig& m, std::int64_t tokens, bool last_layer_pruned) {
  const double t = static_cast<double>(tokens);
  const double per_layer = static_cast<double>(layer_params(m)) / m.layers;
  const double causal = 4.0 * m.heads * m.head_dim * t * (t + 1) / 2.0;
  const double lm_head = 2.0 * static_cast<double>(m.vocab) * m.hidden;
  if (!last_layer_pruned || m.layers == 0) return m.layers * (2.0 * per_layer * t + causal) + lm_head;
  // The last layer: attention norm and QKV for every token, the rest for the last one.
  const double every_token = static_cast<double>(m.hidden) * m.qkv_dim() + m.hidden;
  const double last = std::min(t, 1.0);
  const double last_layer =
      2.0 * every_token * t + 2.0 * (per_layer - every_token) * last + 4.0 * m.heads * m.head_dim * t * last;
  return (m.layers - 1) * (2.0 * per_layer * t + causal) + last_layer + lm_head;
}

namespace {

// The fastest passed square GEMM of `precision` ("bf16", "fp8") in `records`, or null.
const results::Record* best_square_gemm(const std::vector<results::Record>& records, const std::string& precision) {
  const std::string prefix = fmt::format("gemm/{}/m", precision);
  const results::Record* best = nullptr;
  double best_tflops = 0;
  for (const results::Record& r : records) {
    if (r.benchmark != "gemm" || r.outcome != results::Outcome::passed || r.key.rfind(prefix, 0) != 0) continue;
    const auto& p = r.params;
    const bool square = p.contains("m") && p.contains("n") && p.contains("k") && p["m"] == p["n"] && p["n"] == p["k"];
    const results::Metric* m = r.find_metric("throughput");
    if (!square || m == nullptr || m->unit != "TFLOP/s") continue;
    if (m->value > best_tflops) best = &r, best_tflops = m->value;
  }
  return best;
}

}  // namespace

int annotate_prefill_vs_gemm(std::vector<results::Record>& records) {
  int annotated = 0;
  for (results::Record& r : records) {
    if (r.benchmark != "serve" || r.outcome != results::Outcome::passed || r.key.rfind("serve/prefill/", 0) != 0) {
      continue;
    }
    const results::Metric* m = r.find_metric("throughput");
    if (m == nullptr || m->unit != "TFLOP/s") continue;
    // The engine's GEMM precision: FP8 weights multiply FP8-quantized activations.
    const std::string precision =
        r.params.contains("dtype") && r.params["dtype"].is_string() ? r.params["dtype"].get<std::string>() : "bf16";
    const results::Record* gemm = best_square_gemm(records, precision);
    if (gemm == nullptr) continue;
    const double gemm_tflops = gemm->find_metric("throughput")->value;
    results::Metric pct;
    pct.name = "throughput_pct_of_gemm";
    pct.value = 100.0 * m->value / gemm_tflops;
    pct.unit = "%";
    pct.statistic = "value";
    pct.note = fmt::format("prefill TFLOP/s over the best {} square GEMM of this run ({}: {:.1f} TFLOP/s)", precision,
                           gemm->key, gemm_tflops);
    r.extra["gemm_reference"] = {{"key", gemm->key}, {"throughput_tflops", gemm_tflops}};
    r.metrics.push_back(std::move(pct));
    ++annotated;
  }
  return annotated;
}

}  // namespace gpuscout::bench
