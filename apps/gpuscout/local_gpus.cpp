#include "local_gpus.hpp"

#include <fmt/format.h>

#include "gpuscout/bench/selection.hpp"
#include "gpuscout/specs/spec_db.hpp"
#if defined(GPUSCOUT_HAVE_CUDA)
#include "gpuscout/cuda/device_info.hpp"
#endif

namespace gpuscout::cli {

LocalGpus discover_local_gpus(const specs::SpecDb* db) {
  LocalGpus local;
#if defined(GPUSCOUT_HAVE_CUDA)
  cuda::DeviceListing listing = cuda::enumerate_devices();
  local.gpus = std::move(listing.gpus);
  local.details = std::move(listing.details);
  local.software = std::move(listing.software);
  local.unavailable_reason = std::move(listing.unavailable_reason);
  for (std::size_t i = 0; i < local.gpus.size(); ++i) {
    results::GpuInfo& gpu = local.gpus[i];
    const specs::GpuSpec* spec = nullptr;
    if (db != nullptr) {
      std::optional<std::uint32_t> pci_id;
      if (local.details[i].contains("pci_device_id")) pci_id = local.details[i]["pci_device_id"].get<std::uint32_t>();
      std::optional<std::uint64_t> memory;
      if (gpu.memory_bytes) memory = static_cast<std::uint64_t>(*gpu.memory_bytes);
      spec = db->match_device(gpu.name, pci_id, memory);
    }
    if (spec != nullptr) gpu.spec_name = spec->name;
    local.specs.push_back(spec);
  }
#else
  (void)db;
  local.unavailable_reason = "built without CUDA: this gpuscout cannot see local GPUs";
#endif
  return local;
}

bench::PeakFigures peak_figures(const specs::GpuSpec* spec, const nlohmann::ordered_json& detail) {
  bench::PeakFigures peaks;
  if (spec != nullptr) {
    if (spec->memory_bandwidth_gbs.value > 0) {
      peaks["hbm_bandwidth_gbps"] = {spec->memory_bandwidth_gbs.value, "GB/s",
                                     fmt::format("spec DB {}: {}", spec->name, spec->memory_bandwidth_gbs.source)};
    }
    for (specs::Precision p : specs::kAllPrecisions) {
      if (const auto& figure = spec->peak(p)) {
        peaks[fmt::format("dense_tflops/{}", specs::to_string(p))] = {
            figure->value, std::string(specs::peak_unit(p)), fmt::format("spec DB {}: {}", spec->name, figure->source)};
      }
    }
  }
  // The GPU's own maximum link (the current one drops to gen1 at idle).
  if (detail.contains("pcie_link_max")) {
    int gen = 0, width = 0;
    const std::string link = detail["pcie_link_max"].get<std::string>();
    if (std::sscanf(link.c_str(), "gen%d x%d", &gen, &width) == 2) {
      if (const double gbps = bench::pcie_bandwidth_gbps(gen, width); gbps > 0) {
        const std::string source =
            fmt::format("PCIe {} per direction after line coding (NVML maximum link of the GPU)", link);
        peaks["host_link_gbps"] = {gbps, "GB/s", source};
        peaks["host_link_bidirectional_gbps"] = {2 * gbps, "GB/s", "both directions of " + source};
      }
    }
  }
  return peaks;
}

}  // namespace gpuscout::cli
