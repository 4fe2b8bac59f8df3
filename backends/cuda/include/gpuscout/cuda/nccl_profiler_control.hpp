#pragma once
// gpuscout's side of its NCCL profiler plugin (backends/cuda/nccl_profiler): before the first
// communicator it points NCCL at the plugin (NCCL_PROFILER_PLUGIN) unless the user chose another or
// turned it off; then it switches recording on and off and reads what NCCL chose for each call.
// Plain C++ and dlopen, no NCCL or CUDA: CI tests it against the real plugin library.
#include <optional>
#include <string>

#include "gpuscout/bench/nccl_choice_table.hpp"

namespace gpuscout::cuda {

// What to do about NCCL_PROFILER_PLUGIN (pure, tested).
struct ProfilerPluginPlan {
  bool use = false;      // open the plugin and query it
  bool set_env = false;  // set NCCL_PROFILER_PLUGIN to it
  std::string reason;    // why nothing will be recorded, when !use
};
// `user_setting`: NCCL_PROFILER_PLUGIN as found (null when unset).
ProfilerPluginPlan plan_profiler_plugin(bool enabled, const char* user_setting, const std::string& plugin_path,
                                        bool plugin_exists);

// libgpuscout_nccl_profiler.so beside the running binary.
std::string default_profiler_plugin_path();

class NcclProfilerControl {
 public:
  NcclProfilerControl() = default;
  NcclProfilerControl(const NcclProfilerControl&) = delete;
  NcclProfilerControl& operator=(const NcclProfilerControl&) = delete;
  ~NcclProfilerControl();

  // Before the process's first NCCL communicator (NCCL reads the variable once).
  void prepare(bool enabled, const std::string& plugin_path = default_profiler_plugin_path());
  // After the communicators exist: "" when NCCL runs the plugin, else why no choice can be known.
  std::string unavailable_reason(const std::string& nccl_version) const;
  // How the choices were obtained, for the records: plugin path and NCCL's interface version.
  std::string source() const;
  const std::string& plugin_path() const { return path_; }
  bool env_set_by_gpuscout() const { return env_set_; }

  void set_recording(bool on) const;
  void clear() const;
  std::optional<bench::NcclChoice> find(const bench::NcclCallKey& key) const;
  // The only recorded call of that rank, function and datatype, whatever NCCL counted.
  std::optional<bench::NcclChoice> find_any_count(int rank, const std::string& func, const std::string& datatype) const;
  int communicators() const;
  int nccl_interface() const;

 private:
  void* handle_ = nullptr;
  void (*set_recording_)(int) = nullptr;
  void (*clear_)() = nullptr;
  int (*communicators_)() = nullptr;
  int (*interface_)() = nullptr;
  int (*lookup_)(int, const char*, unsigned long long, const char*, char*, int, char*, int, int*) = nullptr;
  std::string path_, reason_;
  bool env_set_ = false;
};

}  // namespace gpuscout::cuda
