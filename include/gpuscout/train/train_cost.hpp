#pragma once
// What one training step of the train-step benchmark costs: FLOPs (the MFU numerator) and the GPU
// memory the CUDA implementation allocates (checked against free memory before it starts).
// C++17-clean: included by CUDA sources.
#include <cstdint>

#include "gpuscout/train/train_reference.hpp"

namespace gpuscout::train {

// How the CUDA train step computes attention. flash: fused kernels (backends/cuda/train/
// train_attention.hpp) that keep one FP32 log-sum-exp per (sequence, head, row) and recompute the
// probabilities in the backward; materialized: S x S scores through cuBLASLt with the BF16
// probabilities of every head and layer kept for the backward.
enum class TrainAttention { flash, materialized };
const char* to_string(TrainAttention attention);

// The flash kernels' tiles (train_attention.cu checks its constants against these): the executed
// FLOPs count the whole tiles they multiply, masked and zero-padded parts included.
inline constexpr int kFlashKeyTile = 64;            // keys per tile: forward, dK/dV and dQ
inline constexpr int kFlashBackwardQueryTile = 64;  // query rows per tile: dK/dV and dQ
constexpr int flash_forward_query_tile(int seq) {
  return seq <= 64 ? 64 : 128;
}

// FLOPs of one forward + backward of the decoder layers of `shape` (no embedding, no LM head, no
// optimizer update; elementwise work not counted), the convention of
// shared/reference/modeling.md 4.3: backward = 2 x forward, and MFU counts model FLOPs only.
struct TrainStepFlops {
  double linear_forward = 0;     // 2 x tokens x matrix params (QKV, O, gate/up, down) x layers
  double attention_forward = 0;  // causal QK^T and PV: 4 x heads x head_dim x S(S+1)/2 per sequence and layer
  // What the attention kernels multiply, forward and backward together. materialized: the full
  // S x S square in all six products (QK^T, PV; dV, dP, dQ, dK). flash: the forward's causal tiles
  // (QK^T, PV), then the dK/dV kernel's (S, dV, dP, dK) and the dQ kernel's (S again, dP again,
  // dQ): 7 products per backward tile, not 4, the recomputation that replaces the stored scores.
  double attention_executed = 0;
  double forward() const { return linear_forward + attention_forward; }
  double step() const { return 3 * forward(); }  // model FLOPs: the MFU numerator
  double step_executed() const { return 3 * linear_forward + attention_executed; }
};

// Matrix parameters of one decoder layer (the four projections; norms excluded).
std::int64_t layer_matrix_params(const infer::TransformerConfig& model);

TrainStepFlops train_step_flops(const TrainShape& shape, TrainAttention attention = TrainAttention::flash);

// Bytes the CUDA train step allocates (backends/cuda/train/train_step.cpp allocates exactly these).
struct TrainStepMemory {
  std::int64_t weights = 0;        // BF16 layer weights (norms included)
  std::int64_t gradients = 0;      // BF16 matrix gradients + FP32 norm-weight gradients
  std::int64_t activations = 0;    // kept for backward: residuals, norms, QKV, softmax probabilities or LSE, MLP
  std::int64_t probabilities = 0;  // of which the S x S softmax probabilities (materialized: BF16, every head, layer)
  std::int64_t softmax_lse = 0;    // of which the rows' log-sum-exp (flash: FP32, every head, row and layer)
  std::int64_t scratch = 0;        // shared by the layers: scores, input gradients, cuBLASLt workspace
  std::int64_t io = 0;             // the layer-0 input and the loss projection
  std::int64_t total() const { return weights + gradients + activations + scratch + io; }
};

inline constexpr std::int64_t kTrainGemmWorkspaceBytes = std::int64_t{32} << 20;

TrainStepMemory train_step_memory(const TrainShape& shape, TrainAttention attention = TrainAttention::flash);

}  // namespace gpuscout::train
