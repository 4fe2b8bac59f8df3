#include "gpuscout/cuda/nccl_profiler_control.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace gpuscout::cuda {

ProfilerPluginPlan plan_profiler_plugin(bool enabled, const char* user_setting, const std::string& plugin_path,
                                        bool plugin_exists) {
  ProfilerPluginPlan plan;
  if (!enabled) {
    plan.reason = "gpuscout's NCCL profiler plugin turned off (--coll-nccl-profiler off)";
    return plan;
  }
  if (user_setting != nullptr && plugin_path != user_setting) {
    plan.reason = fmt::format(
        "NCCL_PROFILER_PLUGIN is set to '{}': gpuscout leaves the user's profiler in place, so it cannot read "
        "what NCCL chose",
        user_setting);
    return plan;
  }
  if (!plugin_exists) {
    plan.reason = fmt::format("gpuscout's NCCL profiler plugin {} is missing (it is built beside the gpuscout binary)",
                              plugin_path);
    return plan;
  }
  plan.use = true;
  plan.set_env = user_setting == nullptr;
  return plan;
}

std::string default_profiler_plugin_path() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libgpuscout_nccl_profiler.so";
  return (exe.parent_path() / "libgpuscout_nccl_profiler.so").string();
}

NcclProfilerControl::~NcclProfilerControl() {
  // NCCL holds its own reference to the library; this one only drops gpuscout's.
  if (handle_ != nullptr) dlclose(handle_);
}

void NcclProfilerControl::prepare(bool enabled, const std::string& plugin_path) {
  if (!path_.empty()) return;  // NCCL reads NCCL_PROFILER_PLUGIN once per process: the first decision stands
  path_ = plugin_path;
  const ProfilerPluginPlan plan = plan_profiler_plugin(enabled, std::getenv("NCCL_PROFILER_PLUGIN"), plugin_path,
                                                       std::filesystem::exists(plugin_path));
  if (!plan.use) {
    reason_ = plan.reason;
    return;
  }
  // The same path NCCL will open: dlopen returns the one instance, whose state NCCL's calls fill.
  handle_ = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* err = dlerror();
    reason_ = fmt::format("gpuscout's NCCL profiler plugin did not load: {}", err != nullptr ? err : "dlopen failed");
    return;
  }
  set_recording_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "gpuscout_nccl_profiler_set_recording"));
  clear_ = reinterpret_cast<void (*)()>(dlsym(handle_, "gpuscout_nccl_profiler_clear"));
  communicators_ = reinterpret_cast<int (*)()>(dlsym(handle_, "gpuscout_nccl_profiler_communicators"));
  interface_ = reinterpret_cast<int (*)()>(dlsym(handle_, "gpuscout_nccl_profiler_interface"));
  lookup_ = reinterpret_cast<decltype(lookup_)>(dlsym(handle_, "gpuscout_nccl_profiler_lookup"));
  if (!set_recording_ || !clear_ || !communicators_ || !interface_ || !lookup_) {
    reason_ = fmt::format("{} lacks gpuscout's query functions (a library of another version?)", plugin_path);
    dlclose(handle_);
    handle_ = nullptr;
    return;
  }
  set_recording_(0);
  if (plan.set_env) {
    setenv("NCCL_PROFILER_PLUGIN", plugin_path.c_str(), 1);
    env_set_ = true;
  }
}

std::string NcclProfilerControl::unavailable_reason(const std::string& nccl_version) const {
  if (handle_ == nullptr) return reason_;
  if (communicators() == 0) {
    return fmt::format(
        "NCCL {} never initialised gpuscout's profiler plugin: NCCL before 2.23 has no profiler plugin interface; "
        "a newer one may have refused the library or created a communicator in this process before "
        "NCCL_PROFILER_PLUGIN was set (NCCL_DEBUG=INFO says which)",
        nccl_version);
  }
  return "";
}

std::string NcclProfilerControl::source() const {
  return fmt::format(
      "NCCL profiler plugin {} (interface v{}; NCCL_PROFILER_PLUGIN {}), events of the untimed verification call",
      path_, nccl_interface(), env_set_ ? "set by gpuscout" : "set by the user");
}

void NcclProfilerControl::set_recording(bool on) const {
  if (set_recording_) set_recording_(on ? 1 : 0);
}

void NcclProfilerControl::clear() const {
  if (clear_) clear_();
}

int NcclProfilerControl::communicators() const {
  return communicators_ ? communicators_() : 0;
}

int NcclProfilerControl::nccl_interface() const {
  return interface_ ? interface_() : 0;
}

std::optional<bench::NcclChoice> NcclProfilerControl::find(const bench::NcclCallKey& key) const {
  if (!lookup_) return std::nullopt;
  char algorithm[64] = {}, protocol[64] = {};
  int channels = 0;
  if (lookup_(key.rank, key.func.c_str(), key.count, key.datatype.c_str(), algorithm, sizeof(algorithm), protocol,
              sizeof(protocol), &channels) == 0) {
    return std::nullopt;
  }
  bench::NcclChoice c;
  c.algorithm = algorithm;
  c.protocol = protocol;
  c.channels = channels;
  c.calls = 1;
  return c;
}

std::optional<bench::NcclChoice> NcclProfilerControl::find_any_count(int rank, const std::string& func,
                                                                     const std::string& datatype) const {
  return find({rank, func, ~0ull, datatype});
}

}  // namespace gpuscout::cuda
