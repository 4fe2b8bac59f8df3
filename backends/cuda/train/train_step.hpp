#pragma once
// Forward and backward of N Llama-family decoder layers on one GPU, BF16 with FP32 accumulation:
// the GPU side of the train-step benchmark, checked against train::reference_gradients on the tiny
// configuration (tests/gpu/train_step_test.cpp).
//
// Matrix products go through cuBLASLt (train_gemm.hpp). Attention is the simple, memory-hungry
// formulation: per sequence and per query head of each KV group, the S x S scores of all KV heads
// are one strided-batched GEMM (FP32 out), a causal softmax kernel stores the BF16 probabilities of
// every head and layer for the backward pass, and PV, dP, dV, dQ, dK are strided-batched GEMMs too.
// The GEMMs compute the full S x S square (twice the causal FLOPs) and the probabilities cost
// 2 S^2 bytes per head and layer (train_step_memory): that cost is what the benchmark measures.
// No optimizer update, embedding or LM head: the loss is sum(y * P) (train_reference.hpp).
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpuscout/train/train_reference.hpp"

namespace gpuscout::cuda::train {

class TrainStep {
 public:
  // Allocates train::train_step_memory(shape) on the current device and generates the weights,
  // the input and the loss projection there. Throws CudaError (out of memory included).
  explicit TrainStep(const gpuscout::train::TrainShape& shape);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Enqueue the forward pass (loss included) and the backward pass (every gradient) on `stream`.
  void forward(cudaStream_t stream);
  void backward(cudaStream_t stream);

  // Host copies (they synchronize), for the correctness checks.
  float loss() const;
  std::vector<float> output() const;
  std::vector<float> input_gradient() const;
  std::vector<float> layer_gradient(int layer, gpuscout::train::LayerTensor tensor) const;

  std::int64_t allocated_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuscout::cuda::train
