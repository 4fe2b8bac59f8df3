#include "gpuscout/topo/topology.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <numeric>

namespace gpuscout::topo {

std::string pcie_path_label(PcieLevel level) {
  switch (level) {
    case PcieLevel::internal:
      return "X";
    case PcieLevel::single:
      return "PIX";
    case PcieLevel::multiple:
      return "PXB";
    case PcieLevel::hostbridge:
      return "PHB";
    case PcieLevel::node:
      return "NODE";
    case PcieLevel::system:
      return "SYS";
  }
  return "n/a";
}

std::optional<PcieLevel> pcie_level_from_nvml(int value) {
  switch (value) {
    case 0:
    case 10:
    case 20:
    case 30:
    case 40:
    case 50:
      return static_cast<PcieLevel>(value);
    default:
      return std::nullopt;
  }
}

std::string cpu_list_from_mask(const std::vector<std::uint64_t>& words) {
  std::string out;
  int start = -1;
  const int bits = static_cast<int>(words.size() * 64);
  for (int cpu = 0; cpu <= bits; ++cpu) {
    const bool set = cpu < bits && ((words[static_cast<std::size_t>(cpu / 64)] >> (cpu % 64)) & 1u) != 0;
    if (set && start < 0) start = cpu;
    if (!set && start >= 0) {
      if (!out.empty()) out += ",";
      out += start == cpu - 1 ? fmt::format("{}", start) : fmt::format("{}-{}", start, cpu - 1);
      start = -1;
    }
  }
  return out;
}

std::vector<std::uint64_t> process_cpu_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<std::uint64_t> words;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const auto word = static_cast<std::size_t>(cpu / 64);
    if (words.size() <= word) words.resize(word + 1, 0);
    words[word] |= std::uint64_t{1} << (cpu % 64);
  }
  return words;
}

namespace {

std::optional<int> arch_nvlink_generation(std::optional<int> cc_major) {
  if (!cc_major) return std::nullopt;
  switch (*cc_major) {
    case 6:
      return 1;
    case 7:
      return 2;
    case 8:
      return 3;
    case 9:
      return 4;
    default:
      return *cc_major >= 10 ? std::optional<int>(5) : std::nullopt;
  }
}

std::optional<int> enum_generation(unsigned raw) {
  static constexpr int kGen[] = {0, 1, 2, 2, 3, 3, 4, 5, 6};  // nvmlNvlinkVersion_t -> generation
  if (raw == 0 || raw >= sizeof(kGen) / sizeof(kGen[0])) return std::nullopt;
  return kGen[raw];
}

std::string enum_label(unsigned raw) {
  static constexpr const char* kLabel[] = {"", "1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0", "6.0"};
  if (raw == 0 || raw >= sizeof(kLabel) / sizeof(kLabel[0])) return fmt::format("raw {}", raw);
  return kLabel[raw];
}

}  // namespace

std::optional<int> nvlink_generation(unsigned version_raw, std::optional<int> cc_major) {
  const auto by_enum = enum_generation(version_raw);
  const auto by_arch = arch_nvlink_generation(cc_major);
  if (by_arch && by_enum == by_arch) return by_enum;
  // Some drivers return the plain generation number (4 on Hopper) instead of the enum.
  if (by_arch && static_cast<int>(version_raw) == *by_arch) return by_arch;
  return by_enum ? by_enum : by_arch;
}

