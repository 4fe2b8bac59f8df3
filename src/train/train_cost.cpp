#include "gpuscout/train/train_cost.hpp"

#include <algorithm>

namespace gpuscout::train {

std::int64_t layer_matrix_params(const infer::TransformerConfig& m) {
  const std::int64_t h = m.hidden;
  return h * m.qkv_dim() + std::int64_t{m.q_dim()} * h + 3 * h * m.ffn_hidden;
}

TrainStepFlops train_step_flops(const TrainShape& s, TrainAttention attention) {
  TrainStepFlops f;
  const double tokens = static_cast<double>(s.tokens());
  const double seq = s.seq;
  const double per_head = 4.0 * s.model.heads * s.model.head_dim;  // QK^T and PV, 2 FLOPs per multiply-add
  const double sequences_layers = static_cast<double>(s.micro_batch) * s.layers;
  f.linear_forward = 2.0 * tokens * static_cast<double>(layer_matrix_params(s.model)) * s.layers;
  f.attention_forward = per_head * seq * (seq + 1) / 2 * sequences_layers;
  if (attention == TrainAttention::materialized) {
    f.attention_executed = 3 * per_head * seq * seq * sequences_layers;
    return f;
  }
  // Query-key pairs the tiles cover per (sequence, head). Forward: query tile i (rows from i x bq)
  // runs the key tiles up to the end of its rows. Backward: 64 x 64 tiles on and below the diagonal,
  // visited once by the dK/dV kernel and once by the dQ kernel.
  const std::int64_t bq = flash_forward_query_tile(s.seq);
  double forward_pairs = 0;
  for (std::int64_t q0 = 0; q0 < s.seq; q0 += bq) {
    const std::int64_t kv_end = std::min<std::int64_t>(q0 + bq, s.seq);
    forward_pairs += static_cast<double>(bq) * kFlashKeyTile * ((kv_end + kFlashKeyTile - 1) / kFlashKeyTile);
  }
  static_assert(kFlashKeyTile == kFlashBackwardQueryTile, "the backward's tile count assumes square tiles");
  const double n = (s.seq + kFlashKeyTile - 1) / kFlashKeyTile;
  const double backward_pairs = static_cast<double>(kFlashKeyTile) * kFlashKeyTile * n * (n + 1) / 2;
  // per_head / 2 FLOPs per pair and product (2 x heads x head_dim).
  f.attention_executed = per_head / 2 * (2 * forward_pairs + 7 * backward_pairs) * sequences_layers;
  return f;
}

const char* to_string(TrainAttention attention) {
  return attention == TrainAttention::flash ? "flash" : "materialized";
}

TrainStepMemory train_step_memory(const TrainShape& s, TrainAttention attention) {
  const bool flash = attention == TrainAttention::flash;
  const auto& m = s.model;
  constexpr std::int64_t bf16 = 2, fp32 = 4;
  const std::int64_t t = s.tokens(), h = m.hidden, L = s.layers, seq = s.seq;
  const std::int64_t matrix = layer_matrix_params(m);
  const std::int64_t square = seq * seq;  // one head's scores
  TrainStepMemory mem;
  mem.weights = L * (matrix + 2 * h) * bf16;
  mem.gradients = L * (matrix * bf16 + 2 * h * fp32);
  // Per layer: both norm outputs, QKV after RoPE, attention output, the residual after attention,
  // gate/up, the SwiGLU product and the layer's output (the next layer's input; layer 0's is `io`).
  const std::int64_t per_layer = t * (4 * h + m.qkv_dim() + m.q_dim() + 3 * std::int64_t{m.ffn_hidden});
  const std::int64_t rows_of_heads = s.micro_batch * m.heads * seq;  // one per (sequence, head, row)
  mem.probabilities = flash ? 0 : L * s.micro_batch * m.heads * square * bf16;
  mem.softmax_lse = flash ? L * rows_of_heads * fp32 : 0;
  mem.activations = L * per_layer * bf16 + mem.probabilities + mem.softmax_lse;
  // Materialized attention runs one (sequence, query head of each KV group) slice at a time: FP32
  // scores / dP and BF16 dS of kv_heads heads (flash: none). Both: row sums of dO * O for all heads;
  // the input gradients of one layer.
  const std::int64_t slice = flash ? 0 : m.kv_heads * square;
  const std::int64_t gradients_of_inputs = t * (3 * std::int64_t{m.ffn_hidden} + h + m.q_dim() + m.qkv_dim() +
                                                2 * h);  // dact, dgate_up, dn, dattn, dqkv, dy/dx
  // + each row's 1/rms (norm backward) and the loss.
  mem.scratch = slice * (fp32 + bf16) + rows_of_heads * fp32 + gradients_of_inputs * bf16 + kTrainGemmWorkspaceBytes +
                t * fp32 + fp32;
  mem.io = 2 * t * h * bf16;
  return mem;
}

}  // namespace gpuscout::train
