#pragma once
// Factories of every benchmark, one per file under backends/cuda/benchmarks/. registry.cpp lists
// them explicitly, in the order `gpuscout bench` runs them.
#include <memory>

#include "gpuscout/cuda/benchmark.hpp"

namespace gpuscout::cuda {

std::unique_ptr<Benchmark> make_memory_benchmark();  // benchmarks/memory.cu: HBM / L2 read, write, copy, triad, CE copy
std::unique_ptr<Benchmark> make_transfer_benchmark();  // benchmarks/transfer.cu: host <-> device bandwidth and latency
std::unique_ptr<Benchmark> make_gemm_benchmark();      // benchmarks/gemm.cu: cuBLASLt matrix products
std::unique_ptr<Benchmark> make_p2p_benchmark();       // benchmarks/p2p.cu: GPU <-> GPU bandwidth and latency
std::unique_ptr<Benchmark> make_collectives_benchmark();  // benchmarks/collectives.cu: NCCL (when NCCL is found)
std::unique_ptr<Benchmark> make_serve_benchmark();  // benchmarks/serve.cpp: LLM serving on the CUDA engine (opt-in)
// benchmarks/train_step.cpp: forward + backward of decoder layers (opt-in)
std::unique_ptr<Benchmark> make_train_step_benchmark();

}  // namespace gpuscout::cuda
