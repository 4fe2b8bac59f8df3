#include <functional>
#include <stdexcept>
#include <vector>

#include "gpuscout/cuda/bench_util.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/pointer_chase.hpp"
#include "gpuscout/cuda/telemetry.hpp"
#include "gpuscout/cuda/timing.hpp"

namespace gpuscout::cuda {
namespace {

constexpr std::size_t kChaseStride = 4099;  // a prime: one cycle through every node

__global__ void pointer_chase_kernel(ChaseNode* start, int accesses, ChaseNode** sink) {
  ChaseNode* p = start;
  for (int i = 0; i < accesses; ++i) p = *reinterpret_cast<ChaseNode* volatile*>(&p->next);
  if (p == nullptr) *sink = p;  // never true; keeps the chain live
}

}  // namespace

void link_chase_chain(ChaseNode* host_view, ChaseNode* device_view, std::size_t nodes) {
  for (std::size_t i = 0; i < nodes; ++i) host_view[i].next = device_view + (i + kChaseStride) % nodes;
}

std::size_t broken_chase_links(const ChaseNode* host_view, const ChaseNode* device_view, std::size_t nodes) {
  std::size_t broken = 0;
  for (std::size_t i = 0; i < nodes; ++i) broken += host_view[i].next != device_view + (i + kChaseStride) % nodes;
  return broken;
}

bench::SampleSummary time_pointer_chase(const BenchEnv& env, ChaseNode* start, int accesses, results::Record& rec) {
  DeviceBuffer<ChaseNode*> sink(1);
  Stream s;
  std::function<void(cudaStream_t)> launch = [&](cudaStream_t st) {
    pointer_chase_kernel<<<1, 1, 0, st>>>(start, accesses, sink.get());
  };
  TelemetryScope telemetry(env.telemetry);
  TimingPlan plan;
  plan.reps_per_sample = 1;
  plan.warmup = 1;
  const TimedRun run = time_launches(s.get(), launch, plan, env.options.timing, env.interrupted);
  rec.telemetry = telemetry.finish();
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  if (run.seconds.empty()) throw std::runtime_error("interrupted");
  std::vector<double> per_access;
  for (double t : run.seconds) per_access.push_back(t / accesses);
  return bench::summarize(per_access);
}

}  // namespace gpuscout::cuda
