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
  nvmlReturn_t (*memory_info)(nvmlDevice_t, void*) = nullptr;  // nvmlMemory_t (v1 layout)
  nvmlReturn_t (*throttle_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*default_power_limit)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*applications_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*default_applications_clock)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*total_ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*compute_processes)(nvmlDevice_t, unsigned*, void*) = nullptr;  // nvmlProcessInfo_t[]
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*persistence_mode)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*numa_node)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*curr_link_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*max_link_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*curr_link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*max_link_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, void*) = nullptr;  // nvmlPciInfo_t (v2 layout)
  nvmlReturn_t (*nvlink_version)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, unsigned*) = nullptr;  // nvmlIntNvLinkDeviceType_t
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, void*) = nullptr;                 // nvmlFieldValue_t[]
  nvmlReturn_t (*cpu_affinity)(nvmlDevice_t, unsigned, unsigned long*) = nullptr;
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
    // Only the unversioned symbol takes nvmlMemory_t (total, free, used); _v2 takes another layout.
    resolve(lib, a.memory_info, {"nvmlDeviceGetMemoryInfo"});
    // Renamed "clocks event reasons" in newer drivers; the old name stays as an alias.
    resolve(lib, a.throttle_reasons,
            {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
    resolve(lib, a.power_limit, {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"});
    resolve(lib, a.default_power_limit, {"nvmlDeviceGetPowerManagementDefaultLimit"});
    resolve(lib, a.applications_clock, {"nvmlDeviceGetApplicationsClock"});
    resolve(lib, a.default_applications_clock, {"nvmlDeviceGetDefaultApplicationsClock"});
    resolve(lib, a.total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
    resolve(lib, a.remapped_rows, {"nvmlDeviceGetRemappedRows"});
    // Only counted (infos stays null), so any version's process layout will do.
    resolve(lib, a.compute_processes,
            {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
             "nvmlDeviceGetComputeRunningProcesses"});
    resolve(lib, a.ecc_mode, {"nvmlDeviceGetEccMode"});
    resolve(lib, a.mig_mode, {"nvmlDeviceGetMigMode"});
    resolve(lib, a.persistence_mode, {"nvmlDeviceGetPersistenceMode"});
    resolve(lib, a.numa_node, {"nvmlDeviceGetNumaNodeId"});
    resolve(lib, a.curr_link_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"});
    resolve(lib, a.max_link_gen, {"nvmlDeviceGetMaxPcieLinkGeneration"});
    resolve(lib, a.curr_link_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
    resolve(lib, a.max_link_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
    resolve(lib, a.common_ancestor, {"nvmlDeviceGetTopologyCommonAncestor"});
    resolve(lib, a.nvlink_state, {"nvmlDeviceGetNvLinkState"});
    // Only the _v2 symbol takes the nvmlPciInfo_t layout declared below (busId of 32 bytes).
    resolve(lib, a.nvlink_remote_pci, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"});
    resolve(lib, a.nvlink_version, {"nvmlDeviceGetNvLinkVersion"});
    resolve(lib, a.nvlink_remote_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});  // NVML 11+, no versions yet
    resolve(lib, a.field_values, {"nvmlDeviceGetFieldValues"});
    resolve(lib, a.cpu_affinity, {"nvmlDeviceGetCpuAffinity"});
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

std::optional<std::uint64_t> Library::memory_used_bytes(Device d) const {
  struct Memory {  // nvmlMemory_t
    unsigned long long total, free, used;
  };
  auto m = read<Memory>(api_->memory_info, d.handle);
  if (!m) return std::nullopt;
  return m->used;
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

std::optional<double> Library::default_power_limit_w(Device d) const {
  auto mw = read<unsigned>(api_->default_power_limit, d.handle);
  if (!mw) return std::nullopt;
  return *mw / 1000.0;
}

std::optional<double> Library::applications_clock_mhz(Device d, Clock c) const {
  auto v = read<unsigned>(api_->applications_clock, d.handle, static_cast<int>(c));
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<double> Library::default_applications_clock_mhz(Device d, Clock c) const {
  auto v = read<unsigned>(api_->default_applications_clock, d.handle, static_cast<int>(c));
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<std::uint64_t> Library::ecc_uncorrected_volatile(Device d) const {
  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0.
  auto v = read<unsigned long long>(api_->total_ecc_errors, d.handle, 1, 0);
  if (!v) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

std::optional<Library::RowRemap> Library::row_remap(Device d) const {
  if (api_->remapped_rows == nullptr) return std::nullopt;
  unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
  if (api_->remapped_rows(d.handle, &corrected, &uncorrected, &pending, &failure) != kSuccess) return std::nullopt;
  return RowRemap{pending != 0, failure != 0};
}

std::optional<int> Library::compute_process_count(Device d) const {
  if (api_->compute_processes == nullptr) return std::nullopt;
  // With a count of 0 NVML answers NVML_SUCCESS when none runs, NVML_ERROR_INSUFFICIENT_SIZE (7) with
  // the count otherwise.
  constexpr nvmlReturn_t kInsufficientSize = 7;
  unsigned n = 0;
  const nvmlReturn_t rc = api_->compute_processes(d.handle, &n, nullptr);
  if (rc == kSuccess) return 0;
  if (rc == kInsufficientSize) return static_cast<int>(n);
  return std::nullopt;
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

namespace {

// nvml.h's nvmlPciInfo_t (NVML 9+ layout, used by the _v2/_v3 functions).
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

// nvml.h's nvmlFieldValue_t.
struct FieldValue {
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;  // 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 sint, 6 ushort
  nvmlReturn_t nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
    unsigned short us;
  } value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t layout");

}  // namespace

std::optional<int> Library::topology_common_ancestor(Device a, Device b) const {
  if (api_->common_ancestor == nullptr) return std::nullopt;
  int level = 0;
  if (api_->common_ancestor(a.handle, b.handle, &level) != kSuccess) return std::nullopt;
  return level;
}

std::optional<bool> Library::nvlink_active(Device d, int link) const {
  if (api_->nvlink_state == nullptr || link < 0 || link >= kMaxNvLinks) return std::nullopt;
  int state = 0;
  if (api_->nvlink_state(d.handle, static_cast<unsigned>(link), &state) != kSuccess) return std::nullopt;
  return state != 0;
}

std::optional<std::string> Library::nvlink_remote_bus_id(Device d, int link) const {
  if (api_->nvlink_remote_pci == nullptr || link < 0 || link >= kMaxNvLinks) return std::nullopt;
  PciInfo info{};
  if (api_->nvlink_remote_pci(d.handle, static_cast<unsigned>(link), &info) != kSuccess) return std::nullopt;
  info.bus_id[sizeof(info.bus_id) - 1] = '\0';
  return std::string(info.bus_id);
}

std::optional<unsigned> Library::nvlink_version(Device d, int link) const {
  if (link < 0 || link >= kMaxNvLinks) return std::nullopt;
  return read<unsigned>(api_->nvlink_version, d.handle, static_cast<unsigned>(link));
}

std::optional<unsigned> Library::nvlink_remote_device_type(Device d, int link) const {
  if (link < 0 || link >= kMaxNvLinks) return std::nullopt;
  return read<unsigned>(api_->nvlink_remote_type, d.handle, static_cast<unsigned>(link));
}

std::optional<std::uint64_t> Library::field_value(Device d, unsigned field_id, unsigned scope_id) const {
  if (api_->field_values == nullptr) return std::nullopt;
  FieldValue v{};
  v.field_id = field_id;
  v.scope_id = scope_id;
  if (api_->field_values(d.handle, 1, &v) != kSuccess || v.nvml_return != kSuccess) return std::nullopt;
  switch (v.value_type) {
    case 0:
      return static_cast<std::uint64_t>(v.value.d);
    case 1:
      return v.value.ui;
    case 2:
      return v.value.ul;
    case 3:
      return v.value.ull;
    case 4:
      return v.value.sll < 0 ? std::nullopt : std::optional<std::uint64_t>(v.value.sll);
    case 5:
      return v.value.si < 0 ? std::nullopt : std::optional<std::uint64_t>(v.value.si);
    case 6:
      return v.value.us;
    default:
      return std::nullopt;
  }
}

std::optional<std::vector<std::uint64_t>> Library::cpu_affinity(Device d) const {
  if (api_->cpu_affinity == nullptr) return std::nullopt;
  std::vector<unsigned long> words(16);  // 1024 CPUs
  if (api_->cpu_affinity(d.handle, static_cast<unsigned>(words.size()), words.data()) != kSuccess) {
    return std::nullopt;
  }
  return std::vector<std::uint64_t>(words.begin(), words.end());
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
