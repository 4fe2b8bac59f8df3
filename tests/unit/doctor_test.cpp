// gpuscout doctor's rules on hand-made facts: what a healthy machine gives, and each thing that
// should turn a finding to warn or fail.
#include "gpuscout/doctor/doctor.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/specs/spec_db.hpp"

namespace gpuscout::doctor {
namespace {

const specs::SpecDb& db() {
  static const specs::SpecDb instance = specs::SpecDb::load(data::DataSource::embedded());
  return instance;
}

// A machine as it should be: CUDA build, driver newer than the runtime, an idle H200 at its defaults.
Facts healthy(int gpus = 1) {
  Facts f;
  f.host.build = {true, {"80-real", "90-real", "90-virtual"}, true, false};
  f.host.data_origin = "embedded data";
  f.host.gpu_specs = 20;
  f.host.models = 14;
  f.host.history_path = "/tmp/history.db";
  f.host.history_writable = true;
  f.host.cpu_governors = {{"performance", 16}};
  f.host.process_cpus = {0xFFFF};  // CPUs 0-15, one NUMA node
  f.driver = {true, 13000, 13000, "580.95.05", "", ""};
  for (int i = 0; i < gpus; ++i) {
    GpuFacts g;
    g.index = i;
    g.name = "NVIDIA H200";
    g.compute_capability = "9.0";
    g.spec = db().find("H200-SXM-141GB");
    g.nvml = true;
    g.persistence_mode = true;
    g.power_limit_w = 700;
    g.default_power_limit_w = 700;
    g.clock_event_reasons = std::vector<std::string>{"gpu_idle"};
    g.clocks_held_down = false;
    g.temperature_c = 31;
    g.sm_clock_mhz = 345;
    g.max_sm_clock_mhz = 1980;
    g.ecc_enabled = true;
    g.ecc_uncorrected_volatile = 0;
    g.row_remap_pending = false;
    g.row_remap_failure = false;
    g.mig_enabled = false;
    g.compute_processes = 0;
    g.memory_used_bytes = 600ull << 20;
    g.pcie_max_generation = 5;
    g.pcie_max_width = 16;
    g.nvlinks_total = 18;
    g.nvlinks_active = 18;
    g.local_cpus = {0xFFFF};
    g.numa_node = 0;
    f.gpus.push_back(g);
  }
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) f.peers.push_back({a, b, true});
  }
  return f;
}

const Finding* find(const std::vector<Finding>& findings, const std::string& key) {
  for (const Finding& x : findings) {
    if (x.key == key) return &x;
  }
  return nullptr;
}

Status status_of(const Facts& facts, const std::string& key) {
  const auto findings = examine(facts);
  const Finding* x = find(findings, key);
  if (x == nullptr) ADD_FAILURE() << "no finding " << key;
  return x != nullptr ? x->status : Status::skip;
}

TEST(Doctor, AHealthyMachineHasNothingToWarnAbout) {
  ASSERT_NE(db().find("H200-SXM-141GB"), nullptr);
  const auto findings = examine(healthy(2));
  EXPECT_EQ(count(findings, Status::warn), 0u);
  EXPECT_EQ(count(findings, Status::fail), 0u);
  for (const char* key : {"build/cuda_backend", "data/specs", "driver/cuda", "gpu0/spec", "gpu0/code",
                          "gpu0/persistence_mode", "gpu0/power_limit", "gpu0/clocks", "gpu0/ecc", "gpu0/busy",
                          "gpu0/pcie", "gpu0/cpu_affinity", "gpu0/nvlink", "gpu1/nvlink", "gpus/peer_access"}) {
    const Finding* x = find(findings, key);
    ASSERT_NE(x, nullptr) << key;
    EXPECT_EQ(x->status, Status::ok) << key << ": " << x->observed;
  }
}