std::string normalize_bus_id(const std::string& id) {
  std::string s;
  for (char c : id) {
    if (c == '\0') break;
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const auto colon = s.find(':');
  if (colon != std::string::npos && colon < 8 && s.find(':', colon + 1) != std::string::npos) {
    s = std::string(8 - colon, '0') + s;
  }
  return s;
}

LinkLabel label_link(const GpuReading::Link& link, const std::map<std::string, int>& local_ids, int self) {
  constexpr unsigned kRemoteGpu = 0, kRemoteSwitch = 2;  // nvmlIntNvLinkDeviceType_t
  const std::string remote = normalize_bus_id(link.remote_bus_id);
  const auto it = remote.empty() ? local_ids.end() : local_ids.find(remote);
  if (it != local_ids.end()) return it->second == self ? LinkLabel{} : LinkLabel{LinkTarget::local_gpu, it->second};
  if (link.remote_device_type == kRemoteSwitch) return {LinkTarget::nvswitch};
  if (link.remote_device_type == kRemoteGpu) return {LinkTarget::unmatched_gpu};
  return remote.empty() ? LinkLabel{} : LinkLabel{LinkTarget::unknown_far_end};
}

std::map<std::string, int> infer_host_ids(const std::vector<std::set<std::string>>& seen) {
  std::set<std::string> all;
  for (const auto& ids : seen) all.insert(ids.begin(), ids.end());
  std::map<std::string, int> found;
  std::set<std::string> claimed_twice;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].empty()) continue;
    std::vector<std::string> missing;
    std::set_difference(all.begin(), all.end(), seen[i].begin(), seen[i].end(), std::back_inserter(missing));
    if (missing.size() != 1) continue;
    if (!found.emplace(missing.front(), static_cast<int>(i)).second) claimed_twice.insert(missing.front());
  }
  for (const auto& id : claimed_twice) found.erase(id);
  return found;
}

