#include "gpuscout/cuda/telemetry.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>

namespace gpuscout::cuda {

std::unique_ptr<TelemetrySampler> TelemetrySampler::create(int cuda_device_index, std::chrono::milliseconds period) {
  const nvml::Library* nvml = nvml::Library::get();
  if (nvml == nullptr) return nullptr;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device_index) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  auto device = nvml->device_by_pci_bus_id(bus);
  if (!device) return nullptr;
  return std::make_unique<TelemetrySampler>(nvml, *device, period);
}

TelemetrySampler::TelemetrySampler(const nvml::Library* nvml, nvml::Device device, std::chrono::milliseconds period)
    : nvml_(nvml), device_(device), period_(period) {}

TelemetrySampler::~TelemetrySampler() {
  if (running_) (void)stop();
}

TelemetrySampler::Sample TelemetrySampler::read_once() const {
  Sample s;
  s.power_w = nvml_->power_w(device_);
  s.sm_mhz = nvml_->clock_mhz(device_, nvml::Clock::sm);
  s.mem_mhz = nvml_->clock_mhz(device_, nvml::Clock::memory);
  s.temp_c = nvml_->temperature_c(device_);
  if (const auto used = nvml_->memory_used_bytes(device_)) s.mem_used_gib = static_cast<double>(*used) / (1ull << 30);
  s.reasons = nvml_->throttle_reasons(device_);
  return s;
}

void TelemetrySampler::start() {
  if (running_) (void)stop();
  samples_.clear();
  stop_flag_ = false;
  energy_start_j_ = nvml_->energy_j(device_);
  start_time_ = std::chrono::steady_clock::now();
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void TelemetrySampler::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    lock.unlock();
    Sample s = read_once();
    lock.lock();
    samples_.push_back(s);
    if (wake_.wait_for(lock, period_, [this] { return stop_flag_; })) break;
  }
}

results::Telemetry TelemetrySampler::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_flag_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  running_ = false;
  // One closing reading, so even a case shorter than the period has two.
  samples_.push_back(read_once());
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  const auto energy_end = nvml_->energy_j(device_);

  results::Telemetry t;
  t.samples = static_cast<std::int64_t>(samples_.size());
  auto mean_of = [&](auto field) -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const Sample& s : samples_) {
      if (auto v = s.*field) {
        sum += *v;
        ++n;
      }
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  auto extreme_of = [&](auto field, bool want_max) -> std::optional<double> {
    std::optional<double> best;
    for (const Sample& s : samples_) {
      if (auto v = s.*field) best = !best ? *v : (want_max ? std::max(*best, *v) : std::min(*best, *v));
    }
    return best;
  };
  t.power_mean_w = mean_of(&Sample::power_w);
  // The energy counter is exact over long cases, but it is updated in coarse steps: over a case of a
  // few hundred ms one late step inflates the mean far past the power limit (1100-1200 W seen on a
  // 700 W H200). Below a second the sampled power readings are the better estimate.
  constexpr double kMinEnergyWindowS = 1.0;
  if (energy_start_j_ && energy_end && *energy_end > *energy_start_j_ && elapsed_s >= kMinEnergyWindowS) {
    t.power_mean_w = (*energy_end - *energy_start_j_) / elapsed_s;
  }
  t.power_max_w = extreme_of(&Sample::power_w, true);
  t.sm_clock_mean_mhz = mean_of(&Sample::sm_mhz);
  t.sm_clock_min_mhz = extreme_of(&Sample::sm_mhz, false);
  t.mem_clock_mean_mhz = mean_of(&Sample::mem_mhz);
  t.temperature_max_c = extreme_of(&Sample::temp_c, true);
  t.memory_used_max_gib = extreme_of(&Sample::mem_used_gib, true);
  std::uint64_t seen = 0;
  for (const Sample& s : samples_) seen |= s.reasons.value_or(0);
  seen &= ~std::uint64_t{0x1};  // gpu_idle is no throttle
  t.throttle_reasons = nvml::throttle_reason_names(seen);
  return t;
}

}  // namespace gpuscout::cuda