TEST(Doctor, CodeForACardFollowsCudaCompatibility) {
  const std::vector<std::string> built = {"80-real", "90-real", "90-virtual"};
  EXPECT_EQ(code_for(built, "9.0"), "sass");
  EXPECT_EQ(code_for(built, "8.6"), "sass");  // sm_80 machine code loads on 8.x
  EXPECT_EQ(code_for(built, "8.9"), "sass");
  EXPECT_EQ(code_for(built, "10.0"), "ptx");  // Blackwell: compute_90 PTX compiled at load
  EXPECT_EQ(code_for(built, "12.0"), "ptx");
  EXPECT_EQ(code_for(built, "7.0"), "none");
  EXPECT_EQ(code_for(built, "bad"), "none");
  EXPECT_EQ(code_for({"80-real"}, "9.0"), "none");
  EXPECT_EQ(code_for({"90"}, "9.0"), "sass");
  EXPECT_EQ(code_for({"90"}, "10.0"), "ptx");
}

TEST(Doctor, AGpuTheBuildCannotRunFailsAndSaysBf16IsMissing) {
  Facts f = healthy();
  f.gpus[0].compute_capability = "7.0";
  f.gpus[0].spec = db().find("V100-SXM2-32GB");
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "gpu0/code")->status, Status::fail);
  EXPECT_NE(find(findings, "gpu0/code")->observed.find("7.0"), std::string::npos);
  ASSERT_NE(find(findings, "gpu0/bf16"), nullptr);
  EXPECT_EQ(find(findings, "gpu0/bf16")->status, Status::warn);
  f.gpus[0].compute_capability = "10.0";
  EXPECT_EQ(status_of(f, "gpu0/code"), Status::info);
}

TEST(Doctor, ALoweredPowerLimitWarnsWithBothFigures) {
  Facts f = healthy();
  f.gpus[0].power_limit_w = 500;
  const auto findings = examine(f);
  const Finding* x = find(findings, "gpu0/power_limit");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->status, Status::warn);
  EXPECT_NE(x->observed.find("500 W"), std::string::npos);
  EXPECT_NE(x->observed.find("700 W"), std::string::npos);
  // A board whose default sits below the spec sheet's TDP is worth knowing, not a warning.
  f.gpus[0].default_power_limit_w = 500;
  EXPECT_EQ(status_of(f, "gpu0/power_limit"), Status::info);
}

TEST(Doctor, MemoryErrorsFailAndPendingRemapsWarn) {
  Facts f = healthy();
  f.gpus[0].ecc_uncorrected_volatile = 3;
  EXPECT_EQ(status_of(f, "gpu0/ecc"), Status::fail);
  f = healthy();
  f.gpus[0].row_remap_pending = true;
  EXPECT_EQ(status_of(f, "gpu0/row_remap"), Status::warn);
  f.gpus[0].row_remap_failure = true;
  EXPECT_EQ(status_of(f, "gpu0/row_remap"), Status::fail);
  f = healthy();
  f.gpus[0].ecc_enabled = false;
  EXPECT_EQ(status_of(f, "gpu0/ecc"), Status::info);
  EXPECT_EQ(find(examine(healthy()), "gpu0/row_remap"), nullptr);
}

TEST(Doctor, AnotherProcessOnTheGpuWarns) {
  Facts f = healthy();
  f.gpus[0].compute_processes = 2;
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "gpu0/busy")->status, Status::warn);
  EXPECT_NE(find(findings, "gpu0/busy")->observed.find("2 other"), std::string::npos);
  f = healthy();
  f.gpus[0].memory_used_bytes = 40ull << 30;  // no process listed (another container), memory taken
  EXPECT_EQ(status_of(f, "gpu0/busy"), Status::warn);
}

