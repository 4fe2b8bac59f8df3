// The CPU training step against central finite differences, and its FLOP and memory counts
// against hand counts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpuscout/infer/weights.hpp"
#include "gpuscout/train/train_cost.hpp"
#include "gpuscout/train/train_reference.hpp"

namespace gpuscout::train {
namespace {

TrainShape tiny_shape(int layers = 2, int batch = 2, int seq = 5) {
  TrainShape s;
  s.model = infer::TransformerConfig::tiny();  // hidden 128, 4 query / 2 KV heads of 32, FFN 256
  s.layers = layers;
  s.micro_batch = batch;
  s.seq = seq;
  return s;
}

// Elements worth probing in a tensor: both ends, two inside, and the one with the largest gradient.
std::vector<std::size_t> probe_indices(const std::vector<double>& gradient) {
  const std::size_t n = gradient.size();
  std::vector<std::size_t> at{0, n / 3, 2 * n / 3 + 1, n - 1};
  at.push_back(static_cast<std::size_t>(
      std::max_element(gradient.begin(), gradient.end(), [](double a, double b) { return std::abs(a) < std::abs(b); }) -
      gradient.begin()));
  return at;
}

// Central difference of the loss in one element of `value` (a tensor inside `inputs`).
double central_difference(const TrainShape& s, TrainInputs& inputs, double& value) {
  constexpr double kStep = 1e-4;
  const double saved = value;
  value = saved + kStep;
  const double up = reference_loss(s, inputs);
  value = saved - kStep;
  const double down = reference_loss(s, inputs);
  value = saved;
  return (up - down) / (2 * kStep);
}

// The loss is smooth and FP64: the central difference's error (step^2 terms and rounding) stays far
// below 1e-6 of the gradient's scale, while a wrong term in a backward formula is off by O(1).
void expect_matches(double analytic, double numeric, const std::string& what) {
  EXPECT_NEAR(analytic, numeric, 1e-6 * (1.0 + std::abs(numeric))) << what;
}

TEST(TrainReference, GradientsMatchFiniteDifferences) {
  const TrainShape s = tiny_shape();
  TrainInputs inputs = make_train_inputs(s);
  const TrainGradients g = reference_gradients(s, inputs);
  EXPECT_NEAR(g.loss, reference_loss(s, inputs), 1e-12 * std::abs(g.loss));
  int probed = 0;
  for (int l = 0; l < s.layers; ++l) {
    for (LayerTensor t : kAllLayerTensors) {
      const auto& grad = tensor_of(g.layers[l], t);
      auto& weights = tensor_of(inputs.layers[l], t);
      ASSERT_EQ(grad.size(), weights.size()) << to_string(t);
      for (std::size_t i : probe_indices(grad)) {
        const double numeric = central_difference(s, inputs, weights[i]);
        expect_matches(grad[i], numeric, fmt::format("layer {} {}[{}]", l, to_string(t), i));
        ++probed;
      }
    }
  }
  for (std::size_t i : probe_indices(g.input)) {
    expect_matches(g.input[i], central_difference(s, inputs, inputs.input[i]), fmt::format("input[{}]", i));
    ++probed;
  }
  EXPECT_EQ(probed, 2 * 6 * 5 + 5);
}

// Causality: the loss of the first sequence's first token cannot depend on later tokens, so with a
// projection that is zero everywhere else, later positions' inputs get exactly zero gradient.
TEST(TrainReference, CausalMaskAndSequencesAreIndependent) {
  const TrainShape s = tiny_shape(1, 2, 4);
  TrainInputs inputs = make_train_inputs(s);
  const int h = s.model.hidden;
  std::fill(inputs.loss_projection.begin() + h, inputs.loss_projection.end(), 0.0);
  const TrainGradients g = reference_gradients(s, inputs);
  double first_row = 0;
  for (int i = 0; i < h; ++i) first_row += std::abs(g.input[static_cast<std::size_t>(i)]);
  EXPECT_GT(first_row, 0.0);
  for (std::size_t i = static_cast<std::size_t>(h); i < g.input.size(); ++i) ASSERT_EQ(g.input[i], 0.0) << i;
}

TEST(TrainReference, InputsAreDeterministicAndBf16) {
  const TrainShape s = tiny_shape();
  const TrainInputs a = make_train_inputs(s), b = make_train_inputs(s);
  EXPECT_EQ(a.layers[1].w_down, b.layers[1].w_down);
  EXPECT_EQ(a.input, b.input);
  EXPECT_NE(a.input, a.loss_projection);
  EXPECT_NE(a.layers[0].wqkv, a.layers[1].wqkv);
  for (double v : a.layers[0].wo) ASSERT_EQ(v, static_cast<double>(infer::round_to_bf16(static_cast<float>(v))));
}

TEST(TrainReference, RejectsImpossibleShapes) {
  TrainShape s = tiny_shape();
  s.seq = 0;
  EXPECT_THROW(make_train_inputs(s), std::invalid_argument);
  s = tiny_shape();
  s.model.kv_heads = 3;
  EXPECT_THROW(make_train_inputs(s), std::invalid_argument);
  s = tiny_shape();
  TrainInputs inputs = make_train_inputs(s);
  inputs.layers.pop_back();
  EXPECT_THROW(reference_loss(s, inputs), std::invalid_argument);
}

// tiny, 2 layers, 2 sequences of 8: matrix params per layer = QKV 128 x (128 + 2 x 64) = 32768
// + O 128 x 128 = 16384 + MLP 3 x 128 x 256 = 98304 -> 147456; linear forward = 2 x 16 tokens x
// 147456 x 2 layers = 9437184; causal attention = 4 x 4 heads x 32 x (8 x 9 / 2 = 36) x 2 sequences
// x 2 layers = 73728. Executed, materialized: the full square, 8 x 8 = 64 pairs instead of 36, in
// forward and backward: 3 x 131072. Flash: one 64 x 64 tile (zero-padded) per (sequence, head):
// 2 forward + 7 backward products x 4096 pairs x 2 x 32 FLOPs x 4 heads x 2 sequences x 2 layers.
TEST(TrainCost, FlopsMatchHandCount) {
  const TrainStepFlops f = train_step_flops(tiny_shape(2, 2, 8), TrainAttention::materialized);
  EXPECT_EQ(layer_matrix_params(infer::TransformerConfig::tiny()), 147456);
  EXPECT_DOUBLE_EQ(f.linear_forward, 9437184.0);
  EXPECT_DOUBLE_EQ(f.attention_forward, 73728.0);
  EXPECT_DOUBLE_EQ(f.attention_executed, 3.0 * 131072.0);
  EXPECT_DOUBLE_EQ(f.step(), 3.0 * (9437184.0 + 73728.0));
  EXPECT_DOUBLE_EQ(f.step_executed(), 3.0 * (9437184.0 + 131072.0));
  const TrainStepFlops flash = train_step_flops(tiny_shape(2, 2, 8), TrainAttention::flash);
  EXPECT_DOUBLE_EQ(flash.step(), f.step());  // model FLOPs do not depend on the kernels
  EXPECT_DOUBLE_EQ(flash.attention_executed, 9.0 * 4096 * 2 * 32 * 4 * 2 * 2);
}

// Flash at S = 4096 (a multiple of both tiles): the forward covers S(S + 128) / 2 pairs per
// (sequence, head), the backward S(S + 64) / 2 twice; between the model's causal count and the
// materialized square's 2x of it.
TEST(TrainCost, FlashExecutedFollowsTheTiles) {
  TrainShape s = tiny_shape(3, 2, 4096);
  const double seq = 4096, per_pair = 2.0 * s.model.heads * s.model.head_dim * 2 * 3;  // heads, batch, layers
  const TrainStepFlops flash = train_step_flops(s, TrainAttention::flash);
  EXPECT_DOUBLE_EQ(flash.attention_executed, per_pair * (2 * seq * (seq + 128) / 2 + 7 * seq * (seq + 64) / 2));
  const TrainStepFlops square = train_step_flops(s, TrainAttention::materialized);
  EXPECT_GT(flash.attention_executed, 3 * flash.attention_forward);
  EXPECT_LT(flash.attention_executed, square.attention_executed);
  // A sequence that is not a multiple of the tiles pays for whole tiles.
  s.seq = 4097;
  EXPECT_GT(train_step_flops(s).attention_executed,
            per_pair * (2 * 4097.0 * (4097 + 128) / 2 + 7 * 4097.0 * (4097 + 64) / 2));
}

// Megatron's count (Narayanan et al. 2021) for a GPT layer (MHA, 4h MLP = 8h^2 params like a gated
// MLP of 8h/3) with the full attention square: 72 B s L h^2 (1 + s / (6h)).
TEST(TrainCost, FullSquareMatchesMegatronFormula) {
  TrainShape s;
  s.model = infer::TransformerConfig::tiny();
  s.model.hidden = 48;
  s.model.heads = s.model.kv_heads = 4;
  s.model.head_dim = 12;
  s.model.ffn_hidden = 128;  // 3 x 48 x 128 = 8 x 48^2
  s.layers = 3;
  s.micro_batch = 2;
  s.seq = 32;
  const double b = 2, seq = 32, layers = 3, h = 48;
  const double megatron = 72 * b * seq * layers * h * h * (1 + seq / (6 * h));
  EXPECT_NEAR(train_step_flops(s, TrainAttention::materialized).step_executed(), megatron, 1e-9 * megatron);
}

// Llama-3.1-8B's layer shape, 4 layers, 4 x 4096 tokens.
TrainShape llama_8b_4_layers_4x4096() {
  TrainShape s;
  s.model = infer::TransformerConfig::tiny();
  s.model.hidden = 4096;
  s.model.heads = 32;
  s.model.kv_heads = 8;
  s.model.head_dim = 128;
  s.model.ffn_hidden = 14336;
  s.layers = 4;
  s.micro_batch = 4;
  s.seq = 4096;
  return s;
}

// Llama-3.1-8B, 4 layers, 4 x 4096 tokens: the BF16 softmax probabilities alone are 4 layers x 4
// sequences x 32 heads x 4096^2 x 2 bytes = 16 GiB, and every stored [tokens, width] tensor is
// tokens x width x 2 bytes.
TEST(TrainCost, MemoryMatchesHandCount) {
  const TrainShape s = llama_8b_4_layers_4x4096();
  const TrainStepMemory m = train_step_memory(s, TrainAttention::materialized);
  EXPECT_EQ(m.probabilities, std::int64_t{16} << 30);
  EXPECT_EQ(m.softmax_lse, 0);
  const std::int64_t t = 16384;
  // output, n1, x2, n2 (4 x 4096) + QKV 6144 + attention 4096 + gate/up and act 3 x 14336 = 69632 wide.
  EXPECT_EQ(m.activations - m.probabilities, 4 * t * 69632 * 2);
  EXPECT_EQ(m.weights, 4 * (218103808 + 8192) * 2);
  EXPECT_EQ(m.io, 2 * t * 4096 * 2);
  EXPECT_GT(m.total(), std::int64_t{28} << 30);  // about 31 GiB: fits an 80 GB GPU
  EXPECT_LT(m.total(), std::int64_t{36} << 30);
}

// The same shape with flash attention: no probabilities and no S x S scratch (FP32 scores and dP of
// 8 KV heads, 8 x 4096^2 x 4 bytes, and BF16 dS, 8 x 4096^2 x 2 bytes = 768 MiB), but one FP32
// log-sum-exp per layer, sequence, head and row: 4 x 4 x 32 x 4096 x 4 bytes = 8 MiB. Flash is the
// default.
TEST(TrainCost, FlashMemoryKeepsOnlyTheLogSumExp) {
  const TrainShape s = llama_8b_4_layers_4x4096();
  const TrainStepMemory flash = train_step_memory(s, TrainAttention::flash);
  const TrainStepMemory materialized = train_step_memory(s, TrainAttention::materialized);
  EXPECT_EQ(train_step_memory(s).total(), flash.total());
  EXPECT_EQ(flash.probabilities, 0);
  EXPECT_EQ(flash.softmax_lse, std::int64_t{8} << 20);
  EXPECT_EQ(flash.activations, materialized.activations - materialized.probabilities + (std::int64_t{8} << 20));
  EXPECT_EQ(materialized.scratch - flash.scratch, std::int64_t{768} << 20);
  EXPECT_EQ(flash.weights, materialized.weights);
  EXPECT_EQ(flash.gradients, materialized.gradients);
  EXPECT_EQ(flash.io, materialized.io);
  EXPECT_LT(flash.total(), std::int64_t{16} << 30);  // 14.0 GiB against 30.8
  EXPECT_STREQ(to_string(TrainAttention::flash), "flash");
  EXPECT_STREQ(to_string(TrainAttention::materialized), "materialized");
}

}  // namespace
}  // namespace gpuscout::train
