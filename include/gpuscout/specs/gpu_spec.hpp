#pragma once
// One GPU of the spec database (data/gpus/*.toml), as plain data. Every number is a Figure that
// carries its source and, when the value is doubtful, why. Peaks are DENSE (no 2:4 sparsity); a
// precision the hardware lacks is absent (nullopt), never 0. Units follow the field names:
// TFLOP/s = 1e12 FLOP/s (int8: TOPS), GB/s = 1e9 B/s, GB = the vendor's marketing gigabytes.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuscout::specs {

enum class Precision { fp64, fp64_tensor, fp32, tf32, fp16, bf16, fp8, int8, fp4 };
inline constexpr std::size_t kPrecisionCount = 9;
inline constexpr std::array<Precision, kPrecisionCount> kAllPrecisions = {
    Precision::fp64, Precision::fp64_tensor, Precision::fp32, Precision::tf32, Precision::fp16,
    Precision::bf16, Precision::fp8,         Precision::int8, Precision::fp4};

// "bf16", "fp64_tensor", ... (the TOML key under [peak_dense]).
std::string_view to_string(Precision precision);
// Inverse of to_string, case-insensitive; nullopt for an unknown name.
std::optional<Precision> parse_precision(std::string_view text);
// "BF16", "FP64 tensor", ... for human headers.
std::string_view display_name(Precision precision);
// "TFLOP/s", or "TOP/s" for int8.
std::string_view peak_unit(Precision precision);

// A number with its provenance.
struct Figure {
  double value = 0;
  std::string source;     // URL or repository:path of the document the value comes from
  std::string uncertain;  // empty, or why the value is doubtful
  bool is_uncertain() const { return !uncertain.empty(); }
};

struct PurchasePrice {
  double usd = 0;
  std::string date;   // free text: "2025-03-03", "~2024"
  std::string basis;  // bare GPU, system price / 8, all-in estimate, ...
  std::string source;
  std::string uncertain;
};

struct CloudPrice {
  double usd_per_gpu_hr = 0;
  std::string provider;
  std::string sku;
  std::optional<std::int64_t> gpus_per_instance;
  std::string region;   // may be empty
  std::string pricing;  // on-demand, capacity-block, ...
  std::string date;
  std::string source;
  std::string uncertain;
};

struct GpuSpec {
  // Identity.
  std::string name;  // canonical, as in gpu_specs.csv: "H100-SXM5-80GB"
  std::vector<std::string> aliases;
  std::string vendor;                             // "NVIDIA", "AMD"
  std::string architecture;                       // "Hopper", "CDNA 3"
  std::string chip;                               // "GH100"
  std::optional<std::string> compute_capability;  // "9.0"; NVIDIA only
  std::optional<std::string> gfx_target;          // "gfx942"; AMD only
  std::string form_factor;
  std::int64_t release_year = 0;
  std::vector<std::uint32_t> pci_device_ids;

  // Memory.
  Figure memory_gb;
  std::string memory_type;
  Figure memory_bandwidth_gbs;
  std::optional<Figure> l2_mb;

  // Compute.
  std::optional<Figure> sm_count;  // compute units on AMD
  std::optional<Figure> boost_clock_mhz;
  std::array<std::optional<Figure>, kPrecisionCount> peak_dense;  // indexed by Precision

  // Interconnect.
  std::string scale_up = "none";  // "nvlink", "infinity_fabric" or "none"
  std::optional<std::int64_t> nvlink_gen;
  std::optional<Figure> scale_up_bw_gbs_bidir;  // total bidirectional per GPU
  bool bridge_only = false;                     // PCIe cards: only through an NVLink bridge
  std::optional<Figure> pcie_gen;
  std::string host_link;  // e.g. NVLink-C2C to Grace; empty when PCIe

  // Power and features.
  Figure tdp_w;
  std::optional<Figure> mig_max_instances;  // AMD: compute partitions
  bool fp8 = false;
  std::string transformer_engine = "no";  // "yes", "partial" or "no"
  std::string transformer_engine_uncertain;
  bool sparsity_2to4 = false;

  // Prices: the first of each list is the reference one.
  std::vector<PurchasePrice> purchase_prices;
  std::vector<CloudPrice> cloud_prices;

  std::vector<std::string> notes;
  std::vector<std::string> cross_checks;
  std::string default_source;
  std::vector<std::string> other_sources;
  std::string origin;  // the file it was loaded from

  const std::optional<Figure>& peak(Precision precision) const {
    return peak_dense[static_cast<std::size_t>(precision)];
  }
  std::optional<double> peak_tflops(Precision precision) const {
    const auto& figure = peak(precision);
    return figure ? std::optional<double>(figure->value) : std::nullopt;
  }
  const PurchasePrice* reference_purchase() const { return purchase_prices.empty() ? nullptr : &purchase_prices[0]; }
  const CloudPrice* reference_cloud() const { return cloud_prices.empty() ? nullptr : &cloud_prices[0]; }
  // "NVLink4", "Infinity Fabric" or "none".
  std::string scale_up_label() const;
};

// One figure of a spec by its TOML key ("memory.bandwidth_gbs", "peak_dense.bf16"), for generic
// listings (gpus show) and for validating [sources.fields] / [uncertain] keys.
struct FigureField {
  std::string key;
  std::string label;
  std::string unit;
};
// Every figure key the schema knows, in display order.
std::span<const FigureField> figure_fields();
// The figure under `key` (nullptr when the spec lacks it or the key is unknown).
const Figure* find_figure(const GpuSpec& spec, std::string_view key);
Figure* find_figure(GpuSpec& spec, std::string_view key);

// Derived figures. nullopt when an input is missing.
// Dense peak per watt of TDP, in TFLOP/s per W.
std::optional<double> tflops_per_watt(const GpuSpec& spec, Precision precision);
// Reference purchase price per dense TFLOP/s, in USD.
std::optional<double> usd_per_dense_tflops(const GpuSpec& spec, Precision precision);
// Reference cloud price per dense PFLOP/s, in USD per hour.
std::optional<double> cloud_usd_per_hr_per_pflops(const GpuSpec& spec, Precision precision);
// a / b, nullopt when either is missing or b is 0.
std::optional<double> ratio(std::optional<double> a, std::optional<double> b);

}  // namespace gpuscout::specs