TEST(Doctor, GpuStateThatSkewsResultsWarns) {
  Facts f = healthy();
  f.gpus[0].persistence_mode = false;
  EXPECT_EQ(status_of(f, "gpu0/persistence_mode"), Status::warn);
  f = healthy();
  f.gpus[0].clocks_held_down = true;
  f.gpus[0].clock_event_reasons = std::vector<std::string>{"hw_thermal_slowdown"};
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "gpu0/clocks")->status, Status::warn);
  EXPECT_NE(find(findings, "gpu0/clocks")->observed.find("hw_thermal_slowdown"), std::string::npos);
  f = healthy();
  f.gpus[0].temperature_c = 86;
  EXPECT_EQ(status_of(f, "gpu0/temperature"), Status::warn);
  f = healthy();
  f.gpus[0].applications_sm_clock_mhz = 1500;
  f.gpus[0].default_applications_sm_clock_mhz = 1980;
  EXPECT_EQ(status_of(f, "gpu0/applications_clocks"), Status::warn);
  f = healthy();
  f.gpus[0].mig_enabled = true;
  EXPECT_EQ(status_of(f, "gpu0/mig"), Status::warn);
  f = healthy();
  f.gpus[0].pcie_max_width = 8;
  EXPECT_EQ(status_of(f, "gpu0/pcie"), Status::warn);
  f = healthy();
  f.gpus[0].pcie_max_generation = 4;  // an H200 is a gen5 card
  EXPECT_EQ(status_of(f, "gpu0/pcie"), Status::warn);
}

TEST(Doctor, NvlinkDownMattersOnlyWithPeers) {
  Facts f = healthy(2);
  f.gpus[1].nvlinks_active = 0;
  EXPECT_EQ(status_of(f, "gpu1/nvlink"), Status::warn);
  f.gpus[1].nvlinks_active = 12;
  EXPECT_EQ(status_of(f, "gpu1/nvlink"), Status::warn);
  f = healthy(1);
  f.gpus[0].nvlinks_active = 0;
  EXPECT_EQ(status_of(f, "gpu0/nvlink"), Status::info);
  f.gpus[0].nvlinks_total.reset();  // NVML cannot say: no finding
  f.gpus[0].nvlinks_active.reset();
  EXPECT_EQ(find(examine(f), "gpu0/nvlink"), nullptr);
}

TEST(Doctor, CpusFarFromTheGpu) {
  // Two sockets: GPU 0 near CPUs 0-15 (node 0), GPU 1 near 16-31 (node 1).
  Facts f = healthy(2);
  f.gpus[1].local_cpus = {0xFFFF0000};
  f.gpus[1].numa_node = 1;
  f.host.process_cpus = {0xFFFFFFFF};  // not bound: may run on either socket
  auto findings = examine(f);
  const Finding* gpu0 = find(findings, "gpu0/cpu_affinity");
  ASSERT_NE(gpu0, nullptr);
  EXPECT_EQ(gpu0->status, Status::info);
  EXPECT_NE(gpu0->observed.find("CPUs 0-31, including 16-31 far from it (near: 0-15, NUMA node 0)"), std::string::npos)
      << gpu0->observed;
  const Finding* gpu1 = find(findings, "gpu1/cpu_affinity");
  ASSERT_NE(gpu1, nullptr);
  EXPECT_EQ(gpu1->status, Status::info);
  EXPECT_NE(gpu1->advice.find("numactl --cpunodebind=1 --membind=1"), std::string::npos) << gpu1->advice;

  f.host.process_cpus = {0xFFFF};  // bound to socket 0
  findings = examine(f);
  EXPECT_EQ(find(findings, "gpu0/cpu_affinity")->status, Status::ok);
  gpu1 = find(findings, "gpu1/cpu_affinity");
  EXPECT_EQ(gpu1->status, Status::warn);
  EXPECT_NE(gpu1->observed.find("only on CPUs 0-15, none near it (near: 16-31, NUMA node 1)"), std::string::npos)
      << gpu1->observed;

  // Without a NUMA node the advice names the CPUs; words past the first count.
  f = healthy(1);
  f.gpus[0].numa_node.reset();
  f.gpus[0].local_cpus = {0, ~std::uint64_t{0}};  // CPUs 64-127
  f.host.process_cpus = {0, 0x1};                 // CPU 64 only
  EXPECT_EQ(status_of(f, "gpu0/cpu_affinity"), Status::ok);
  f.host.process_cpus = {0x1, 0x1};  // CPUs 0 and 64
  findings = examine(f);
  gpu0 = find(findings, "gpu0/cpu_affinity");
  EXPECT_EQ(gpu0->status, Status::info);
  EXPECT_NE(gpu0->observed.find("CPUs 0,64, including 0 far from it"), std::string::npos) << gpu0->observed;
  EXPECT_NE(gpu0->advice.find("taskset -c 64-127"), std::string::npos) << gpu0->advice;

  // Either side unknown: skipped, not guessed.
  f.gpus[0].local_cpus.clear();
  EXPECT_EQ(status_of(f, "gpu0/cpu_affinity"), Status::skip);
  f = healthy(1);
  f.host.process_cpus.clear();
  EXPECT_EQ(status_of(f, "gpu0/cpu_affinity"), Status::skip);
}

