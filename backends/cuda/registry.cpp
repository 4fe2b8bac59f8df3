// Every benchmark, listed explicitly in the order `gpuscout bench` runs them (no static
// self-registration: a static library drops objects nothing references).
#include "gpuscout/cuda/benchmark.hpp"
#include "gpuscout/cuda/benchmarks.hpp"

namespace gpuscout::cuda {

std::vector<std::unique_ptr<Benchmark>> make_benchmarks() {
  std::vector<std::unique_ptr<Benchmark>> all;
  all.push_back(make_memory_benchmark());
  all.push_back(make_transfer_benchmark());
#if defined(GPUSCOUT_HAVE_GEMM)
  all.push_back(make_gemm_benchmark());
#endif
  all.push_back(make_p2p_benchmark());
#if defined(GPUSCOUT_HAVE_NCCL)
  all.push_back(make_collectives_benchmark());
#endif
  all.push_back(make_serve_benchmark());       // opt-in: runs only when --only names it
  all.push_back(make_train_step_benchmark());  // opt-in: runs only when --only names it
  std::erase(all, nullptr);
  return all;
}

}  // namespace gpuscout::cuda
