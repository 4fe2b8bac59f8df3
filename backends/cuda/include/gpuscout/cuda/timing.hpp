#pragma once
// CUDA-event timing (nvbench / nvbandwidth style) and device/host buffers that free themselves.
// Timing: an untimed first launch (module load), warm-up launches, then samples of `reps` back-to-back
// launches between two events until bench::should_stop says the samples are enough. Optionally the
// stream is first blocked behind a latch kernel spinning on a host flag, so the CPU's enqueue cost
// stays out of the events (what nvbandwidth does for copies).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/bench/stats.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/results/result.hpp"

namespace gpuscout::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    void* p = nullptr;
    GPUSCOUT_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    ptr_ = static_cast<T*>(p);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFree(ptr_));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// An event pair and a stream owned together.
class Stream {
 public:
  Stream() { GPUSCOUT_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { GPUSCOUT_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { GPUSCOUT_CUDA_CHECK_NOTHROW(cudaEventDestroy(e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  // Seconds from `start` to this event (both completed).
  double seconds_since(const Event& start) const;

 private:
  cudaEvent_t e_ = nullptr;
};

// Holds streams back until release(): a one-thread kernel spinning on a mapped host flag, with a
// time-out (2 s) so a forgotten release or a blocking enqueue cannot hang the GPU.
class StreamLatch {
 public:
  StreamLatch();
  ~StreamLatch();
  StreamLatch(const StreamLatch&) = delete;
  StreamLatch& operator=(const StreamLatch&) = delete;
  void block(cudaStream_t stream);
  void release();
  // True when a latch kernel gave up waiting (the enqueue took longer than the time-out): the
  // sample it guarded is not trustworthy.
  bool timed_out() const;

 private:
  volatile int* flag_ = nullptr;       // host view
  volatile int* timed_out_ = nullptr;  // host view
  int* flag_dev_ = nullptr;
  int* timed_out_dev_ = nullptr;
};

struct TimingPlan {
  int warmup = 4;           // untimed launches before the samples (after one launch that loads the module)
  int reps_per_sample = 0;  // launches per sample; 0 = chosen so that a sample lasts >= min_sample_s
  double min_sample_s = 1e-3;
  int max_reps = 200;        // a latch must not hold more launches than the GPU's queue takes
  bool hide_enqueue = true;  // block the stream behind a StreamLatch while enqueueing a sample
};

struct TimedRun {
  std::vector<double> seconds;  // per launch, one entry per sample (sample time / reps)
  int reps_per_sample = 1;
  double wall_s = 0;
  bool interrupted = false;
  bool latch_timed_out = false;
};

// Times `launch` (which enqueues one operation on the stream it is given).
TimedRun time_launches(cudaStream_t stream, const std::function<void(cudaStream_t)>& launch, const TimingPlan& plan,
                       const bench::StoppingRule& rule, const std::atomic<bool>* interrupted);

// Free device memory, and a reason to skip when `bytes` (plus a reserve) does not fit:
// "needs 12.0 GiB, 3.2 GiB free".
std::optional<std::string> memory_shortfall(std::size_t bytes, std::size_t reserve = std::size_t{256} << 20);

// A record for a case that did not run: outcome skipped (or failed) with the reason.
results::Record unrun_record(std::string key, std::string benchmark, int gpu, nlohmann::ordered_json params,
                             results::Outcome outcome, std::string reason);

}  // namespace gpuscout::cuda
