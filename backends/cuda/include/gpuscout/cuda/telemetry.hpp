#pragma once
// NVML sampling on a background thread between start() and stop() around one benchmark case:
// power, SM and memory clocks, temperature, throttle reasons. No CUDA headers.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpuscout/cuda/nvml.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

class TelemetrySampler {
 public:
  // Sampler for CUDA device `index`; nullptr when NVML is unavailable or does not know the device.
  static std::unique_ptr<TelemetrySampler> create(int cuda_device_index,
                                                  std::chrono::milliseconds period = std::chrono::milliseconds(25));
  TelemetrySampler(const nvml::Library* nvml, nvml::Device device, std::chrono::milliseconds period);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  void start();
  // Stops sampling and summarises the readings taken since start(). Mean power comes from the
  // energy counter when it advanced (exact average over the interval), else from the samples.
  results::Telemetry stop();
  bool running() const { return running_; }

 private:
  struct Sample {
    std::optional<double> power_w, sm_mhz, mem_mhz, temp_c, mem_used_gib;
    std::optional<std::uint64_t> reasons;
  };
  Sample read_once() const;
  void loop();

  const nvml::Library* nvml_;
  nvml::Device device_;
  std::chrono::milliseconds period_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_flag_ = false;
  bool running_ = false;
  std::vector<Sample> samples_;
  std::optional<double> energy_start_j_;
  std::chrono::steady_clock::time_point start_time_;
};

// RAII helper for a case: starts the sampler (if any) and hands back its summary.
class TelemetryScope {
 public:
  explicit TelemetryScope(TelemetrySampler* sampler) : sampler_(sampler) {
    if (sampler_ != nullptr) sampler_->start();
  }
  ~TelemetryScope() {
    if (sampler_ != nullptr && sampler_->running()) (void)sampler_->stop();
  }
  std::optional<results::Telemetry> finish() {
    if (sampler_ == nullptr || !sampler_->running()) return std::nullopt;
    return sampler_->stop();
  }

 private:
  TelemetrySampler* sampler_;
};

}  // namespace gpuscout::cuda
