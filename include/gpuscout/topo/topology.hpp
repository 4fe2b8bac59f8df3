#pragma once
// The GPU topology `gpuscout topo` prints and every bench result records (pure C++, tested in CI):
// built from plain readings (NVML in the CUDA backend, or a test's numbers) into the matrix
// `nvidia-smi topo -m` prints (NV# = NVLink links between a pair, else the PCIe path type), CPU and
// NUMA affinity, NVLink generation, active links and speed, PCIe link now vs maximum, and the
// groups of GPUs that share an NVLink domain (direct links or NVSwitch).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuscout/report/table.hpp"

namespace gpuscout::topo {

// NVML's nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs on the PCIe tree.
enum class PcieLevel { internal = 0, single = 10, multiple = 20, hostbridge = 30, node = 40, system = 50 };
// nvidia-smi's label: internal "X"... single "PIX", multiple "PXB", hostbridge "PHB", node "NODE", system "SYS".
std::string pcie_path_label(PcieLevel level);
std::optional<PcieLevel> pcie_level_from_nvml(int value);

struct GpuReading {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "00000000:18:00.0", as NVML writes it
  std::optional<int> cc_major;
  std::optional<int> numa_node;
  std::vector<std::uint64_t> cpu_affinity_mask;  // NVML's words, bit i = CPU i; empty when unknown
  // NVLink: one entry per link NVML knows (state active or not, its remote PCI bus id when active).
  struct Link {
    int id = 0;
    bool active = false;
    std::string remote_bus_id;            // another GPU, an NVSwitch, or empty
    std::optional<unsigned> version_raw;  // nvmlDeviceGetNvLinkVersion
    // nvmlDeviceGetNvLinkRemoteDeviceType (nvmlIntNvLinkDeviceType_t); unset when NVML lacks it.
    std::optional<unsigned> remote_device_type;
  };
  std::vector<Link> nvlinks;
  std::optional<double> nvlink_speed_mbps;  // per link, per direction (NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON)
  std::optional<int> pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
};

struct Readings {
  std::vector<GpuReading> gpus;
  // common_ancestor[i][j]: NVML topology level of GPUs i and j (unset on the diagonal or when unknown).
  std::vector<std::vector<std::optional<int>>> common_ancestor;
  // peer_access[i][j]: cudaDeviceCanAccessPeer(i, j); empty when unknown.
  std::vector<std::vector<bool>> peer_access;
  std::string source;  // "NVML" or why readings are missing
};

struct Topology {
  int gpu_count = 0;
  std::vector<std::vector<int>> nvlink_count;      // links between i and j (0 on the diagonal)
  std::vector<std::vector<std::string>> matrix;    // "X", "NV18", "PIX", "SYS", "n/a"
  std::vector<std::vector<std::string>> p2p_path;  // "nvlink", "pcie_p2p", "via_host", "self"
  std::vector<std::string> cpu_affinity;           // "0-15,32-47" per GPU
  std::vector<std::optional<int>> numa_node;
  std::vector<int> nvlink_active, nvlink_total, nvswitch_links;
  // Active links whose far end NVML calls a GPU that is not one of this machine's (a GPU outside
  // the VM, or a virtualized id that could not be matched).
  std::vector<int> unmatched_gpu_links;
  std::vector<std::optional<int>> nvlink_generation;
  std::vector<std::string> nvlink_version_label;         // "4.0", or "raw 4 (ambiguous)"
  std::vector<std::optional<double>> nvlink_link_gbps;   // per link per direction, GB/s
  std::vector<std::optional<double>> nvlink_total_gbps;  // active links x per-link, per direction
  std::vector<std::string> pcie_now, pcie_max;           // "gen5 x16"
  std::vector<std::vector<int>> nvlink_domains;          // groups of GPU indices (size >= 2)
  // "direct" (GPU-to-GPU links), "nvswitch" (NVML names a switch at the far end, or, where NVML cannot
  // say, a far end that is no local GPU: the fallback, explained in notes) per domain.
  std::vector<std::string> domain_kind;
  std::vector<std::string> notes;
};

Topology build_topology(const Readings& readings);

// Where one active NVLink goes, from the remote PCI id and NVML's remote device type.
enum class LinkTarget {
  none,            // no far end reported
  local_gpu,       // a GPU of this machine (`gpu` says which), by PCI id
  unmatched_gpu,   // NVML says a GPU, but its id is none of ours (VM-virtualized ids, or outside the VM)
  nvswitch,        // NVML says an NVSwitch
  unknown_far_end  // no device type from NVML and no local id matches: NVSwitch assumed (fallback)
};
struct LinkLabel {
  LinkTarget target = LinkTarget::none;
  int gpu = -1;  // local GPU index for local_gpu
};
// `local_ids`: normalized PCI bus id -> GPU index; `self`: the GPU the link belongs to.
LinkLabel label_link(const GpuReading::Link& link, const std::map<std::string, int>& local_ids, int self);

// A VM's NVML reports the far end of a GPU-to-GPU link by the host's PCI id, which differs from the
// id the guest sees. In a group of GPUs that all link to each other, each GPU sees every other
// member's host id and never its own, so a GPU's host id is the one id of the group it does not see.
// `seen[i]`: the unmatched GPU ids GPU i's links report (empty for GPUs without such links).
// Returns host id -> GPU index for the GPUs where that id is unique; empty when ambiguous.
std::map<std::string, int> infer_host_ids(const std::vector<std::set<std::string>>& seen);

// NVML words -> "0-15,32-47"; "" for no bits.
std::string cpu_list_from_mask(const std::vector<std::uint64_t>& words);
// The CPUs this process may run on (sched_getaffinity) in the same words (bit i = CPU i); empty
// when unknown.
std::vector<std::uint64_t> process_cpu_mask();
// NVLink generation from nvmlDeviceGetNvLinkVersion's value. Drivers return the nvmlNvlinkVersion_t
// enum (1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0); the architecture (compute
// capability 7 -> 2, 8 -> 3, 9 -> 4, 10+ -> 5) decides when both readings are plausible.
std::optional<int> nvlink_generation(unsigned version_raw, std::optional<int> cc_major);
// Normalises a PCI bus id for comparison: lower case, 8-digit domain ("0000:18:00.0" -> "00000000:18:00.0").
std::string normalize_bus_id(const std::string& id);

nlohmann::ordered_json to_json(const Topology& topo);
// The matrix table (rows and columns GPU0.., then CPU affinity and NUMA node), the per-GPU link
// table and the domain table.
std::vector<report::Table> topology_tables(const Topology& topo, const std::vector<std::string>& gpu_names);

}  // namespace gpuscout::topo