Topology build_topology(const Readings& r) {
  Topology t;
  const int n = static_cast<int>(r.gpus.size());
  t.gpu_count = n;
  const auto un = static_cast<std::size_t>(n);
  t.nvlink_count.assign(un, std::vector<int>(un, 0));
  t.nvlink_active.assign(un, 0);
  t.nvlink_total.assign(un, 0);
  t.nvswitch_links.assign(un, 0);
  t.unmatched_gpu_links.assign(un, 0);
  std::map<std::string, int> by_bus;
  for (int i = 0; i < n; ++i) by_bus[normalize_bus_id(r.gpus[static_cast<std::size_t>(i)].pci_bus_id)] = i;
  // GPU ids the links report that match no local GPU, per GPU, to recognise a VM's host ids.
  std::vector<std::set<std::string>> unmatched(un);
  for (int i = 0; i < n; ++i) {
    for (const auto& link : r.gpus[static_cast<std::size_t>(i)].nvlinks) {
      if (link.active && !link.remote_bus_id.empty() &&
          label_link(link, by_bus, i).target == LinkTarget::unmatched_gpu) {
        unmatched[static_cast<std::size_t>(i)].insert(normalize_bus_id(link.remote_bus_id));
      }
    }
  }
  const auto host_ids = infer_host_ids(unmatched);
  bool fallback = false;

  for (int i = 0; i < n; ++i) {
    const GpuReading& g = r.gpus[static_cast<std::size_t>(i)];
    const auto ui = static_cast<std::size_t>(i);
    std::optional<unsigned> version;
    for (const auto& link : g.nvlinks) {
      ++t.nvlink_total[ui];
      if (!link.active) continue;
      ++t.nvlink_active[ui];
      if (!version && link.version_raw) version = link.version_raw;
      const LinkLabel label = label_link(link, by_bus, i);
      switch (label.target) {
        case LinkTarget::local_gpu:
          ++t.nvlink_count[ui][static_cast<std::size_t>(label.gpu)];
          break;
        case LinkTarget::unmatched_gpu: {
          const auto it = host_ids.find(normalize_bus_id(link.remote_bus_id));
          if (it != host_ids.end() && it->second != i) {
            ++t.nvlink_count[ui][static_cast<std::size_t>(it->second)];
          } else {
            ++t.unmatched_gpu_links[ui];
          }
          break;
        }
        case LinkTarget::unknown_far_end:
          fallback = true;
          [[fallthrough]];
        case LinkTarget::nvswitch:
          ++t.nvswitch_links[ui];
          break;
        case LinkTarget::none:
          break;
      }
    }
    t.nvlink_generation.push_back(version ? nvlink_generation(*version, g.cc_major) : std::nullopt);
    t.nvlink_version_label.push_back(version ? enum_label(*version) : "");
    std::optional<double> per_link;
    if (g.nvlink_speed_mbps && *g.nvlink_speed_mbps > 0) per_link = *g.nvlink_speed_mbps / 1000.0;
    t.nvlink_link_gbps.push_back(per_link);
    t.nvlink_total_gbps.push_back(
        per_link && t.nvlink_active[ui] > 0 ? std::optional<double>(*per_link * t.nvlink_active[ui]) : std::nullopt);
    t.cpu_affinity.push_back(cpu_list_from_mask(g.cpu_affinity_mask));
    t.numa_node.push_back(g.numa_node);
    auto link_text = [](std::optional<int> gen, std::optional<int> width) {
      if (!gen && !width) return std::string();
      return fmt::format("gen{} x{}", gen ? std::to_string(*gen) : "?", width ? std::to_string(*width) : "?");
    };
    t.pcie_now.push_back(link_text(g.pcie_gen, g.pcie_width));
    t.pcie_max.push_back(link_text(g.pcie_gen_max, g.pcie_width_max));
  }
  // Both ends report a direct link; NVSwitch pairs reach each other over all their switch links.
  for (std::size_t i = 0; i < un; ++i) {
    for (std::size_t j = 0; j < un; ++j) {
      if (i == j) continue;
      int c = std::max(t.nvlink_count[i][j], t.nvlink_count[j][i]);
      if (c == 0 && t.nvswitch_links[i] > 0 && t.nvswitch_links[j] > 0) {
        c = std::min(t.nvswitch_links[i], t.nvswitch_links[j]);
      }
      t.nvlink_count[i][j] = c;
    }
  }
  const bool have_peer = r.peer_access.size() == un;
  t.matrix.assign(un, std::vector<std::string>(un));
  t.p2p_path.assign(un, std::vector<std::string>(un));
  for (std::size_t i = 0; i < un; ++i) {
    for (std::size_t j = 0; j < un; ++j) {
      if (i == j) {
        t.matrix[i][j] = "X";
        t.p2p_path[i][j] = "self";
        continue;
      }
      std::optional<PcieLevel> level;
      if (i < r.common_ancestor.size() && j < r.common_ancestor[i].size() && r.common_ancestor[i][j]) {
        level = pcie_level_from_nvml(*r.common_ancestor[i][j]);
      }
      if (t.nvlink_count[i][j] > 0) {
        t.matrix[i][j] = fmt::format("NV{}", t.nvlink_count[i][j]);
      } else {
        t.matrix[i][j] = level ? pcie_path_label(*level) : "n/a";
      }
      const bool peer = have_peer && r.peer_access[i].size() == un && r.peer_access[i][j];
      if (t.nvlink_count[i][j] > 0 && (!have_peer || peer)) {
        t.p2p_path[i][j] = "nvlink";
      } else if (peer) {
        t.p2p_path[i][j] = "pcie_p2p";
      } else {
        t.p2p_path[i][j] = have_peer ? "via_host" : "unknown";
      }
    }
  }
  // NVLink domains: connected components of the NVLink graph.
  std::vector<int> parent(un);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)];
    return x;
  };
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (t.nvlink_count[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] > 0) {
        parent[static_cast<std::size_t>(find(j))] = find(i);
      }
    }
  }
  std::map<int, std::vector<int>> groups;
  for (int i = 0; i < n; ++i) groups[find(i)].push_back(i);
  for (const auto& [root, members] : groups) {
    if (members.size() < 2) continue;
    bool sw = false;
    for (int m : members) sw = sw || t.nvswitch_links[static_cast<std::size_t>(m)] > 0;
    t.nvlink_domains.push_back(members);
    t.domain_kind.push_back(sw ? "nvswitch" : "direct");
  }
  if (fallback) {
    t.notes.push_back(
        "NVML does not say what is at the far end of some NVLinks and their remote PCI ids match no local GPU: an "
        "NVSwitch is assumed (peers with virtualized bus ids would look the same); GPUs linked that way are counted "
        "as one fabric");
  }
  if (!host_ids.empty()) {
    t.notes.push_back(
        "NVML names GPUs at the far end of the NVLinks under PCI ids other than this machine's (virtualized ids, as "
        "in a VM); each GPU was matched to the one such id it does not see itself");
  }
  if (std::any_of(t.unmatched_gpu_links.begin(), t.unmatched_gpu_links.end(), [](int v) { return v > 0; })) {
    t.notes.push_back("Some NVLinks go to GPUs that could not be identified here (outside this machine or VM)");
  }
  if (!r.source.empty() && r.source != "NVML") t.notes.push_back(r.source);
  return t;
}

