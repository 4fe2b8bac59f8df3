#pragma once
// The training step that `gpuscout bench --only train-step` runs on the GPU, in plain C++: forward
// and backward of N Llama-family decoder layers (RMSNorm, RoPE, causal grouped-query attention,
// SwiGLU MLP, residuals) over a micro-batch of sequences, with a scalar loss that needs no LM head:
// loss = sum over every output element of y * P, P a fixed deterministic projection (so dL/dy = P).
// Everything here is FP64 on BF16-rounded inputs and weights: it is the exact gradient the GPU's
// BF16 step approximates, and it is itself checked against central finite differences.
//
// Inputs are deterministic (weights.hpp): layer l's weights are the serving engine's layer-l
// tensors; the layer-0 input and P come from their own streams, so the GPU generates identical
// values in place. C++17-clean: included by CUDA sources.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuscout/infer/transformer_config.hpp"

namespace gpuscout::train {

// Streams of the two non-weight tensors (WeightKind::embedding values, uniform in [-1, 1)), at
// "layer" numbers no model reaches.
inline constexpr std::uint32_t kInputStreamLayer = 0x10000;
inline constexpr std::uint32_t kProjectionStreamLayer = 0x10001;

struct TrainShape {
  infer::TransformerConfig model;
  int layers = 0;       // decoder layers run (at most model.layers for a catalog model)
  int micro_batch = 1;  // sequences per step
  int seq = 0;          // tokens per sequence (all of them trained: causal attention within each)
  std::uint64_t seed = 1;
  std::int64_t tokens() const { return static_cast<std::int64_t>(micro_batch) * seq; }
};

// One decoder layer's parameters, or their gradients. Matrices are [out, in] row-major (weights.hpp).
struct LayerTensors {
  std::vector<double> attn_norm;  // [hidden]
  std::vector<double> wqkv;       // [q_dim + 2 kv_dim, hidden]: the rows of wq, then wk, then wv
  std::vector<double> wo;         // [hidden, q_dim]
  std::vector<double> mlp_norm;   // [hidden]
  std::vector<double> w_gate_up;  // [2 ffn, hidden]: gate rows, then up rows
  std::vector<double> w_down;     // [hidden, ffn]
};

enum class LayerTensor { attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down };
inline constexpr LayerTensor kAllLayerTensors[] = {LayerTensor::attn_norm, LayerTensor::wqkv,      LayerTensor::wo,
                                                   LayerTensor::mlp_norm,  LayerTensor::w_gate_up, LayerTensor::w_down};
const char* to_string(LayerTensor tensor);
std::vector<double>& tensor_of(LayerTensors& layer, LayerTensor tensor);
const std::vector<double>& tensor_of(const LayerTensors& layer, LayerTensor tensor);

struct TrainInputs {
  std::vector<LayerTensors> layers;
  std::vector<double> input;            // [tokens, hidden]: the hidden states entering layer 0
  std::vector<double> loss_projection;  // [tokens, hidden]: P
};

struct TrainGradients {
  double loss = 0;
  std::vector<double> output;  // [tokens, hidden]: y, the last layer's output
  std::vector<LayerTensors> layers;
  std::vector<double> input;  // dL/d(input)
};

// Throws std::invalid_argument for a shape that cannot run (non-positive sizes, odd head_dim,
// heads not a multiple of kv_heads).
void check_train_shape(const TrainShape& shape);

// The deterministic inputs of `shape`, BF16-rounded as the GPU stores them. Throws
// std::invalid_argument for a shape that cannot run (non-positive sizes, odd head_dim, heads not a
// multiple of kv_heads).
TrainInputs make_train_inputs(const TrainShape& shape);

// Forward only: the loss (finite differences call this).
double reference_loss(const TrainShape& shape, const TrainInputs& inputs);

// Forward and backward: the loss, the output and the gradient of every weight and of the input.
TrainGradients reference_gradients(const TrainShape& shape, const TrainInputs& inputs);

}  // namespace gpuscout::train
