#pragma once
// Topology readings of the visible GPUs (CUDA runtime for the list, compute capability and peer
// access; NVML for NVLink, PCIe paths and affinity). No CUDA headers: the CLI includes this.
#include "gpuscout/topo/topology.hpp"

namespace gpuscout::cuda {

// Never throws: with no driver the list is empty and `source` says why; missing NVML leaves the
// NVLink/PCIe readings out.
topo::Readings read_topology();

}  // namespace gpuscout::cuda
