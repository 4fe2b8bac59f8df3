#pragma once
// The readings `gpuscout doctor` judges (gpuscout/doctor/doctor.hpp), from the CUDA runtime and
// NVML. Reads only: nothing here changes a setting or creates a CUDA context. No CUDA headers: the
// CLI includes this.
#include <vector>

#include "gpuscout/doctor/doctor.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

// Driver and runtime versions, NVML's state; gpus_problem is the listing's unavailable reason.
doctor::DriverFacts probe_driver(const std::string& gpus_problem);

// One GPU's state through NVML, found by its PCI bus id (spec left null: the caller matches it).
doctor::GpuFacts probe_gpu(const results::GpuInfo& gpu);

// Peer access both ways for every pair of the first `count` GPUs.
std::vector<doctor::PeerFacts> probe_peer_access(int count);

}  // namespace gpuscout::cuda
