#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gpuscout/cuda/timing.hpp"

namespace gpuscout::cuda {
namespace {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void latch_kernel(volatile int* flag, volatile int* timed_out, unsigned long long timeout_ns) {
  const unsigned long long start = global_timer_ns();
  while (*flag == 0) {
    if (global_timer_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

}  // namespace

double Event::seconds_since(const Event& start) const {
  float ms = 0;
  GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), e_));
  return ms * 1e-3;
}

StreamLatch::StreamLatch() {
  void* host = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  flag_ = static_cast<volatile int*>(host);
  timed_out_ = flag_ + 1;
  flag_[0] = 0;
  timed_out_[0] = 0;
  void* dev = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
  flag_dev_ = static_cast<int*>(dev);
  timed_out_dev_ = flag_dev_ + 1;
}

StreamLatch::~StreamLatch() {
  if (flag_ != nullptr) {
    flag_[0] = 1;
    GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFreeHost(const_cast<int*>(flag_)));
  }
}

void StreamLatch::block(cudaStream_t stream) {
  flag_[0] = 0;
  latch_kernel<<<1, 1, 0, stream>>>(flag_dev_, timed_out_dev_, 2'000'000'000ULL);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
}

void StreamLatch::release() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  flag_[0] = 1;
}

bool StreamLatch::timed_out() const {
  return timed_out_[0] != 0;
}

TimedRun time_launches(cudaStream_t stream, const std::function<void(cudaStream_t)>& launch, const TimingPlan& plan,
                       const bench::StoppingRule& rule, const std::atomic<bool>* interrupted) {
  TimedRun run;
  Event start, stop;
  // First launch: loads the module, faults in page tables. Then one timed launch sizes the samples.
  launch(stream);
  GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream));
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  launch(stream);
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  const double one = std::max(stop.seconds_since(start), 1e-7);
  int reps = plan.reps_per_sample;
  if (reps <= 0) reps = static_cast<int>(std::ceil(plan.min_sample_s / one));
  reps = std::clamp(reps, 1, std::max(1, plan.max_reps));
  run.reps_per_sample = reps;
  for (int i = 0; i < plan.warmup; ++i) launch(stream);
  GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::optional<StreamLatch> latch;
  if (plan.hide_enqueue) latch.emplace();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (true) {
    if (interrupted != nullptr && interrupted->load()) {
      run.interrupted = true;
      break;
    }
    if (latch) latch->block(stream);
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    for (int r = 0; r < reps; ++r) launch(stream);
    GPUSCOUT_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    if (latch) latch->release();
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    run.seconds.push_back(stop.seconds_since(start) / reps);
    if (bench::should_stop(rule, run.seconds, elapsed())) break;
  }
  if (latch) run.latch_timed_out = latch->timed_out();
  run.wall_s = elapsed();
  return run;
}

std::optional<std::string> memory_shortfall(std::size_t bytes, std::size_t reserve) {
  std::size_t free_bytes = 0, total = 0;
  GPUSCOUT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  if (bytes + reserve <= free_bytes) return std::nullopt;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return fmt::format("needs {:.1f} GiB, {:.1f} GiB free", static_cast<double>(bytes) / gib,
                     static_cast<double>(free_bytes) / gib);
}

results::Record unrun_record(std::string key, std::string benchmark, int gpu, nlohmann::ordered_json params,
                             results::Outcome outcome, std::string reason) {
  results::Record r;
  r.key = std::move(key);
  r.benchmark = std::move(benchmark);
  r.gpus = {gpu};
  r.params = std::move(params);
  r.outcome = outcome;
  r.reason = std::move(reason);
  return r;
}

}  // namespace gpuscout::cuda
