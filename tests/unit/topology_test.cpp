#include <gtest/gtest.h>

#include <fstream>

#include "gpuscout/topo/topology.hpp"

using namespace gpuscout::topo;

namespace {
GpuReading gpu(int index, const std::string& bus, int cc = 9) {
  GpuReading g;
  g.index = index;
  g.name = "NVIDIA H200";
  g.pci_bus_id = bus;
  g.cc_major = cc;
  return g;
}
void link_to(GpuReading& g, const std::string& remote, int count, unsigned version = 6,
             std::optional<unsigned> remote_type = std::nullopt) {
  for (int i = 0; i < count; ++i) {
    g.nvlinks.push_back({static_cast<int>(g.nvlinks.size()), true, remote, version, remote_type});
  }
}
constexpr unsigned kRemoteGpu = 0, kRemoteSwitch = 2;  // nvmlIntNvLinkDeviceType_t
}  // namespace

TEST(Topology, TwoGpusWithEighteenLinks) {
  Readings r;
  r.gpus = {gpu(0, "00000000:18:00.0"), gpu(1, "00000000:2A:00.0")};
  link_to(r.gpus[0], "00000000:2a:00.0", 18);
  link_to(r.gpus[1], "0000:18:00.0", 18);  // short domain form, as some readings give it
  r.gpus[0].nvlink_speed_mbps = 26562.5;
  r.gpus[1].nvlink_speed_mbps = 26562.5;
  r.gpus[0].cpu_affinity_mask = {0xffffull};
  r.gpus[0].numa_node = 0;
  r.gpus[0].pcie_gen = 1;
  r.gpus[0].pcie_width = 16;
  r.gpus[0].pcie_gen_max = 5;
  r.gpus[0].pcie_width_max = 16;
  r.common_ancestor = {{std::nullopt, 50}, {50, std::nullopt}};
  r.peer_access = {{false, true}, {true, false}};
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][1], "NV18");
  EXPECT_EQ(t.matrix[1][0], "NV18");
  EXPECT_EQ(t.matrix[0][0], "X");
  EXPECT_EQ(t.p2p_path[0][1], "nvlink");
  EXPECT_EQ(t.nvlink_active[0], 18);
  EXPECT_EQ(t.nvlink_generation[0], 4);
  EXPECT_EQ(t.nvlink_version_label[0], "4.0");
  EXPECT_NEAR(*t.nvlink_total_gbps[0], 478.125, 1e-9);
  EXPECT_EQ(t.cpu_affinity[0], "0-15");
  EXPECT_EQ(t.pcie_now[0], "gen1 x16");
  EXPECT_EQ(t.pcie_max[0], "gen5 x16");
  ASSERT_EQ(t.nvlink_domains.size(), 1u);
  EXPECT_EQ(t.nvlink_domains[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(t.domain_kind[0], "direct");
  const auto j = to_json(t);
  EXPECT_EQ(j["matrix"][0][1], "NV18");
  EXPECT_EQ(j["gpus"][0]["nvlink_generation"], 4);
  const auto tables = topology_tables(t, {"NVIDIA H200", "NVIDIA H200"});
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].rows.size(), 2u);
  EXPECT_EQ(tables[0].columns.size(), 5u);  // label, GPU0, GPU1, CPU affinity, NUMA
}

TEST(Topology, PcieOnlyPairsAndPeerAccess) {
  Readings r;
  r.gpus = {gpu(0, "00000000:01:00.0"), gpu(1, "00000000:02:00.0"), gpu(2, "00000000:81:00.0")};
  r.common_ancestor = {{std::nullopt, 10, 50}, {10, std::nullopt, 50}, {50, 50, std::nullopt}};
  r.peer_access = {{false, true, false}, {true, false, false}, {false, false, false}};
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][1], "PIX");
  EXPECT_EQ(t.matrix[0][2], "SYS");
  EXPECT_EQ(t.p2p_path[0][1], "pcie_p2p");
  EXPECT_EQ(t.p2p_path[0][2], "via_host");
  EXPECT_TRUE(t.nvlink_domains.empty());
  EXPECT_FALSE(t.nvlink_generation[0].has_value());
}

TEST(Topology, NvSwitchMakesOneDomain) {
  Readings r;
  for (int i = 0; i < 4; ++i) {
    r.gpus.push_back(gpu(i, "00000000:0" + std::to_string(i) + ":00.0"));
    link_to(r.gpus.back(), "00000000:f0:00.0", 18);  // an NVSwitch, not a GPU
  }
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][3], "NV18");
  EXPECT_EQ(t.nvswitch_links[2], 18);
  ASSERT_EQ(t.nvlink_domains.size(), 1u);
  EXPECT_EQ(t.nvlink_domains[0].size(), 4u);
  EXPECT_EQ(t.domain_kind[0], "nvswitch");
  EXPECT_EQ(t.p2p_path[0][1], "nvlink");  // peer access unknown
}

