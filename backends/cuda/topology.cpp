#include "gpuscout/cuda/topology.hpp"

#include <cuda_runtime_api.h>

#include "gpuscout/cuda/nvml.hpp"

namespace gpuscout::cuda {

namespace {
constexpr unsigned kFieldNvLinkSpeedCommon = 90;  // NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON (MB/s per link)
}  // namespace

topo::Readings read_topology() {
  topo::Readings r;
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    (void)cudaGetLastError();
    r.source = std::string("no CUDA device: ") + cudaGetErrorString(rc);
    return r;
  }
  const nvml::Library* nvml = nvml::Library::get();
  r.source = nvml != nullptr ? "NVML" : "NVML unavailable (" + nvml::Library::unavailable_reason() + ")";
  std::vector<std::optional<nvml::Device>> handles;
  for (int i = 0; i < count; ++i) {
    topo::GpuReading g;
    g.index = i;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      g.name = prop.name;
      g.cc_major = prop.major;
    }
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) g.pci_bus_id = bus;
    std::optional<nvml::Device> dev;
    if (nvml != nullptr && !g.pci_bus_id.empty()) dev = nvml->device_by_pci_bus_id(g.pci_bus_id);
    if (dev) {
      g.numa_node = nvml->numa_node(*dev);
      if (auto mask = nvml->cpu_affinity(*dev)) g.cpu_affinity_mask = *mask;
      g.pcie_gen = nvml->pcie_link_generation(*dev, false);
      g.pcie_gen_max = nvml->pcie_link_generation(*dev, true);
      g.pcie_width = nvml->pcie_link_width(*dev, false);
      g.pcie_width_max = nvml->pcie_link_width(*dev, true);
      for (int link = 0; link < nvml::Library::kMaxNvLinks; ++link) {
        const auto active = nvml->nvlink_active(*dev, link);
        if (!active) continue;  // no such link (or NVLink not supported)
        topo::GpuReading::Link l;
        l.id = link;
        l.active = *active;
        if (l.active) {
          l.remote_bus_id = nvml->nvlink_remote_bus_id(*dev, link).value_or("");
          l.version_raw = nvml->nvlink_version(*dev, link);
          l.remote_device_type = nvml->nvlink_remote_device_type(*dev, link);
        }
        g.nvlinks.push_back(l);
      }
      if (!g.nvlinks.empty()) {
        if (auto mbps = nvml->field_value(*dev, kFieldNvLinkSpeedCommon))
          g.nvlink_speed_mbps = static_cast<double>(*mbps);
      }
    }
    if (!g.numa_node) {
      int node = -1;
      if (cudaDeviceGetAttribute(&node, cudaDevAttrHostNumaId, i) == cudaSuccess && node >= 0) g.numa_node = node;
      (void)cudaGetLastError();
    }
    handles.push_back(dev);
    r.gpus.push_back(std::move(g));
  }
  const auto n = static_cast<std::size_t>(count);
  r.common_ancestor.assign(n, std::vector<std::optional<int>>(n));
  r.peer_access.assign(n, std::vector<bool>(n, false));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      if (handles[i] && handles[j]) r.common_ancestor[i][j] = nvml->topology_common_ancestor(*handles[i], *handles[j]);
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, static_cast<int>(i), static_cast<int>(j)) == cudaSuccess) {
        r.peer_access[i][j] = can != 0;
      }
      (void)cudaGetLastError();
    }
  }
  return r;
}

}  // namespace gpuscout::cuda
