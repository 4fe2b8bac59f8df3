#pragma once
// NVML loaded at run time (nvtop style): dlopen("libnvidia-ml.so.1"), only the functions used are
// declared, the newest versioned symbol is tried first (_v3 -> _v2 -> plain), and every reading is
// optional: absent when the library, the symbol or the driver does not provide it.
// No CUDA headers here, so the CLI can include it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuscout::cuda::nvml {

// An NVML device handle (nvmlDevice_t), opaque here.
struct Device {
  void* handle = nullptr;
};

enum class Clock { graphics = 0, sm = 1, memory = 2 };

class Library {
 public:
  // The process-wide instance, loaded and initialised on first use; nullptr when NVML cannot be used.
  static const Library* get();
  // Why get() returned nullptr ("libnvidia-ml.so.1: cannot open shared object file ...").
  static std::string unavailable_reason();

  std::optional<Device> device_by_pci_bus_id(const std::string& bus_id) const;

  std::optional<std::string> driver_version() const;
  std::optional<int> cuda_driver_version() const;  // 13000 for 13.0

  std::optional<std::string> name(Device d) const;
  std::optional<std::string> uuid(Device d) const;
  std::optional<double> power_w(Device d) const;             // current draw (driver-averaged)
  std::optional<double> energy_j(Device d) const;            // total energy since driver load
  std::optional<double> clock_mhz(Device d, Clock c) const;  // current
  std::optional<double> max_clock_mhz(Device d, Clock c) const;
  std::optional<double> temperature_c(Device d) const;
  // Device memory in use by every process and the driver (nvmlDeviceGetMemoryInfo's `used`).
  std::optional<std::uint64_t> memory_used_bytes(Device d) const;
  std::optional<std::uint64_t> throttle_reasons(Device d) const;  // bit mask, names below
  std::optional<double> power_limit_w(Device d) const;            // enforced limit
  std::optional<double> default_power_limit_w(Device d) const;    // the board's default limit
  // Application clocks (what compute runs at unless the driver boosts), set and default.
  std::optional<double> applications_clock_mhz(Device d, Clock c) const;
  std::optional<double> default_applications_clock_mhz(Device d, Clock c) const;
  // Uncorrected ECC errors since the driver loaded (volatile counter).
  std::optional<std::uint64_t> ecc_uncorrected_volatile(Device d) const;
  struct RowRemap {
    bool pending = false;  // rows wait for the next reset
    bool failure = false;  // a remapping failed
  };
  std::optional<RowRemap> row_remap(Device d) const;  // Ampere and newer
  // Processes with a CUDA context on the GPU (counted, not listed: no struct layout to match).
  std::optional<int> compute_process_count(Device d) const;
  std::optional<bool> ecc_enabled(Device d) const;
  std::optional<bool> mig_enabled(Device d) const;
  std::optional<bool> persistence_mode(Device d) const;
  std::optional<int> numa_node(Device d) const;
  std::optional<int> pcie_link_generation(Device d, bool max) const;
  std::optional<int> pcie_link_width(Device d, bool max) const;

  // Topology (gpuscout topo). NVLink link ids run from 0 while NVML answers (at most kMaxNvLinks).
  static constexpr int kMaxNvLinks = 18;
  std::optional<int> topology_common_ancestor(Device a, Device b) const;  // nvmlGpuTopologyLevel_t
  std::optional<bool> nvlink_active(Device d, int link) const;            // nullopt: no such link
  std::optional<std::string> nvlink_remote_bus_id(Device d, int link) const;
  std::optional<unsigned> nvlink_version(Device d, int link) const;  // raw nvmlNvlinkVersion_t value
  // What the link's far end is (nvmlIntNvLinkDeviceType_t: 0 GPU, 1 IBM NPU, 2 NVSwitch, 0xFF unknown).
  std::optional<unsigned> nvlink_remote_device_type(Device d, int link) const;
  // nvmlDeviceGetFieldValues for one unsigned field (NVML_FI_*), e.g. 90 = NVLink speed in MB/s.
  std::optional<std::uint64_t> field_value(Device d, unsigned field_id, unsigned scope_id = 0) const;
  std::optional<std::vector<std::uint64_t>> cpu_affinity(Device d) const;  // bit i = CPU i

  struct Api;  // resolved function pointers (nvml.cpp)
  explicit Library(const Api* api) : api_(api) {}

 private:
  const Api* api_;
};

// Names of the reasons set in a throttle / clock-event mask ("sw_power_cap", "hw_thermal_slowdown"...).
std::vector<std::string> throttle_reason_names(std::uint64_t mask);
// True when the mask holds a reason that lowers clocks under load (power or thermal caps, slowdowns);
// idle, application-clock and sync-boost settings do not count.
bool is_performance_throttle(std::uint64_t mask);

}  // namespace gpuscout::cuda::nvml
