#include "gpuscout/cuda/device_info.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/nvml.hpp"

namespace gpuscout::cuda {
namespace {

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return value;
}

// The NUMA node the kernel reports for the GPU's PCI function (-1 when single-node or unknown).
std::optional<int> sysfs_numa_node(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(), [](unsigned char c) { return std::tolower(c); });
  // CUDA gives "0000:1B:00.0"; sysfs names the function the same way in lower case.
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/numa_node");
  int node = -1;
  if (in >> node && node >= 0) return node;
  return std::nullopt;
}

// The PCI device id ("0x2335" in sysfs), which identifies the product exactly.
std::optional<std::uint32_t> sysfs_pci_device_id(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(), [](unsigned char c) { return std::tolower(c); });
  std::ifstream in("/sys/bus/pci/devices/" + bus_id + "/device");
  std::string text;
  if (!(in >> text)) return std::nullopt;
  try {
    return static_cast<std::uint32_t>(std::stoul(text, nullptr, 16));
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::string cuda_version_text(int version) {
  if (version >= 100000) {  // cuBLAS: major*10000 + minor*100 + patch
    return fmt::format("{}.{}.{}", version / 10000, (version / 100) % 100, version % 100);
  }
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

DeviceListing enumerate_devices() {
  DeviceListing listing;
  int driver_version = 0, runtime_version = 0;
  if (cudaRuntimeGetVersion(&runtime_version) == cudaSuccess) {
    listing.software["cuda_runtime"] = cuda_version_text(runtime_version);
  }
  if (cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version > 0) {
    listing.software["cuda_driver"] = cuda_version_text(driver_version);
  }
  listing.software["cublas"] = cuda_version_text(static_cast<int>(cublasLtGetVersion()));

  const nvml::Library* nvml = nvml::Library::get();
  if (nvml != nullptr) {
    if (auto v = nvml->driver_version()) listing.software["driver"] = *v;
    listing.software["nvml"] = "loaded (libnvidia-ml.so.1)";
  } else {
    listing.software["nvml"] = "unavailable: " + nvml::Library::unavailable_reason();
  }

  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    // With no driver installed the runtime reports an "insufficient" driver: say what is missing.
    const bool no_driver =
        (rc == cudaErrorInsufficientDriver || rc == cudaErrorNoDevice) && nvml == nullptr && driver_version == 0;
    listing.unavailable_reason =
        no_driver ? fmt::format("no NVIDIA driver found (the CUDA runtime says: {})", cudaGetErrorName(rc))
                  : fmt::format("no usable CUDA GPU: {} ({})", cudaGetErrorString(rc), cudaGetErrorName(rc));
    return listing;
  }
  if (count == 0) {
    listing.unavailable_reason = "no CUDA GPU visible (CUDA_VISIBLE_DEVICES may hide them)";
    return listing;
  }

  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    GPUSCOUT_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    results::GpuInfo info;
    nlohmann::ordered_json detail = nlohmann::ordered_json::object();
    info.index = i;
    info.name = prop.name;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) info.pci_bus_id = bus;
    // The runtime's UUID bytes, formatted as NVML and nvidia-smi print them.
    const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    info.uuid = fmt::format(
        "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    info.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
    if (int khz = attribute(cudaDevAttrClockRate, i); khz > 0) info.max_sm_clock_mhz = khz / 1000.0;
    if (int khz = attribute(cudaDevAttrMemoryClockRate, i); khz > 0) info.max_mem_clock_mhz = khz / 1000.0;
    if (int ecc = attribute(cudaDevAttrEccEnabled, i); ecc >= 0) info.ecc_enabled = ecc != 0;
    info.numa_node = sysfs_numa_node(info.pci_bus_id);
    if (!info.numa_node) {
      if (int n = attribute(cudaDevAttrHostNumaId, i); n >= 0) info.numa_node = n;
    }
    if (auto id = sysfs_pci_device_id(info.pci_bus_id)) detail["pci_device_id"] = *id;
    detail["l2_bytes"] = prop.l2CacheSize;
    detail["memory_bus_width_bits"] = attribute(cudaDevAttrGlobalMemoryBusWidth, i);

    if (nvml != nullptr) {
      if (auto dev = nvml->device_by_pci_bus_id(info.pci_bus_id)) {
        if (auto v = nvml->uuid(*dev)) info.uuid = *v;
        if (auto v = nvml->max_clock_mhz(*dev, nvml::Clock::sm)) info.max_sm_clock_mhz = *v;
        if (auto v = nvml->max_clock_mhz(*dev, nvml::Clock::memory)) info.max_mem_clock_mhz = *v;
        if (auto v = nvml->power_limit_w(*dev)) info.power_limit_w = *v;
        if (auto v = nvml->ecc_enabled(*dev)) info.ecc_enabled = *v;
        info.mig_enabled = nvml->mig_enabled(*dev);
        if (!info.numa_node) info.numa_node = nvml->numa_node(*dev);
        if (auto v = nvml->clock_mhz(*dev, nvml::Clock::sm)) detail["sm_clock_mhz"] = *v;
        if (auto v = nvml->clock_mhz(*dev, nvml::Clock::memory)) detail["mem_clock_mhz"] = *v;
        if (auto v = nvml->temperature_c(*dev)) detail["temperature_c"] = *v;
        if (auto v = nvml->power_w(*dev)) detail["power_w"] = *v;
        if (auto v = nvml->persistence_mode(*dev)) detail["persistence_mode"] = *v;
        auto gen = nvml->pcie_link_generation(*dev, false), width = nvml->pcie_link_width(*dev, false);
        auto max_gen = nvml->pcie_link_generation(*dev, true), max_width = nvml->pcie_link_width(*dev, true);
        if (gen && width) detail["pcie_link"] = fmt::format("gen{} x{}", *gen, *width);
        if (max_gen && max_width) detail["pcie_link_max"] = fmt::format("gen{} x{}", *max_gen, *max_width);
        detail["nvml"] = "ok";
      } else {
        detail["nvml"] = "no NVML device for PCI bus id " + info.pci_bus_id;
      }
    } else {
      detail["nvml"] = "unavailable";
    }
    listing.gpus.push_back(std::move(info));
    listing.details.push_back(std::move(detail));
  }
  return listing;
}

DeviceContext make_device_context(int index) {
  cudaDeviceProp prop{};
  GPUSCOUT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceContext ctx;
  ctx.index = index;
  ctx.name = prop.name;
  ctx.cc_major = prop.major;
  ctx.cc_minor = prop.minor;
  ctx.sm_count = prop.multiProcessorCount;
  ctx.total_memory_bytes = prop.totalGlobalMem;
  ctx.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  return ctx;
}

}  // namespace gpuscout::cuda
