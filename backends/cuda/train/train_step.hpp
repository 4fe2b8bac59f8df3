#pragma once
// Forward and backward of N Llama-family decoder layers on one GPU, BF16 with FP32 accumulation:
// the GPU side of the train-step benchmark, checked against train::reference_gradients on the tiny
// configuration (tests/gpu/train_step_test.cpp).
//
// Matrix products go through cuBLASLt (train_gemm.hpp). Attention (TrainAttention) is by default
// fused flash attention (train_attention.hpp): the forward keeps one FP32 log-sum-exp per head and
// row, the backward recomputes the probabilities tile by tile, no S x S tensor exists. The
// materialized formulation stays for A/B runs and as a second GPU reference
// (GPUSCOUT_TRAIN_ATTENTION=materialized): per sequence and per query head of each KV group, the
// S x S scores of all KV heads are one strided-batched GEMM (FP32 out), a causal softmax kernel
// stores the BF16 probabilities of every head and layer for the backward pass, and PV, dP, dV, dQ,
// dK are strided-batched GEMMs too: the full S x S square (twice the causal FLOPs), and the
// probabilities cost 2 S^2 bytes per head and layer (train_step_memory).
// No optimizer update, embedding or LM head: the loss is sum(y * P) (train_reference.hpp).
//
// TrainPrecision::fp8 runs the linear layers' GEMMs (QKV, O, gate/up, down; forward, input and
// weight gradient) in FP8 as Transformer Engine does on Hopper: inputs and weights as E4M3, output
// gradients as E5M2, each tensor with its own scale = amax / format max from the current values
// ("current scaling"), FP32 accumulation, BF16 results. The FP8 GEMM takes only C = A B^T with A and
// B K-contiguous, so one fused quantize+transpose kernel writes each tensor's codes and/or their
// transpose: the forward keeps the transposed codes of W and x for dgrad (dX = dY W) and wgrad
// (dW = dY^T X). Attention, norms, softmax and the rest stay BF16.
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpuscout/train/train_cost.hpp"
#include "gpuscout/train/train_reference.hpp"

namespace gpuscout::cuda::train {

enum class TrainPrecision { bf16, fp8 };
using gpuscout::train::TrainAttention;

// The attention of a TrainStep built without naming one: GPUSCOUT_TRAIN_ATTENTION = "flash"
// (also when unset or empty) or "materialized"; anything else throws std::invalid_argument.
TrainAttention default_train_attention();

// Device bytes the FP8 mode allocates besides train::train_step_memory(shape): per layer the
// transposed E4M3 codes of the four weight matrices and of their inputs (kept for backward), shared
// scratch for the forward codes and the output gradient's codes and transpose, one 256-byte scale
// slot per quantized tensor.
std::int64_t fp8_buffer_bytes(const gpuscout::train::TrainShape& shape);

class TrainStep {
 public:
  // Allocates train::train_step_memory(shape, attention) on the current device and generates the
  // weights, the input and the loss projection there. Throws CudaError (out of memory included).
  // TrainPrecision::fp8 also allocates fp8_buffer_bytes(shape).
  explicit TrainStep(const gpuscout::train::TrainShape& shape, TrainPrecision precision = TrainPrecision::bf16,
                     TrainAttention attention = default_train_attention());
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
  TrainAttention attention() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuscout::cuda::train