nlohmann::ordered_json to_json(const Topology& t) {
  nlohmann::ordered_json j;
  j["gpu_count"] = t.gpu_count;
  j["matrix"] = t.matrix;
  j["nvlink_count"] = t.nvlink_count;
  j["p2p_path"] = t.p2p_path;
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.gpu_count); ++i) {
    nlohmann::ordered_json g;
    g["index"] = i;
    g["cpu_affinity"] = t.cpu_affinity[i];
    g["numa_node"] = t.numa_node[i] ? nlohmann::ordered_json(*t.numa_node[i]) : nullptr;
    g["nvlink_generation"] = t.nvlink_generation[i] ? nlohmann::ordered_json(*t.nvlink_generation[i]) : nullptr;
    g["nvlink_version"] = t.nvlink_version_label[i];
    g["nvlink_active_links"] = t.nvlink_active[i];
    g["nvlink_links"] = t.nvlink_total[i];
    g["nvswitch_links"] = t.nvswitch_links[i];
    g["unmatched_gpu_links"] = t.unmatched_gpu_links[i];
    g["nvlink_link_gbps_per_direction"] =
        t.nvlink_link_gbps[i] ? nlohmann::ordered_json(*t.nvlink_link_gbps[i]) : nullptr;
    g["nvlink_total_gbps_per_direction"] =
        t.nvlink_total_gbps[i] ? nlohmann::ordered_json(*t.nvlink_total_gbps[i]) : nullptr;
    g["pcie_link_now"] = t.pcie_now[i];
    g["pcie_link_max"] = t.pcie_max[i];
    gpus.push_back(std::move(g));
  }
  j["gpus"] = std::move(gpus);
  nlohmann::ordered_json domains = nlohmann::ordered_json::array();
  for (std::size_t d = 0; d < t.nvlink_domains.size(); ++d) {
    domains.push_back({{"gpus", t.nvlink_domains[d]}, {"kind", t.domain_kind[d]}});
  }
  j["nvlink_domains"] = std::move(domains);
  j["legend"] =
      "X = self; NV# = # NVLink links between the pair (direct or through NVSwitch); PIX = one PCIe switch; PXB = "
      "several PCIe switches; PHB = a PCIe host bridge; NODE = host bridges within one NUMA node; SYS = across NUMA "
      "nodes (SMP interconnect)";
  j["notes"] = t.notes;
  return j;
}

