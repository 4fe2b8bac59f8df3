#pragma once
// gpuscout doctor: is this machine fit to measure, and will its results be comparable? The CLI
// gathers plain facts (the build, the environment, the driver, each GPU's NVML readings); the rules
// here turn them into findings, each with what was seen and what to do about it. No CUDA, no NVML:
// every rule is tested with hand-made facts.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/report/table.hpp"

namespace gpuscout::specs {
struct GpuSpec;
}

namespace gpuscout::doctor {

// ok: as it should be; info: worth knowing, changes nothing by itself; warn: results will differ
// from what the hardware gives (or a feature is missing); fail: a measurement cannot be trusted or
// cannot run; skip: the check could not be made (no reading), with the reason.
enum class Status { ok, info, warn, fail, skip };
std::string_view to_string(Status status);

struct Finding {
  std::string key;      // stable: "env/CUDA_LAUNCH_BLOCKING", "gpu0/persistence_mode"
  std::string subject;  // "build", "environment", "host", "driver", "GPU 0 (NVIDIA H200)", "GPUs"
  std::string check;    // what was looked at: "persistence mode"
  Status status = Status::ok;
  std::string observed;  // what was found, with figures
  std::string advice;    // what to do; empty when nothing
};

// An environment variable gpuscout itself reads, and what setting it changes.
struct KnownVariable {
  std::string_view name;
  std::string_view effect;
  // For a kernel or algorithm choice, the value that turns it away from the default ("0" for the
  // switches that are on unless "0", "*" for any value but "0"); empty for a setting that changes no
  // measurement (a data or history path).
  std::string_view non_default;
  bool changes_results(std::string_view value) const {
    if (non_default.empty()) return false;
    if (non_default == "*") return !value.empty() && value != "0";
    return value == non_default;
  }
};
// Every GPUSCOUT_* variable the tool reads (a test checks the sources against this list).
const std::vector<KnownVariable>& known_gpuscout_variables();

struct BuildFacts {
  bool cuda_backend = false;
  std::vector<std::string> cuda_architectures;  // CMake's form: "80-real", "90-real", "90-virtual"
  bool nccl = false;
  bool mpi = false;
};

struct HostFacts {
  BuildFacts build;
  // The data the spec DB and model catalog came from ("embedded", or the --specs directory) and
  // what they hold; data_error non-empty when they failed to load.
  std::string data_origin;
  std::size_t gpu_specs = 0;
  std::size_t models = 0;
  std::string data_error;
  // The run history database and whether a run could be written to it (its folder exists or can be
  // made, and is writable); history_disabled with --no-history.
  std::string history_path;
  bool history_writable = false;
  std::string history_problem;
  // Variables that change what a run measures: CUDA_*, NCCL_*, GPUSCOUT_*, CUBLAS*/CUBLASLT_*,
  // LD_PRELOAD (the CLI passes them all; the rules pick).
  std::map<std::string, std::string> environment;
  // CPU frequency governors from sysfs, CPU count per governor ("performance" -> 64); empty where
  // the kernel exposes none (most VMs and containers).
  std::map<std::string, int> cpu_governors;
  // The CPUs this process may run on (sched_getaffinity; bit i = CPU i, in 64-bit words); empty
  // when unknown.
  std::vector<std::uint64_t> process_cpus;
};

struct DriverFacts {
  bool cuda_backend = false;        // false: nothing below was read
  std::optional<int> cuda_runtime;  // 13000 for 13.0
  std::optional<int> cuda_driver;   // the newest CUDA the driver supports; nullopt without a driver
  std::string driver_version;       // "580.95.05" (NVML)
  std::string nvml_problem;         // non-empty when NVML could not be used
  std::string gpus_problem;         // non-empty when no GPU could be listed, and why
};

struct GpuFacts {
  int index = 0;
  std::string name;
  std::string compute_capability;        // "9.0"
  const specs::GpuSpec* spec = nullptr;  // matched spec entry, nullptr when none
  bool nvml = false;                     // false: the optionals below stay empty
  std::optional<bool> persistence_mode;
  std::optional<double> power_limit_w;          // enforced
  std::optional<double> default_power_limit_w;  // the board's default
  // What holds the clocks down right now (NVML's clock event reasons by name, "sw_power_cap"...),
  // and whether any of them lowers clocks under load (power or thermal caps, slowdowns).
  std::optional<std::vector<std::string>> clock_event_reasons;
  std::optional<bool> clocks_held_down;
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_mhz;
  std::optional<double> max_sm_clock_mhz;
  std::optional<double> applications_sm_clock_mhz;
  std::optional<double> default_applications_sm_clock_mhz;
  std::optional<bool> ecc_enabled;
  std::optional<std::uint64_t> ecc_uncorrected_volatile;  // since the driver loaded
  std::optional<bool> row_remap_pending;
  std::optional<bool> row_remap_failure;
  std::optional<bool> mig_enabled;
  std::optional<int> compute_processes;  // other processes with a CUDA context on it
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<int> pcie_max_generation;  // of the GPU and its slot together (NVML)
  std::optional<int> pcie_max_width;
  std::optional<int> nvlinks_active;  // with nvlinks_total: links NVML reports, active ones
  std::optional<int> nvlinks_total;
  // The CPUs near the GPU (NVML's CPU affinity, same bit layout as HostFacts::process_cpus; empty
  // when unknown) and its NUMA node.
  std::vector<std::uint64_t> local_cpus;
  std::optional<int> numa_node;
};

// Peer access between two GPUs (cudaDeviceCanAccessPeer both ways).
struct PeerFacts {
  int a = 0;
  int b = 0;
  bool access = false;
};

struct Facts {
  HostFacts host;
  DriverFacts driver;
  std::vector<GpuFacts> gpus;
  std::vector<PeerFacts> peers;
};

// The findings, in a fixed order: build, data, environment, host, driver, then each GPU, then pairs.
std::vector<Finding> examine(const Facts& facts);

// One table of the findings (status, subject, check, observed, advice) with a summary note.
report::Table findings_table(const std::vector<Finding>& findings);

// How many findings have `status`.
std::size_t count(const std::vector<Finding>& findings, Status status);

// Compute capability against the build's CUDA architectures: "sass" (machine code for it), "ptx"
// (compiled at load time from the newest PTX not above it), or "none".
std::string code_for(const std::vector<std::string>& cuda_architectures, const std::string& compute_capability);

}  // namespace gpuscout::doctor