TEST(Doctor, MissingPeerAccessNamesThePair) {
  Facts f = healthy(3);
  f.peers[1].access = false;  // 0-2
  const auto findings = examine(f);
  const Finding* x = find(findings, "gpus/peer_access");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->status, Status::warn);
  EXPECT_NE(x->observed.find("0-2"), std::string::npos);
  EXPECT_EQ(find(examine(healthy(1)), "gpus/peer_access"), nullptr);
}

TEST(Doctor, AnUnmatchedGpuWarns) {
  Facts f = healthy();
  f.gpus[0].spec = nullptr;
  EXPECT_EQ(status_of(f, "gpu0/spec"), Status::warn);
}

TEST(Doctor, DriverOlderThanTheRuntime) {
  Facts f = healthy();
  f.driver.cuda_driver = 12040;
  EXPECT_EQ(status_of(f, "driver/cuda"), Status::fail);
  f.driver.cuda_driver = 13000;
  f.driver.cuda_runtime = 13010;  // minor-version compatibility
  EXPECT_EQ(status_of(f, "driver/cuda"), Status::warn);
  f = healthy();
  f.driver.cuda_driver.reset();
  f.driver.gpus_problem = "no NVIDIA driver found";
  f.gpus.clear();
  f.peers.clear();
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "driver/cuda")->status, Status::info);
  EXPECT_EQ(count(findings, Status::fail), 0u);
  f = healthy();
  f.driver.nvml_problem = "libnvidia-ml.so.1: cannot open shared object file";
  EXPECT_EQ(status_of(f, "driver/nvml"), Status::warn);
}

TEST(Doctor, ABuildWithoutCudaIsNoFailure) {
  Facts f;
  f.host.data_origin = "embedded data";
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "build/cuda_backend")->status, Status::info);
  EXPECT_EQ(find(findings, "driver/cuda"), nullptr);
  EXPECT_EQ(count(findings, Status::fail), 0u);
}

TEST(Doctor, BadDataFailsWithTheMessage) {
  Facts f = healthy();
  f.host.data_error = "gpus/x.toml: memory_gb: expected a number";
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "data/specs")->status, Status::fail);
  EXPECT_NE(find(findings, "data/specs")->observed.find("gpus/x.toml"), std::string::npos);
}