TEST(Topology, PairsOfPairs) {
  Readings r;
  for (int i = 0; i < 4; ++i) r.gpus.push_back(gpu(i, "00000000:1" + std::to_string(i) + ":00.0", 8));
  link_to(r.gpus[0], "00000000:11:00.0", 4, 4);
  link_to(r.gpus[1], "00000000:10:00.0", 4, 4);
  link_to(r.gpus[2], "00000000:13:00.0", 2, 4);
  link_to(r.gpus[3], "00000000:12:00.0", 2, 4);
  r.gpus[3].nvlinks.push_back({2, false, "", std::nullopt});  // an inactive link
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][1], "NV4");
  EXPECT_EQ(t.matrix[2][3], "NV2");
  EXPECT_EQ(t.matrix[0][2], "n/a");
  EXPECT_EQ(t.nvlink_domains.size(), 2u);
  EXPECT_EQ(t.nvlink_total[3], 3);
  EXPECT_EQ(t.nvlink_active[3], 2);
  EXPECT_EQ(t.nvlink_generation[0], 3);  // enum 4 = NVLink 3.0 on Ampere
}

// The process's CPUs as the kernel lists them in /proc/self/status ("Cpus_allowed_list: 0-15").
TEST(Topology, ProcessCpuMaskMatchesTheKernelsList) {
  std::ifstream status("/proc/self/status");
  std::string expected;
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("Cpus_allowed_list:")) {
      expected = line.substr(line.find_first_not_of(" \t", std::string("Cpus_allowed_list:").size()));
    }
  }
  if (expected.empty()) GTEST_SKIP() << "no Cpus_allowed_list in /proc/self/status";
  EXPECT_EQ(cpu_list_from_mask(process_cpu_mask()), expected);
}

TEST(Topology, Helpers) {
  EXPECT_EQ(cpu_list_from_mask({}), "");
  EXPECT_EQ(cpu_list_from_mask({0b1011ull}), "0-1,3");
  EXPECT_EQ(cpu_list_from_mask({0ull, 1ull}), "64");
  EXPECT_EQ(cpu_list_from_mask({~0ull, 1ull}), "0-64");
  EXPECT_EQ(normalize_bus_id("0000:1A:00.0"), "00000000:1a:00.0");
  EXPECT_EQ(normalize_bus_id("00000000:1a:00.0"), "00000000:1a:00.0");
  EXPECT_EQ(pcie_path_label(PcieLevel::hostbridge), "PHB");
  EXPECT_FALSE(pcie_level_from_nvml(7).has_value());
  EXPECT_EQ(nvlink_generation(6, 9), 4);  // the enum
  EXPECT_EQ(nvlink_generation(4, 9), 4);  // a driver returning the generation itself
  EXPECT_EQ(nvlink_generation(7, 10), 5);
  EXPECT_EQ(nvlink_generation(6, std::nullopt), 4);
}

// The 2x H200 VM: NVML reports the far end under the host's PCI ids (0000:c0/0000:d0 here), which
// are not the guest's (18/2a). With the remote device type the pair is a direct link, not a fabric.
TEST(Topology, VirtualizedPeerIdsWithRemoteTypeGpuAreADirectLink) {
  Readings r;
  r.gpus = {gpu(0, "00000000:18:00.0"), gpu(1, "00000000:2A:00.0")};
  link_to(r.gpus[0], "00000000:d0:00.0", 18, 6, kRemoteGpu);
  link_to(r.gpus[1], "00000000:c0:00.0", 18, 6, kRemoteGpu);
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][1], "NV18");
  EXPECT_EQ(t.matrix[1][0], "NV18");
  EXPECT_EQ(t.nvswitch_links[0], 0);
  EXPECT_EQ(t.unmatched_gpu_links[0], 0);
  ASSERT_EQ(t.nvlink_domains.size(), 1u);
  EXPECT_EQ(t.domain_kind[0], "direct");
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("virtualized"), std::string::npos);
  EXPECT_EQ(to_json(t)["gpus"][1]["unmatched_gpu_links"], 0);
}

