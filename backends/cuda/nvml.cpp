#include "gpuscout/cuda/nvml.hpp"

#include <dlfcn.h>

#include <initializer_list>
#include <mutex>

namespace gpuscout::cuda::nvml {
namespace {

// The subset of nvml.h used here (the toolkit on build machines may not ship nvml.h).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0;

}  // namespace

struct Library::Api {
  nvmlReturn_t (*init)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*by_pci_bus_id)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*cuda_driver_version)(int*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*max_clock_info)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*throttle_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*persistence_mode)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*numa_node)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*curr_link_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*max_link_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*curr_link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*max_link_width)(nvmlDevice_t, unsigned*) = nullptr;
};

namespace {

struct Loaded {
  Library::Api api;
  std::optional<Library> library;
  std::string reason;
};

// First symbol found among `names`, newest version first.
template <typename Fn>
void resolve(void* lib, Fn& fn, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* sym = ::dlsym(lib, n)) {
      fn = reinterpret_cast<Fn>(sym);
      return;
    }
  }
}

Loaded& loaded() {
  static Loaded state;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = ::dlerror();
      state.reason = err != nullptr ? err : "libnvidia-ml.so.1 not found";
      return;
    }
    Library::Api& a = state.api;
    resolve(lib, a.init, {"nvmlInit_v3", "nvmlInit_v2", "nvmlInit"});
    resolve(lib, a.error_string, {"nvmlErrorString"});
    resolve(lib, a.by_pci_bus_id,
            {"nvmlDeviceGetHandleByPciBusId_v3", "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"});
    resolve(lib, a.driver_version, {"nvmlSystemGetDriverVersion"});
    resolve(
        lib, a.cuda_driver_version,
        {"nvmlSystemGetCudaDriverVersion_v3", "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
    resolve(lib, a.name, {"nvmlDeviceGetName"});
    resolve(lib, a.uuid, {"nvmlDeviceGetUUID"});
    resolve(lib, a.power_usage, {"nvmlDeviceGetPowerUsage"});
    resolve(lib, a.energy, {"nvmlDeviceGetTotalEnergyConsumption"});
    resolve(lib, a.clock_info, {"nvmlDeviceGetClockInfo"});
    resolve(lib, a.max_clock_info, {"nvmlDeviceGetMaxClockInfo"});
    resolve(lib, a.temperature, {"nvmlDeviceGetTemperature"});
    // Renamed "clocks event reasons" in newer drivers; the old name stays as an alias.
    resolve(lib, a.throttle_reasons,
            {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
    resolve(lib, a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"});
    resolve(lib, a.ecc_mode, {"nvmlDeviceGetEccMode"});
    resolve(lib, a.mig_mode, {"nvmlDeviceGetMigMode"});
    resolve(lib, a.persistence_mode, {"nvmlDeviceGetPersistenceMode"});
    resolve(lib, a.numa_node, {"nvmlDeviceGetNumaNodeId"});
    resolve(lib, a.curr_link_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"});
    resolve(lib, a.max_link_gen, {"nvmlDeviceGetMaxPcieLinkGeneration"});
    resolve(lib, a.curr_link_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
    resolve(lib, a.max_link_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
    if (a.init == nullptr || a.by_pci_bus_id == nullptr) {
      state.reason = "libnvidia-ml.so.1 lacks nvmlInit or nvmlDeviceGetHandleByPciBusId";
      return;
    }
    const nvmlReturn_t rc = a.init();
    if (rc != kSuccess) {
      state.reason =
          std::string("nvmlInit failed: ") + (a.error_string != nullptr ? a.error_string(rc) : std::to_string(rc));
      return;
    }
    // The library stays loaded for the life of the process; nvmlShutdown at exit is not needed.
    state.library.emplace(&state.api);
  });
  return state;
}

template <typename T, typename Fn, typename... Args>
std::optional<T> read(Fn fn, Args... args) {
  if (fn == nullptr) return std::nullopt;
  T value{};
  if (fn(args..., &value) != kSuccess) return std::nullopt;
  return value;
}

}  // namespace

const Library* Library::get() {
  Loaded& l = loaded();
  return l.library ? &*l.library : nullptr;
}

std::string Library::unavailable_reason() {
  return loaded().reason;
}

std::optional<Device> Library::device_by_pci_bus_id(const std::string& bus_id) const {
  nvmlDevice_t d = nullptr;
  if (api_->by_pci_bus_id(bus_id.c_str(), &d) != kSuccess) return std::nullopt;
  return Device{d};
}

std::optional<std::string> Library::driver_version() const {
  if (api_->driver_version == nullptr) return std::nullopt;
  char buf[96] = {};
  if (api_->driver_version(buf, sizeof(buf)) != kSuccess) return std::nullopt;
  return std::string(buf);
}

std::optional<int> Library::cuda_driver_version() const {
  return read<int>(api_->cuda_driver_version);
}

std::optional<std::string> Library::name(Device d) const {
  if (api_->name == nullptr) return std::nullopt;
  char buf[128] = {};
  if (api_->name(d.handle, buf, sizeof(buf)) != kSuccess) return std::nullopt;
  return std::string(buf);
}

std::optional<std::string> Library::uuid(Device d) const {
  if (api_->uuid == nullptr) return std::nullopt;
  char buf[128] = {};
  if (api_->uuid(d.handle, buf, sizeof(buf)) != kSuccess) return std::nullopt;
  return std::string(buf);
}

std::optional<double> Library::power_w(Device d) const {
  auto mw = read<unsigned>(api_->power_usage, d.handle);
  if (!mw) return std::nullopt;
  return *mw / 1000.0;
}

std::optional<double> Library::energy_j(Device d) const {
  auto mj = read<unsigned long long>(api_->energy, d.handle);
  if (!mj) return std::nullopt;
  return static_cast<double>(*mj) / 1000.0;
}

std::optional<double> Library::clock_mhz(Device d, Clock c) const {
  auto v = read<unsigned>(api_->clock_info, d.handle, static_cast<int>(c));
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<double> Library::max_clock_mhz(Device d, Clock c) const {
  auto v = read<unsigned>(api_->max_clock_info, d.handle, static_cast<int>(c));
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<double> Library::temperature_c(Device d) const {
  auto v = read<unsigned>(api_->temperature, d.handle, 0 /* NVML_TEMPERATURE_GPU */);
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<std::uint64_t> Library::throttle_reasons(Device d) const {
  auto v = read<unsigned long long>(api_->throttle_reasons, d.handle);
  if (!v) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

std::optional<double> Library::power_limit_w(Device d) const {
  auto mw = read<unsigned>(api_->power_limit, d.handle);
  if (!mw) return std::nullopt;
  return *mw / 1000.0;
}

std::optional<bool> Library::ecc_enabled(Device d) const {
  if (api_->ecc_mode == nullptr) return std::nullopt;
  int current = 0, pending = 0;
  if (api_->ecc_mode(d.handle, &current, &pending) != kSuccess) return std::nullopt;
  return current != 0;
}

std::optional<bool> Library::mig_enabled(Device d) const {
  if (api_->mig_mode == nullptr) return std::nullopt;
  unsigned current = 0, pending = 0;
  if (api_->mig_mode(d.handle, &current, &pending) != kSuccess) return std::nullopt;
  return current != 0;
}

std::optional<bool> Library::persistence_mode(Device d) const {
  auto v = read<int>(api_->persistence_mode, d.handle);
  if (!v) return std::nullopt;
  return *v != 0;
}

std::optional<int> Library::numa_node(Device d) const {
  auto v = read<unsigned>(api_->numa_node, d.handle);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<int> Library::pcie_link_generation(Device d, bool max) const {
  auto v = read<unsigned>(max ? api_->max_link_gen : api_->curr_link_gen, d.handle);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<int> Library::pcie_link_width(Device d, bool max) const {
  auto v = read<unsigned>(max ? api_->max_link_width : api_->curr_link_width, d.handle);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

std::vector<std::string> throttle_reason_names(std::uint64_t mask) {
  // nvmlClocksEventReason* bits.
  static constexpr std::pair<std::uint64_t, const char*> kNames[] = {
      {0x1, "gpu_idle"},
      {0x2, "applications_clocks_setting"},
      {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},
      {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"},
      {0x80, "hw_power_brake_slowdown"},
      {0x100, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (const auto& [bit, text] : kNames) {
    if ((mask & bit) != 0) names.emplace_back(text);
  }
  return names;
}

bool is_performance_throttle(std::uint64_t mask) {
  return (mask & (0x4 | 0x8 | 0x20 | 0x40 | 0x80)) != 0;
}

}  // namespace gpuscout::cuda::nvml
