#pragma once
// The train step's correctness check: a small shape run on the GPU (two steps) and through the
// FP64 CPU reference (train_reference.hpp), compared tensor by tensor. Used by the GPU test
// (tests/gpu/train_step_test.cpp) and by the train-step benchmark's verify case.
//
// Tolerances: the GPU stores every activation, probability and gradient in BF16 (relative rounding
// 2^-9 = 0.2%) with FP32 accumulation, so each tensor is compared as a whole by its relative L2
// error ||gpu - cpu|| / ||cpu||: gradients <= 3% (a dozen BF16 roundings lie between the loss and
// layer 0), the output <= 1%, the loss within 1% of sum |y * P| (the scale of its rounding errors;
// the loss itself sums terms of both signs). A wrong formula or index is off by O(100%). The second
// step must repeat the first (accumulators zeroed): <= 1e-5 (norm-weight gradients sum with atomics).
//
// FP8 mode (TrainPrecision::fp8): round to nearest with p mantissa bits has relative error up to
// 2^-(p+1), RMS about 2^-(p+1) / sqrt(3) for errors spread evenly: E4M3 (p = 3) 3.6%, E5M2 (p = 2)
// 7.2%. A forward GEMM rounds both operands (E4M3 x E4M3): sqrt(2) x 3.6% = 5.1% relative error in
// its output; a backward GEMM E5M2 x E4M3: sqrt(3.6^2 + 7.2^2) = 8.1%. Tolerances: 3 times those
// (several such GEMMs lie between the loss and a gradient, their errors add in quadrature):
// gradients 24%, output 15%, loss 15% of sum |y * P|. A wrong scale, transpose or operand is off by
// O(100%). The repeat check stays 1e-5 (current scaling is deterministic).
#include <string>
#include <vector>

#include "gpuscout/train/train_reference.hpp"
#include "train_step.hpp"

namespace gpuscout::cuda::train {

struct TensorCheck {
  std::string what;  // "loss", "output", "layer 0 dwqkv", "input", "repeat" ...
  double error = 0;  // relative, as above (NaN or infinity when the GPU gave non-finite values)
  double tolerance = 0;
  bool passed() const { return error <= tolerance; }  // NaN fails
};

struct TrainCheck {
  double gpu_loss = 0, cpu_loss = 0;
  bool allocation_matches = false;  // allocated bytes == train_step_memory(shape, attention).total() (+ fp8)
  std::vector<TensorCheck> checks;
  bool passed() const;
  // The largest error / tolerance over the checks and which check it is.
  const TensorCheck& worst() const;
};

// The tiny configuration's check (2 layers of TransformerConfig::tiny(), 2 sequences of 64).
gpuscout::train::TrainShape tiny_check_shape();

// Runs `shape` on the current GPU and the CPU. Throws CudaError on a CUDA failure.
TrainCheck check_train_step(const gpuscout::train::TrainShape& shape, TrainPrecision precision = TrainPrecision::bf16,
                            TrainAttention attention = default_train_attention());

// The expected RMS relative error of one round-to-nearest with `mantissa_bits` (above), and the
// tolerances the FP8 check derives from it.
double fp8_rounding_rms(int mantissa_bits);

}  // namespace gpuscout::cuda::train
