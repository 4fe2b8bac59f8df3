#pragma once
// The local GPUs as the CUDA runtime and NVML see them. No CUDA headers: the CLI includes this.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/cuda/benchmark.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

struct DeviceListing {
  std::vector<results::GpuInfo> gpus;
  // Per GPU (same order): readings with no GpuInfo field (current clocks, PCIe link, persistence,
  // L2 size, NVML availability), for `devices` and the result's topology block.
  std::vector<nlohmann::ordered_json> details;
  // driver, cuda_runtime, cuda_driver, cublas, nvml: for Provenance::software.
  std::map<std::string, std::string> software;
  // Empty when GPUs were found; otherwise why none were ("no CUDA driver: ..."). NVML problems are
  // not fatal: they only leave readings out (details[i]["nvml"] says why).
  std::string unavailable_reason;
};

// Enumerates every visible GPU. Never throws for a missing driver or GPU: returns an empty list
// and the reason.
DeviceListing enumerate_devices();

// What a benchmark needs for GPU `index` (spec left null: the caller matches it). Throws CudaError.
DeviceContext make_device_context(int index);

// Version numbers as text: 13000 -> "13.0", 130100 (cuBLAS) -> "13.1.0".
std::string cuda_version_text(int version);

}  // namespace gpuscout::cuda
