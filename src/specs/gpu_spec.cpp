#include "gpuscout/specs/gpu_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gpuscout::specs {
namespace {

constexpr std::array<std::string_view, kPrecisionCount> kPrecisionNames = {
    "fp64", "fp64_tensor", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"};
constexpr std::array<std::string_view, kPrecisionCount> kPrecisionDisplay = {
    "FP64", "FP64 tensor", "FP32", "TF32", "FP16", "BF16", "FP8", "INT8", "FP4"};

std::vector<FigureField> make_fields() {
  std::vector<FigureField> fields = {
      {"memory.size_gb", "Memory", "GB"},
      {"memory.bandwidth_gbs", "Memory bandwidth", "GB/s"},
      {"memory.l2_mb", "L2 cache", "MB"},
      {"compute.sm_count", "SMs / CUs", ""},
      {"compute.boost_clock_mhz", "Boost clock", "MHz"},
  };
  for (Precision p : kAllPrecisions) {
    fields.push_back({fmt::format("peak_dense.{}", to_string(p)), fmt::format("{} dense peak", display_name(p)),
                      std::string(peak_unit(p))});
  }
  fields.push_back({"interconnect.scale_up_bw_gbs_bidir", "Scale-up bandwidth (bidir)", "GB/s"});
  fields.push_back({"interconnect.pcie_gen", "PCIe generation", ""});
  fields.push_back({"power.tdp_w", "TDP", "W"});
  fields.push_back({"features.mig_max_instances", "MIG instances (max)", ""});
  return fields;
}

// Required figures are plain Figures, optional ones std::optional<Figure>; one of the two is set.
struct Slot {
  Figure* required = nullptr;
  std::optional<Figure>* optional = nullptr;
};

Slot slot(GpuSpec& spec, std::string_view key) {
  if (key == "memory.size_gb") return {&spec.memory_gb, nullptr};
  if (key == "memory.bandwidth_gbs") return {&spec.memory_bandwidth_gbs, nullptr};
  if (key == "memory.l2_mb") return {nullptr, &spec.l2_mb};
  if (key == "compute.sm_count") return {nullptr, &spec.sm_count};
  if (key == "compute.boost_clock_mhz") return {nullptr, &spec.boost_clock_mhz};
  if (key == "interconnect.scale_up_bw_gbs_bidir") return {nullptr, &spec.scale_up_bw_gbs_bidir};
  if (key == "interconnect.pcie_gen") return {nullptr, &spec.pcie_gen};
  if (key == "power.tdp_w") return {&spec.tdp_w, nullptr};
  if (key == "features.mig_max_instances") return {nullptr, &spec.mig_max_instances};
  if (key.starts_with("peak_dense.")) {
    if (auto p = parse_precision(key.substr(11))) {
      return {nullptr, &spec.peak_dense[static_cast<std::size_t>(*p)]};
    }
  }
  return {};
}

}  // namespace

std::string_view to_string(Precision precision) {
  return kPrecisionNames[static_cast<std::size_t>(precision)];
}

std::string_view display_name(Precision precision) {
  return kPrecisionDisplay[static_cast<std::size_t>(precision)];
}

std::string_view peak_unit(Precision precision) {
  return precision == Precision::int8 ? "TOP/s" : "TFLOP/s";
}

std::optional<Precision> parse_precision(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (Precision p : kAllPrecisions) {
    if (to_string(p) == lower) return p;
  }
  return std::nullopt;
}

std::string GpuSpec::scale_up_label() const {
  if (scale_up == "nvlink") return nvlink_gen ? fmt::format("NVLink{}", *nvlink_gen) : "NVLink";
  if (scale_up == "infinity_fabric") return "Infinity Fabric";
  return "none";
}

std::span<const FigureField> figure_fields() {
  static const std::vector<FigureField> fields = make_fields();
  return fields;
}

Figure* find_figure(GpuSpec& spec, std::string_view key) {
  Slot s = slot(spec, key);
  if (s.required != nullptr) return s.required;
  if (s.optional != nullptr && s.optional->has_value()) return &**s.optional;
  return nullptr;
}

const Figure* find_figure(const GpuSpec& spec, std::string_view key) {
  return find_figure(const_cast<GpuSpec&>(spec), key);
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

std::optional<double> tflops_per_watt(const GpuSpec& spec, Precision precision) {
  return ratio(spec.peak_tflops(precision), spec.tdp_w.value);
}

std::optional<double> usd_per_dense_tflops(const GpuSpec& spec, Precision precision) {
  const PurchasePrice* price = spec.reference_purchase();
  if (price == nullptr) return std::nullopt;
  return ratio(price->usd, spec.peak_tflops(precision));
}

std::optional<double> cloud_usd_per_hr_per_pflops(const GpuSpec& spec, Precision precision) {
  const CloudPrice* price = spec.reference_cloud();
  const auto peak = spec.peak_tflops(precision);
  if (price == nullptr || !peak) return std::nullopt;
  return ratio(price->usd_per_gpu_hr, *peak / 1000.0);
}

}  // namespace gpuscout::specs