std::vector<report::Table> topology_tables(const Topology& t, const std::vector<std::string>& gpu_names) {
  std::vector<report::Table> tables;
  const auto n = static_cast<std::size_t>(t.gpu_count);
  report::Table m;
  m.key = "topology_matrix";
  m.title = "GPU topology (as nvidia-smi topo -m)";
  m.add_column("gpu", "");
  for (std::size_t j = 0; j < n; ++j) m.add_column(fmt::format("gpu{}", j), fmt::format("GPU{}", j));
  m.add_column("cpu_affinity", "CPU affinity");
  m.add_column("numa_node", "NUMA node", "", -1, report::Align::right);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<report::Cell> row{fmt::format("GPU{}", i)};
    for (std::size_t j = 0; j < n; ++j) row.emplace_back(t.matrix[i][j]);
    row.emplace_back(t.cpu_affinity[i].empty() ? report::Cell{} : report::Cell{t.cpu_affinity[i]});
    row.emplace_back(t.numa_node[i] ? report::Cell{std::int64_t{*t.numa_node[i]}} : report::Cell{});
    m.add_row(std::move(row));
  }
  m.notes.push_back(
      "X = self, NV# = # NVLink links (direct or through NVSwitch), PIX = one PCIe switch, PXB = several PCIe "
      "switches, PHB = PCIe host bridge, NODE = within a NUMA node, SYS = across NUMA nodes");
  for (const auto& note : t.notes) m.notes.push_back(note);
  tables.push_back(std::move(m));

  report::Table l;
  l.key = "gpu_links";
  l.title = "Links per GPU";
  l.add_column("gpu", "GPU", "", -1, report::Align::right);
  l.add_column("name", "Name");
  l.add_column("nvlink_generation", "NVLink gen", "", -1, report::Align::right);
  l.add_column("nvlink_active_links", "Active links", "", -1, report::Align::right);
  l.add_column("nvlink_links", "Links", "", -1, report::Align::right);
  l.add_column("nvlink_link_gbps", "Per link", "GB/s", 2, report::Align::right);
  l.add_column("nvlink_total_gbps", "NVLink total", "GB/s", 1, report::Align::right);
  l.add_column("nvswitch_links", "To NVSwitch", "", -1, report::Align::right);
  l.add_column("pcie_link_now", "PCIe now");
  l.add_column("pcie_link_max", "PCIe max");
  for (std::size_t i = 0; i < n; ++i) {
    auto opt_int = [](std::optional<int> v) { return v ? report::Cell{std::int64_t{*v}} : report::Cell{}; };
    auto opt_dbl = [](std::optional<double> v) { return v ? report::Cell{*v} : report::Cell{}; };
    auto text = [](const std::string& s) { return s.empty() ? report::Cell{} : report::Cell{s}; };
    l.add_row({std::int64_t(i), i < gpu_names.size() ? report::Cell{gpu_names[i]} : report::Cell{},
               opt_int(t.nvlink_generation[i]), std::int64_t{t.nvlink_active[i]}, std::int64_t{t.nvlink_total[i]},
               opt_dbl(t.nvlink_link_gbps[i]), opt_dbl(t.nvlink_total_gbps[i]), std::int64_t{t.nvswitch_links[i]},
               text(t.pcie_now[i]), text(t.pcie_max[i])});
  }
  l.notes.push_back("NVLink GB/s per direction (1 GB = 1e9 B); both directions together are twice that.");
  l.notes.push_back("PCIe now drops to a low generation at idle; max is what the link can train to.");
  tables.push_back(std::move(l));

  report::Table d;
  d.key = "nvlink_domains";
  d.title = "NVLink domains";
  d.add_column("domain", "Domain", "", -1, report::Align::right);
  d.add_column("kind", "Kind");
  d.add_column("gpus", "GPUs");
  for (std::size_t k = 0; k < t.nvlink_domains.size(); ++k) {
    std::string members;
    for (int g : t.nvlink_domains[k]) members += (members.empty() ? "" : ",") + std::to_string(g);
    d.add_row({std::int64_t(k), t.domain_kind[k], members});
  }
  if (t.nvlink_domains.empty()) d.notes.push_back("No two GPUs share an NVLink domain: peer traffic goes over PCIe.");
  tables.push_back(std::move(d));
  return tables;
}

}  // namespace gpuscout::topo
