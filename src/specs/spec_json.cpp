#include "gpuscout/specs/spec_json.hpp"

#include <fmt/format.h>

namespace gpuscout::specs {
namespace {

nlohmann::ordered_json figure_json(const Figure& figure) {
  nlohmann::ordered_json out = {{"value", figure.value}, {"source", figure.source}};
  if (figure.is_uncertain()) out["uncertain"] = figure.uncertain;
  return out;
}

// {"key": {value, source[, uncertain]}} or null when absent, so absent precisions stay visible.
void put(nlohmann::ordered_json& object, const std::string& key, const std::optional<Figure>& figure) {
  object[key] = figure ? figure_json(*figure) : nlohmann::ordered_json(nullptr);
}

}  // namespace

nlohmann::ordered_json to_json(const GpuSpec& spec) {
  nlohmann::ordered_json out;
  out["name"] = spec.name;
  out["aliases"] = spec.aliases;
  out["vendor"] = spec.vendor;
  out["architecture"] = spec.architecture;
  out["chip"] = spec.chip;
  if (spec.compute_capability) out["compute_capability"] = *spec.compute_capability;
  if (spec.gfx_target) out["gfx_target"] = *spec.gfx_target;
  out["form_factor"] = spec.form_factor;
  out["release_year"] = spec.release_year;
  auto ids = nlohmann::ordered_json::array();
  for (auto id : spec.pci_device_ids) ids.push_back(fmt::format("0x{:04x}", id));
  out["pci_device_ids"] = ids;

  nlohmann::ordered_json memory;
  memory["size_gb"] = figure_json(spec.memory_gb);
  memory["type"] = spec.memory_type;
  memory["bandwidth_gbs"] = figure_json(spec.memory_bandwidth_gbs);
  put(memory, "l2_mb", spec.l2_mb);
  out["memory"] = memory;

  nlohmann::ordered_json compute;
  put(compute, "sm_count", spec.sm_count);
  put(compute, "boost_clock_mhz", spec.boost_clock_mhz);
  out["compute"] = compute;

  nlohmann::ordered_json peak;
  for (Precision p : kAllPrecisions) put(peak, std::string(to_string(p)), spec.peak(p));
  out["peak_dense_tflops"] = peak;

  nlohmann::ordered_json link;
  link["scale_up"] = spec.scale_up;
  link["scale_up_label"] = spec.scale_up_label();
  if (spec.nvlink_gen) link["nvlink_gen"] = *spec.nvlink_gen;
  put(link, "scale_up_bw_gbs_bidir", spec.scale_up_bw_gbs_bidir);
  link["bridge_only"] = spec.bridge_only;
  put(link, "pcie_gen", spec.pcie_gen);
  if (!spec.host_link.empty()) link["host_link"] = spec.host_link;
  out["interconnect"] = link;

  out["power"] = {{"tdp_w", figure_json(spec.tdp_w)}};

  nlohmann::ordered_json features;
  put(features, "mig_max_instances", spec.mig_max_instances);
  features["fp8"] = spec.fp8;
  features["transformer_engine"] = spec.transformer_engine;
  if (!spec.transformer_engine_uncertain.empty()) {
    features["transformer_engine_uncertain"] = spec.transformer_engine_uncertain;
  }
  features["sparsity_2to4"] = spec.sparsity_2to4;
  out["features"] = features;

  nlohmann::ordered_json derived;
  auto opt = [](std::optional<double> v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); };
  derived["bf16_tflops_per_w"] = opt(tflops_per_watt(spec, Precision::bf16));
  derived["usd_per_dense_bf16_tflops"] = opt(usd_per_dense_tflops(spec, Precision::bf16));
  derived["cloud_usd_per_hr_per_dense_bf16_pflops"] = opt(cloud_usd_per_hr_per_pflops(spec, Precision::bf16));
  out["derived"] = derived;

  auto purchase = nlohmann::ordered_json::array();
  for (const auto& p : spec.purchase_prices) {
    nlohmann::ordered_json item = {{"usd", p.usd}, {"date", p.date}, {"basis", p.basis}, {"source", p.source}};
    if (!p.uncertain.empty()) item["uncertain"] = p.uncertain;
    purchase.push_back(item);
  }
  auto cloud = nlohmann::ordered_json::array();
  for (const auto& c : spec.cloud_prices) {
    nlohmann::ordered_json item = {{"usd_per_gpu_hr", c.usd_per_gpu_hr}, {"provider", c.provider}, {"sku", c.sku}};
    if (c.gpus_per_instance) item["gpus_per_instance"] = *c.gpus_per_instance;
    if (!c.region.empty()) item["region"] = c.region;
    item["pricing"] = c.pricing;
    item["date"] = c.date;
    item["source"] = c.source;
    if (!c.uncertain.empty()) item["uncertain"] = c.uncertain;
    cloud.push_back(item);
  }
  out["prices"] = {{"purchase", purchase}, {"cloud", cloud}};
  out["notes"] = spec.notes;
  out["cross_checks"] = spec.cross_checks;
  out["sources"] = {{"default", spec.default_source}, {"also", spec.other_sources}};
  out["origin"] = spec.origin;
  return out;
}

}  // namespace gpuscout::specs
