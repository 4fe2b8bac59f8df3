#include "gpuscout/bench/gemm_shapes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/util/error.hpp"
#include "gpuscout/workloads/model_catalog.hpp"

namespace gpuscout::bench::gemm {
namespace {

// Tolerances are on max |y - ref| / rms(ref) over ~256 elements (|y| reaches ~3-4 rms there):
//   fp64 rounding only; fp32 accumulation error ~eps sqrt(k); tf32 inputs rounded to 10 mantissa
//   bits (~5e-4 rms, a few times that at the max); fp16 output rounding 2^-11 |y|; bf16 (and FP8
//   with a bf16 output) rounding 2^-9 |y|. A wrong layout or index gives errors of order 1.
// clang-format off
constexpr PrecisionInfo kInfo[] = {
    {"fp64", "FP64 x FP64 -> FP64, FP64 compute", 8, 8, 8, 0, 0, false, false, "fp64_tensor", 1e-10},
    {"fp32", "FP32 x FP32 -> FP32, FP32 compute (no TF32)", 4, 4, 4, 0, 0, false, false, "fp32", 1e-4},
    {"tf32", "FP32 x FP32 -> FP32, TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)", 4, 4, 4, 8, 0, false, false,
     "tf32", 1e-2},
    {"fp16", "FP16 x FP16 -> FP16, FP32 accumulate", 2, 2, 2, 0, 0, false, false, "fp16", 5e-3},
    {"bf16", "BF16 x BF16 -> BF16, FP32 accumulate", 2, 2, 2, 8, 0, false, false, "bf16", 2e-2},
    {"fp8", "FP8 e4m3 x e4m3 -> BF16, per-tensor scales, FP32 accumulate", 1, 1, 2, 8, 9, false, true, "fp8", 2e-2},
    {"fp8_e5m2", "FP8 e5m2 (X) x e4m3 (W) -> BF16, per-tensor scales, FP32 accumulate", 1, 1, 2, 8, 9, false, true,
     "fp8", 2e-2},
    {"int8", "INT8 x INT8 -> INT32, INT32 accumulate", 1, 1, 4, 7, 5, true, true, "int8", 0.0},
};
// clang-format on

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool is_none(const std::vector<std::string>& list) {
  return list.size() == 1 && (lower(trim(list[0])) == "none" || trim(list[0]).empty());
}

const std::vector<std::string>* find_list(const std::map<std::string, std::vector<std::string>>& lists,
                                          const std::string& name) {
  auto it = lists.find(name);
  return it == lists.end() ? nullptr : &it->second;
}

}  // namespace

const PrecisionInfo& info(GemmPrecision precision) {
  return kInfo[static_cast<std::size_t>(precision)];
}

std::string_view to_string(GemmPrecision precision) {
  return info(precision).key;
}

std::optional<GemmPrecision> parse_precision(std::string_view text) {
  const std::string name = lower(trim(text));
  static const std::map<std::string, GemmPrecision> aliases = {
      {"fp64", GemmPrecision::fp64},         {"float64", GemmPrecision::fp64},      {"double", GemmPrecision::fp64},
      {"fp32", GemmPrecision::fp32},         {"float32", GemmPrecision::fp32},      {"float", GemmPrecision::fp32},
      {"tf32", GemmPrecision::tf32},         {"fp16", GemmPrecision::fp16},         {"float16", GemmPrecision::fp16},
      {"half", GemmPrecision::fp16},         {"bf16", GemmPrecision::bf16},         {"bfloat16", GemmPrecision::bf16},
      {"fp8", GemmPrecision::fp8_e4m3},      {"fp8_e4m3", GemmPrecision::fp8_e4m3}, {"e4m3", GemmPrecision::fp8_e4m3},
      {"fp8_e5m2", GemmPrecision::fp8_e5m2}, {"e5m2", GemmPrecision::fp8_e5m2},     {"int8", GemmPrecision::int8},
  };
  auto it = aliases.find(name);
  if (it == aliases.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> unsupported_reason(GemmPrecision precision, int cc_major, int cc_minor) {
  const PrecisionInfo& p = info(precision);
  if (cc_major > p.min_cc_major || (cc_major == p.min_cc_major && cc_minor >= p.min_cc_minor)) return std::nullopt;
  // FP8 in both forms is one hardware feature: name it once.
  std::string what = p.key.starts_with("fp8") ? "fp8" : std::string(p.key);
  std::transform(what.begin(), what.end(), what.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return fmt::format("{} needs compute capability {}.{}+ (this GPU is {}.{})", what, p.min_cc_major, p.min_cc_minor,
                     cc_major, cc_minor);
}

std::optional<double> dense_peak(const specs::GpuSpec* spec, GemmPrecision precision) {
  if (spec == nullptr) return std::nullopt;
  if (const auto key = specs::parse_precision(info(precision).spec_key)) {
    if (const auto peak = spec->peak_tflops(*key)) return peak;
  }
  // GPUs without FP64 tensor cores: their plain FP64 rate is what DGEMM reaches.
  if (precision == GemmPrecision::fp64) return spec->peak_tflops(specs::Precision::fp64);
  return std::nullopt;
}

std::string_view rate_unit(GemmPrecision precision) {
  return info(precision).integer ? "TOP/s" : "TFLOP/s";
}

double flops(const GemmShape& shape) {
  return 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) * static_cast<double>(shape.k);
}

std::int64_t operand_bytes(const GemmShape& shape, GemmPrecision precision) {
  const PrecisionInfo& p = info(precision);
  return shape.m * shape.k * p.a_bytes + shape.n * shape.k * p.b_bytes + shape.m * shape.n * p.d_bytes;
}

std::string record_key(GemmPrecision precision, const GemmShape& shape) {
  const std::string dims = fmt::format("m{}_n{}_k{}", shape.m, shape.n, shape.k);
  if (shape.layer.empty()) return fmt::format("gemm/{}/{}", to_string(precision), dims);
  return fmt::format("gemm/{}/{}.{}/{}", to_string(precision), shape.model, shape.layer, dims);
}

TransformerDims llama31_8b() {
  return {"llama-3.1-8b",
          4096,
          32,
          8,
          128,
          14336,
          128256,
          true,
          "built-in default: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"};
}

TransformerDims catalog_dims(std::string_view model) {
  const auto catalog = workloads::ModelCatalog::load(data::DataSource::resolve(std::nullopt));
  const workloads::ModelInfo& info = catalog.get(model);
  const workloads::ModelArch& arch = info.arch;
  if (arch.kind != workloads::ModelKind::decoder) {
    throw UsageError(fmt::format("GEMM layer shapes: {} is not a decoder model", info.name));
  }
  if (arch.is_moe() || arch.is_mla()) {
    throw UsageError(
        fmt::format("GEMM layer shapes: {} uses MoE or MLA layers, which are not modelled yet", info.name));
  }
  TransformerDims dims;
  dims.model = lower(info.name);
  dims.hidden = arch.hidden;
  dims.heads = arch.heads;
  dims.kv_heads = arch.kv_heads;
  dims.head_dim = arch.head_dim;
  dims.ffn_hidden = arch.ffn_hidden;
  dims.vocab = arch.vocab;
  dims.gated_mlp = arch.gated_mlp;
  dims.source = fmt::format("model catalog ({}): {}", info.file, info.config_source);
  return dims;
}

std::vector<std::string> default_layers() {
  return {"qkv", "o", "gate_up", "down"};
}

std::vector<GemmShape> layer_shapes(const TransformerDims& dims, const std::vector<std::string>& layers,
                                    const std::vector<std::int64_t>& tokens) {
  std::vector<GemmShape> shapes;
  for (const std::string& raw : layers) {
    const std::string layer = lower(trim(raw));
    std::int64_t n = 0, k = 0;
    if (layer == "qkv") {
      n = (dims.heads + 2 * dims.kv_heads) * dims.head_dim;
      k = dims.hidden;
    } else if (layer == "o") {
      n = dims.hidden;
      k = dims.heads * dims.head_dim;
    } else if (layer == "gate_up") {
      if (!dims.gated_mlp) throw UsageError(fmt::format("--gemm-shapes gate_up: {} has no gated MLP", dims.model));
      n = 2 * dims.ffn_hidden;
      k = dims.hidden;
    } else if (layer == "gate" || layer == "up") {
      if (layer == "gate" && !dims.gated_mlp) {
        throw UsageError(fmt::format("--gemm-shapes gate: {} has no gated MLP", dims.model));
      }
      n = dims.ffn_hidden;
      k = dims.hidden;
    } else if (layer == "down") {
      n = dims.hidden;
      k = dims.ffn_hidden;
    } else if (layer == "lm_head") {
      if (dims.vocab <= 0) {
        throw UsageError(fmt::format("--gemm-shapes lm_head: no vocabulary size for {} ({})", dims.model, dims.source));
      }
      n = dims.vocab;
      k = dims.hidden;
    } else {
      throw UsageError(
          fmt::format("--gemm-shapes: unknown layer '{}' (known: qkv, o, gate_up, gate, up, down, lm_head)", raw));
    }
    for (std::int64_t m : tokens) shapes.push_back({m, n, k, dims.model, layer});
  }
  return shapes;
}

std::int64_t parse_positive(std::string_view text, std::string_view flag) {
  const std::string_view t = trim(text);
  std::int64_t value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || value <= 0) {
    throw UsageError(fmt::format("--{}: '{}' is not a positive integer", flag, text));
  }
  return value;
}

GemmShape parse_size(std::string_view text) {
  const std::string t = lower(trim(text));
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (true) {
    const std::size_t x = t.find('x', start);
    dims.push_back(
        parse_positive(std::string_view(t).substr(start, x == std::string::npos ? x : x - start), "gemm-sizes"));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (dims.size() == 1) return {dims[0], dims[0], dims[0], "", ""};
  if (dims.size() == 3) return {dims[0], dims[1], dims[2], "", ""};
  throw UsageError(fmt::format("--gemm-sizes: '{}' is neither N nor MxNxK", text));
}

GemmPlan make_plan(PlanMode mode, const std::map<std::string, std::vector<std::string>>& lists,
                   const TransformerDims& dims) {
  GemmPlan plan;

  // Precisions.
  if (const auto* list = find_list(lists, "precisions"); list != nullptr && !list->empty()) {
    for (const std::string& name : *list) {
      const auto p = parse_precision(name);
      if (!p) {
        throw UsageError(fmt::format(
            "--precisions: unknown precision '{}' (known: fp64, fp32, tf32, fp16, bf16, fp8, fp8_e5m2, int8)", name));
      }
      if (std::find(plan.precisions.begin(), plan.precisions.end(), *p) == plan.precisions.end()) {
        plan.precisions.push_back(*p);
      }
    }
    plan.llm_precisions = plan.precisions;
  } else {
    plan.precisions.assign(std::begin(kAllGemmPrecisions), std::end(kAllGemmPrecisions));
    if (mode == PlanMode::full) {
      plan.llm_precisions = plan.precisions;
    } else {
      plan.llm_precisions = {GemmPrecision::bf16, GemmPrecision::fp8_e4m3};
    }
  }

  // --gemm-shapes mixes explicit MxNxK shapes and layer names; either kind, once given, replaces
  // the default of its kind (explicit shapes the default sizes, layer names the default layers).
  const auto* shapes_flag = find_list(lists, "gemm-shapes");
  const bool shapes_given = shapes_flag != nullptr && !shapes_flag->empty();
  std::vector<GemmShape> explicit_shapes;
  std::vector<std::string> layer_names;
  if (shapes_given && !is_none(*shapes_flag)) {
    for (const std::string& item : *shapes_flag) {
      const std::string_view t = trim(item);
      if (!t.empty() && std::isdigit(static_cast<unsigned char>(t.front()))) {
        explicit_shapes.push_back(parse_size(t));
      } else {
        layer_names.emplace_back(t);
      }
    }
  }

  // Plain sizes.
  const auto* sizes_flag = find_list(lists, "gemm-sizes");
  if (sizes_flag != nullptr && !sizes_flag->empty()) {
    if (!is_none(*sizes_flag)) {
      for (const std::string& text : *sizes_flag) plan.sizes.push_back(parse_size(text));
    }
  } else if (!shapes_given) {
    const std::vector<std::int64_t> sizes =
        mode == PlanMode::quick ? std::vector<std::int64_t>{4096, 8192} : std::vector<std::int64_t>{4096, 8192, 16384};
    for (std::int64_t s : sizes) plan.sizes.push_back({s, s, s, "", ""});
  }
  plan.sizes.insert(plan.sizes.end(), explicit_shapes.begin(), explicit_shapes.end());

  // LLM layer shapes.
  std::vector<std::int64_t> tokens;
  bool skip_llm = false;
  const auto* m_flag = find_list(lists, "gemm-m");
  if (m_flag != nullptr && !m_flag->empty()) {
    if (is_none(*m_flag)) {
      skip_llm = true;
    } else {
      for (const std::string& text : *m_flag) tokens.push_back(parse_positive(text, "gemm-m"));
    }
  } else {
    tokens = mode == PlanMode::quick ? std::vector<std::int64_t>{1, 128, 4096}
                                     : std::vector<std::int64_t>{1, 16, 128, 1024, 4096, 16384};
  }
  std::vector<std::string> layers = default_layers();
  if (shapes_given) {
    if (!layer_names.empty()) {
      layers = layer_names;
    } else if (m_flag == nullptr || m_flag->empty()) {
      skip_llm = true;  // only explicit shapes (or none) asked for
    }
  }
  if (!skip_llm) plan.llm_shapes = layer_shapes(dims, layers, tokens);
  if (skip_llm) plan.llm_precisions.clear();
  return plan;
}

int rotation_sets(std::int64_t set_bytes, std::int64_t l2_bytes, double l2_multiple, std::int64_t memory_budget_bytes,
                  int max_sets) {
  if (set_bytes <= 0) return 1;
  const double wanted = std::ceil(static_cast<double>(l2_bytes) * l2_multiple / static_cast<double>(set_bytes));
  const double by_memory = std::floor(static_cast<double>(memory_budget_bytes) / static_cast<double>(set_bytes));
  const double sets = std::min({wanted, by_memory, static_cast<double>(max_sets)});
  return std::max(1, static_cast<int>(sets));
}

double max_error_vs_rms(const std::vector<double>& values, const std::vector<double>& reference) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (values.size() != reference.size() || values.empty()) return nan;
  double sum_sq = 0;
  for (double r : reference) sum_sq += r * r;
  const double rms = std::sqrt(sum_sq / static_cast<double>(reference.size()));
  if (!(rms > 0)) return nan;
  double worst = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return nan;
    worst = std::max(worst, std::abs(values[i] - reference[i]) / rms);
  }
  return worst;
}

}  // namespace gpuscout::bench::gemm
