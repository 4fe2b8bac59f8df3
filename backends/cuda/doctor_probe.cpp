#include "gpuscout/cuda/doctor_probe.hpp"

#include <cuda_runtime_api.h>

#include "gpuscout/cuda/nvml.hpp"

namespace gpuscout::cuda {

doctor::DriverFacts probe_driver(const std::string& gpus_problem) {
  doctor::DriverFacts d;
  d.cuda_backend = true;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess && runtime > 0) d.cuda_runtime = runtime;
  // 0 when no driver is installed.
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) d.cuda_driver = driver;
  (void)cudaGetLastError();
  if (const nvml::Library* nvml = nvml::Library::get()) {
    d.driver_version = nvml->driver_version().value_or("");
  } else if (d.cuda_driver) {
    d.nvml_problem = nvml::Library::unavailable_reason();
  }
  d.gpus_problem = gpus_problem;
  return d;
}

doctor::GpuFacts probe_gpu(const results::GpuInfo& gpu) {
  doctor::GpuFacts g;
  g.index = gpu.index;
  g.name = gpu.name;
  g.compute_capability = gpu.compute_capability.value_or("");
  const nvml::Library* nvml = nvml::Library::get();
  if (nvml == nullptr) return g;
  const auto dev = nvml->device_by_pci_bus_id(gpu.pci_bus_id);
  if (!dev) return g;
  g.nvml = true;
  g.persistence_mode = nvml->persistence_mode(*dev);
  g.power_limit_w = nvml->power_limit_w(*dev);
  g.default_power_limit_w = nvml->default_power_limit_w(*dev);
  if (auto mask = nvml->throttle_reasons(*dev)) {
    g.clock_event_reasons = nvml::throttle_reason_names(*mask);
    g.clocks_held_down = nvml::is_performance_throttle(*mask);
  }
  g.temperature_c = nvml->temperature_c(*dev);
  g.sm_clock_mhz = nvml->clock_mhz(*dev, nvml::Clock::sm);
  g.max_sm_clock_mhz = nvml->max_clock_mhz(*dev, nvml::Clock::sm);
  g.applications_sm_clock_mhz = nvml->applications_clock_mhz(*dev, nvml::Clock::sm);
  g.default_applications_sm_clock_mhz = nvml->default_applications_clock_mhz(*dev, nvml::Clock::sm);
  g.ecc_enabled = nvml->ecc_enabled(*dev);
  if (g.ecc_enabled.value_or(false)) g.ecc_uncorrected_volatile = nvml->ecc_uncorrected_volatile(*dev);
  if (auto remap = nvml->row_remap(*dev)) {
    g.row_remap_pending = remap->pending;
    g.row_remap_failure = remap->failure;
  }
  g.mig_enabled = nvml->mig_enabled(*dev);
  g.compute_processes = nvml->compute_process_count(*dev);
  g.memory_used_bytes = nvml->memory_used_bytes(*dev);
  g.pcie_max_generation = nvml->pcie_link_generation(*dev, true);
  g.pcie_max_width = nvml->pcie_link_width(*dev, true);
  int total = 0, active = 0;
  for (int link = 0; link < nvml::Library::kMaxNvLinks; ++link) {
    const auto up = nvml->nvlink_active(*dev, link);
    if (!up) break;  // no such link: the links are numbered from 0
    ++total;
    if (*up) ++active;
  }
  // No link answered: NVML cannot say (a VM without the fabric, a card without NVLink).
  if (total > 0) {
    g.nvlinks_total = total;
    g.nvlinks_active = active;
  }
  if (auto mask = nvml->cpu_affinity(*dev)) g.local_cpus = *mask;
  g.numa_node = gpu.numa_node;  // sysfs, the CUDA runtime or NVML, as the device listing found it
  return g;
}

std::vector<doctor::PeerFacts> probe_peer_access(int count) {
  std::vector<doctor::PeerFacts> peers;
  for (int a = 0; a < count; ++a) {
    for (int b = a + 1; b < count; ++b) {
      int ab = 0, ba = 0;
      const bool read =
          cudaDeviceCanAccessPeer(&ab, a, b) == cudaSuccess && cudaDeviceCanAccessPeer(&ba, b, a) == cudaSuccess;
      (void)cudaGetLastError();
      peers.push_back({a, b, read && ab != 0 && ba != 0});
    }
  }
  return peers;
}

}  // namespace gpuscout::cuda