TEST(Doctor, EnvironmentThatChangesResults) {
  Facts f = healthy();
  f.host.environment = {
      {"CUDA_LAUNCH_BLOCKING", "1"}, {"GPUSCOUT_GEMM_SEARCH", "0"},    {"GPUSCOUT_DATA", "/data"},
      {"GPUSCOUT_GEM_SEARCH", "0"},  {"NCCL_P2P_DISABLE", "1"},        {"NCCL_ALGO", "Ring"},
      {"NCCL_NVLS_ENABLE", "0"},     {"CUDA_HOME", "/usr/local/cuda"}, {"CUDA_INJECTION64_PATH", "/x.so"},
      {"CUBLASLT_LOG_LEVEL", "5"},   {"NCCL_VERSION", "2.28.3-1"}};
  const auto findings = examine(f);
  EXPECT_EQ(find(findings, "env/CUDA_LAUNCH_BLOCKING")->status, Status::warn);
  EXPECT_EQ(find(findings, "env/GPUSCOUT_GEMM_SEARCH")->status, Status::warn);
  EXPECT_EQ(find(findings, "env/GPUSCOUT_DATA")->status, Status::info);
  EXPECT_NE(find(findings, "env/GPUSCOUT_GEM_SEARCH")->observed.find("no such variable"), std::string::npos);
  EXPECT_EQ(find(findings, "env/NCCL_P2P_DISABLE")->status, Status::warn);
  EXPECT_EQ(find(findings, "env/NCCL_ALGO")->status, Status::info);
  EXPECT_EQ(find(findings, "env/NCCL_NVLS_ENABLE")->status, Status::info);
  EXPECT_EQ(find(findings, "env/CUDA_HOME"), nullptr);     // a build-time path: runs do not read it
  EXPECT_EQ(find(findings, "env/NCCL_VERSION"), nullptr);  // what an image ships, not a setting
  EXPECT_EQ(find(findings, "env/CUDA_INJECTION64_PATH")->status, Status::warn);
  EXPECT_EQ(find(findings, "env/CUBLASLT_LOG_LEVEL")->status, Status::warn);
  f.host.environment = {{"CUDA_LAUNCH_BLOCKING", "0"}};
  EXPECT_EQ(find(examine(f), "env/CUDA_LAUNCH_BLOCKING"), nullptr);
  // An engine switch is a warning only at the value that turns it away from its default.
  f.host.environment = {{"GPUSCOUT_GEMM_SEARCH", "1"},
                        {"GPUSCOUT_SMALL_M_GEMM", "1"},
                        {"GPUSCOUT_SWIGLU_EPILOGUE", "deferred"},
                        {"GPUSCOUT_SMEM_OPTIN_LIMIT", "101376"}};
  const auto switches = examine(f);
  EXPECT_EQ(find(switches, "env/GPUSCOUT_GEMM_SEARCH")->status, Status::info);
  EXPECT_EQ(find(switches, "env/GPUSCOUT_SMALL_M_GEMM")->status, Status::warn);
  EXPECT_EQ(find(switches, "env/GPUSCOUT_SWIGLU_EPILOGUE")->status, Status::info);
  EXPECT_EQ(find(switches, "env/GPUSCOUT_SMEM_OPTIN_LIMIT")->status, Status::warn);
}

TEST(Doctor, HostFindings) {
  Facts f = healthy();
  f.host.cpu_governors = {{"powersave", 8}, {"performance", 8}};
  EXPECT_EQ(status_of(f, "host/cpu_governor"), Status::warn);
  f.host.cpu_governors.clear();
  EXPECT_EQ(status_of(f, "host/cpu_governor"), Status::skip);
  f.host.history_writable = false;
  f.host.history_problem = "/root is not writable";
  EXPECT_EQ(status_of(f, "host/history_db"), Status::warn);
  f.host.history_path.clear();  // --no-history
  EXPECT_EQ(status_of(f, "host/history_db"), Status::info);
}

TEST(Doctor, TheTableHasARowPerFindingAndCountsThem) {
  Facts f = healthy();
  f.gpus[0].ecc_uncorrected_volatile = 1;
  f.gpus[0].persistence_mode = false;
  const auto findings = examine(f);
  const report::Table t = findings_table(findings);
  EXPECT_EQ(t.rows.size(), findings.size());
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("1 fail, 1 warn"), std::string::npos) << t.notes[0];
}

// Every GPUSCOUT_* variable the sources read is one the doctor knows, and it knows no stale ones.
TEST(Doctor, KnownVariablesMatchTheSources) {
  const std::regex read(R"((getenv|env_switch_on)\("(GPUSCOUT_[A-Z0-9_]+)\")");
  std::set<std::string> in_sources;
  for (const char* dir : {"src", "apps", "backends"}) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(std::filesystem::path(GPUSCOUT_SOURCE_DIR) / dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".cu" && ext != ".hpp" && ext != ".cuh") continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (std::sregex_iterator it(text.begin(), text.end(), read), end; it != end; ++it) in_sources.insert((*it)[2]);
    }
  }
  std::set<std::string> known;
  for (const KnownVariable& v : known_gpuscout_variables()) known.insert(std::string(v.name));
  EXPECT_FALSE(in_sources.empty());
  for (const auto& name : in_sources) EXPECT_TRUE(known.count(name)) << name << " is read but unknown to doctor";
  for (const auto& name : known) EXPECT_TRUE(in_sources.count(name)) << name << " is known to doctor but read nowhere";
}

}  // namespace
}  // namespace gpuscout::doctor