// Same readings without the device type (older NVML): the fallback counts the pair as a fabric.
TEST(Topology, VirtualizedPeerIdsWithoutRemoteTypeFallBackToAFabric) {
  Readings r;
  r.gpus = {gpu(0, "00000000:18:00.0"), gpu(1, "00000000:2A:00.0")};
  link_to(r.gpus[0], "00000000:d0:00.0", 18);
  link_to(r.gpus[1], "00000000:c0:00.0", 18);
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][1], "NV18");
  EXPECT_EQ(t.nvswitch_links[0], 18);
  ASSERT_EQ(t.nvlink_domains.size(), 1u);
  EXPECT_EQ(t.domain_kind[0], "nvswitch");
  ASSERT_FALSE(t.notes.empty());
  EXPECT_NE(t.notes[0].find("assumed"), std::string::npos);
}

TEST(Topology, RemoteTypeSwitchIsAnNvSwitchWithoutTheFallbackNote) {
  Readings r;
  for (int i = 0; i < 3; ++i) {
    r.gpus.push_back(gpu(i, "00000000:0" + std::to_string(i) + ":00.0"));
    link_to(r.gpus.back(), "00000000:f0:00.0", 18, 6, kRemoteSwitch);
  }
  const Topology t = build_topology(r);
  EXPECT_EQ(t.matrix[0][2], "NV18");
  EXPECT_EQ(t.nvswitch_links[1], 18);
  ASSERT_EQ(t.domain_kind.size(), 1u);
  EXPECT_EQ(t.domain_kind[0], "nvswitch");
  EXPECT_TRUE(t.notes.empty());
}

// One GPU of a machine passed into a VM: its links go to GPUs this VM does not have.
TEST(Topology, LinksToGpusOutsideTheMachineAreNotPeers) {
  Readings r;
  r.gpus = {gpu(0, "00000000:18:00.0")};
  link_to(r.gpus[0], "00000000:c0:00.0", 9, 6, kRemoteGpu);
  link_to(r.gpus[0], "00000000:d0:00.0", 9, 6, kRemoteGpu);
  const Topology t = build_topology(r);
  EXPECT_EQ(t.unmatched_gpu_links[0], 18);
  EXPECT_EQ(t.nvswitch_links[0], 0);
  EXPECT_TRUE(t.nvlink_domains.empty());
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("could not be identified"), std::string::npos);
}

TEST(Topology, LabelLink) {
  const std::map<std::string, int> local{{"00000000:18:00.0", 0}, {"00000000:2a:00.0", 1}};
  using L = GpuReading::Link;
  // A local id wins over the device type; a link back to itself is no peer.
  EXPECT_EQ(label_link(L{0, true, "0000:2A:00.0", 6, kRemoteGpu}, local, 0).target, LinkTarget::local_gpu);
  EXPECT_EQ(label_link(L{0, true, "0000:2A:00.0", 6, std::nullopt}, local, 0).gpu, 1);
  EXPECT_EQ(label_link(L{0, true, "00000000:18:00.0", 6, kRemoteGpu}, local, 0).target, LinkTarget::none);
  EXPECT_EQ(label_link(L{0, true, "00000000:f0:00.0", 6, kRemoteSwitch}, local, 0).target, LinkTarget::nvswitch);
  EXPECT_EQ(label_link(L{0, true, "00000000:f0:00.0", 6, kRemoteGpu}, local, 0).target, LinkTarget::unmatched_gpu);
  EXPECT_EQ(label_link(L{0, true, "00000000:f0:00.0", 6, 0xFFu}, local, 0).target, LinkTarget::unknown_far_end);
  EXPECT_EQ(label_link(L{0, true, "00000000:f0:00.0", 6, std::nullopt}, local, 0).target, LinkTarget::unknown_far_end);
  EXPECT_EQ(label_link(L{0, true, "", 6, std::nullopt}, local, 0).target, LinkTarget::none);
}

TEST(Topology, InferHostIds) {
  // A fully linked group of three: each sees the other two.
  const auto three = infer_host_ids({{"b", "c"}, {"a", "c"}, {"a", "b"}});
  EXPECT_EQ(three, (std::map<std::string, int>{{"a", 0}, {"b", 1}, {"c", 2}}));
  // Two separate pairs: every GPU misses three ids, so none can be named.
  EXPECT_TRUE(infer_host_ids({{"b"}, {"a"}, {"d"}, {"c"}}).empty());
  // Two GPUs that see the same single id would both claim the other one: neither is named.
  EXPECT_TRUE(infer_host_ids({{"a"}, {"a"}, {"a", "b"}}).empty());
  EXPECT_TRUE(infer_host_ids({{}, {}}).empty());
}
