#include "gpuscout/bench/serve_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gpuscout::bench {

int ServeOptions::max_sequence_tokens() const {
  int longest = isl + osl;
  for (int t : prefill_tokens) longest = std::max(longest, t + 1);  // the prefill samples one token
  if (load) {
    const serve::LengthSpec& l = load->lengths;
    if (l.kind == serve::LengthSpec::Kind::from_file) {
      for (const auto& [in, out] : l.pairs) longest = std::max(longest, in + out);
    } else {
      longest = std::max(longest, std::max(l.input_min, l.input_max) + std::max(l.output_min, l.output_max));
    }
  }
  return longest;
}

bool names_benchmark(const std::vector<std::string>& selectors, std::string_view key) {
  return std::any_of(selectors.begin(), selectors.end(), [key](const std::string& s) {
    return s == key || (s.size() > key.size() && s.compare(0, key.size(), key) == 0 && s[key.size()] == '/');
  });
}

std::string model_slug(std::string_view catalog_name) {
  std::string out;
  for (unsigned char c : catalog_name) out.push_back(std::isspace(c) ? '-' : static_cast<char>(std::tolower(c)));
  return out;
}

std::int64_t layer_params(const infer::TransformerConfig& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t per_layer = h * m.qkv_dim() + static_cast<std::int64_t>(m.q_dim()) * h +
                                 3 * h * static_cast<std::int64_t>(m.ffn_hidden) + 2 * h;
  return m.layers * per_layer;
}

double prefill_flops(const infer::TransformerConfig& m, std::int64_t tokens) {
  const double t = static_cast<double>(tokens);
  const double matmuls = 2.0 * static_cast<double>(layer_params(m)) * t;
  const double attention = static_cast<double>(m.layers) * 4.0 * m.heads * m.head_dim * t * (t + 1) / 2.0;
  const double lm_head = 2.0 * static_cast<double>(m.vocab) * m.hidden;
  return matmuls + attention + lm_head;
}

int annotate_prefill_vs_gemm(std::vector<results::Record>& records) {
  const results::Record* best = nullptr;
  double best_tflops = 0;
  for (const results::Record& r : records) {
    if (r.benchmark != "gemm" || r.outcome != results::Outcome::passed || r.key.rfind("gemm/bf16/m", 0) != 0) continue;
    const auto& p = r.params;
    const bool square = p.contains("m") && p.contains("n") && p.contains("k") && p["m"] == p["n"] && p["n"] == p["k"];
    const results::Metric* m = r.find_metric("throughput");
    if (!square || m == nullptr || m->unit != "TFLOP/s") continue;
    if (m->value > best_tflops) best = &r, best_tflops = m->value;
  }
  if (best == nullptr) return 0;
  const std::string gemm_key = best->key;
  int annotated = 0;
  for (results::Record& r : records) {
    if (r.benchmark != "serve" || r.outcome != results::Outcome::passed || r.key.rfind("serve/prefill/", 0) != 0) {
      continue;
    }
    const results::Metric* m = r.find_metric("throughput");
    if (m == nullptr || m->unit != "TFLOP/s") continue;
    results::Metric pct;
    pct.name = "throughput_pct_of_gemm";
    pct.value = 100.0 * m->value / best_tflops;
    pct.unit = "%";
    pct.statistic = "value";
    pct.note = fmt::format("prefill TFLOP/s over the best BF16 square GEMM of this run ({}: {:.1f} TFLOP/s)", gemm_key,
                           best_tflops);
    r.metrics.push_back(std::move(pct));
    r.extra["gemm_reference"] = {{"key", gemm_key}, {"throughput_tflops", best_tflops}};
    ++annotated;
  }
  return annotated;
}

}  // namespace gpuscout::bench
