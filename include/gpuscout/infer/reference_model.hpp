#pragma once
// A plain C++ implementation of the Llama-family decoder the CUDA engine runs, with the same
// deterministic weights (weights.hpp) and the same BF16 rounding points: weights, the embedding
// output, and every tensor the engine stores in BF16 between kernels (norm outputs, Q/K/V after
// RoPE, the KV cache, attention output, MLP activations, the residual stream), with FP32
// accumulation inside each operation. The engine is checked against it (logits within tolerance,
// identical greedy tokens), and it is the Executor of the CPU serving engine used in CI.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuscout/infer/scheduler.hpp"
#include "gpuscout/infer/transformer_config.hpp"

namespace gpuscout::infer {

struct ReferenceOptions {
  std::uint64_t weight_seed = 1;
  int kv_block_size = 16;
  int kv_blocks = 256;
  int max_running = 64;
  int max_step_tokens = 512;
  // The FP8 engine's weights: projection matrices as E4M3 codes times a per-tensor scale
  // (weights.hpp). Activations stay as in the BF16 engine: the FP8 engine's per-tensor activation
  // quantization on its cuBLASLt path is not modelled, so the comparison needs a wider tolerance.
  bool fp8_weights = false;
};

class ReferenceModel final : public Executor {
 public:
  ReferenceModel(TransformerConfig config, ReferenceOptions options = {});

  std::string name() const override { return "cpu-reference"; }
  int kv_block_size() const override;
  int kv_blocks() const override;
  int max_running() const override;
  int max_step_tokens() const override;
  std::vector<std::int32_t> execute(const StepPlan& plan) override;

  // FP32 logits of the last token of every chunk with samples=true in the last execute() call, in
  // plan order (rows of `vocab`).
  const std::vector<std::vector<float>>& last_logits() const;
  const TransformerConfig& config() const;
  // The KV cache of one layer, [kv_blocks, kv_heads, block_size, head_dim] (kernels.hpp's layout),
  // BF16 values as floats; zero where nothing was stored (tests check where K/V went).
  const std::vector<float>& k_cache(int layer) const;
  const std::vector<float>& v_cache(int layer) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpuscout::infer
