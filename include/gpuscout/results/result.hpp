#pragma once
// The versioned result format (docs/results-format.md). Benchmarks and models produce Records;
// a ResultSet adds the provenance that makes a number reproducible. Plain data, no behaviour.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpuscout::results {

// Major.minor. A reader accepts any minor of its major (minors only add optional fields) and
// rejects other majors.
inline constexpr int kSchemaMajor = 1;
inline constexpr int kSchemaMinor = 3;
std::string schema_version_string();

enum class Outcome { passed, failed, incorrect, not_supported, skipped, timeout };
std::string to_string(Outcome outcome);
Outcome outcome_from_string(const std::string& text);  // throws std::invalid_argument
// True for outcomes that make the run's exit code non-zero.
bool is_failure(Outcome outcome);

// Spread of the samples behind a metric, in the metric's unit.
struct Spread {
  double min = 0, max = 0, p10 = 0, p90 = 0, mean = 0, stddev = 0;
};

struct Metric {
  std::string name;              // "throughput", "bandwidth", "time", "busbw", "ttft" ...
  double value = 0;              // the headline number, in `unit`, as `statistic` says
  std::string unit;              // "TFLOP/s", "GB/s", "ms", "us", "W", "%"...
  std::string statistic;         // "median", "mean", "best", "p99", "max", "value" (a single reading)
  std::int64_t samples = 0;      // how many timed samples stand behind the value (0: not a sample statistic)
  std::optional<Spread> spread;  // when samples > 1
  std::string note;              // e.g. "read + written bytes" (which convention a bandwidth uses)
};

// Telemetry sampled while a record was measured (NVML); each field absent when not readable.
struct Telemetry {
  std::optional<double> power_mean_w, power_max_w;
  std::optional<double> sm_clock_mean_mhz, sm_clock_min_mhz, mem_clock_mean_mhz;
  std::optional<double> temperature_max_c;
  std::optional<double> memory_used_max_gib;  // device memory in use (all processes), highest sample; since 1.1
  std::int64_t samples = 0;
  std::vector<std::string> throttle_reasons;  // any non-idle reason seen while measuring
};

struct Record {
  std::string key;        // stable identifier: "gemm/bf16/m8192_n8192_k8192"
  std::string benchmark;  // registry key of what produced it: "gemm", "memory", "predict-infer"...
  std::vector<int> gpus;  // local GPU indices involved
  nlohmann::ordered_json params = nlohmann::ordered_json::object();  // inputs: sizes, precision, ...
  std::vector<Metric> metrics;
  Outcome outcome = Outcome::passed;
  std::string reason;  // why it failed / was skipped / is not supported; empty when passed
  std::optional<Telemetry> telemetry;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // benchmark-specific details

  const Metric* find_metric(const std::string& name) const;
};

struct GpuInfo {
  int index = 0;
  std::string name;       // as the driver reports it
  std::string spec_name;  // matched spec database entry, empty if none
  std::string uuid;
  std::string pci_bus_id;
  std::optional<int> sm_count;
  std::optional<std::int64_t> memory_bytes;
  std::optional<std::string> compute_capability;
  std::optional<double> max_sm_clock_mhz, max_mem_clock_mhz;
  std::optional<double> power_limit_w;
  std::optional<bool> ecc_enabled;
  std::optional<bool> mig_enabled;
  std::optional<int> numa_node;
};

// A warning or failure `gpuscout doctor`'s checks found when the run started (docs/doctor.md).
struct RunCheck {
  std::string key;     // "gpu0/power_limit"
  std::string status;  // "warn" or "fail"
  std::string message;
};

struct Provenance {
  std::string tool_version;
  std::string git_commit;
  std::string created_utc;  // ISO 8601
  std::vector<std::string> command_line;
  std::string hostname;
  std::string os;
  std::string cpu;
  std::string cpus;  // since 1.3: the CPUs the process was allowed to run on, "0-15,32-47"; empty: unknown
  std::map<std::string, std::string> software;     // driver, cuda_runtime, cuda_driver, cublas, nccl ...
  std::map<std::string, std::string> environment;  // relevant variables (NCCL_*, GPUSCOUT_*, CUDA_VISIBLE_DEVICES)
  std::map<std::string, std::string> tags;         // --tags key:value, so runs from many machines concatenate
  std::string data_source;                         // which spec database was used
  std::vector<RunCheck> checks;                    // since 1.2; empty: nothing was wrong (or not checked)
};

struct ResultSet {
  std::string schema_version = schema_version_string();
  std::string kind;      // "bench", "predict", "advise", ...
  bool complete = true;  // false when interrupted (Ctrl-C) or cut short
  Provenance provenance;
  std::vector<GpuInfo> gpus;
  nlohmann::ordered_json topology = nlohmann::ordered_json::object();
  std::vector<Record> records;

  // True when any record's outcome is a failure or the run is incomplete.
  bool any_failure() const;
};

}  // namespace gpuscout::results
