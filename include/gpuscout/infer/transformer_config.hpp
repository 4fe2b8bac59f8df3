#pragma once
// The shape of a Llama-family decoder as the serving engine and its CPU reference run it: RMSNorm,
// RoPE, grouped-query attention (with or without QKV biases, Qwen2.5's), SwiGLU MLP, untied or
// tied LM head. Built from a catalog model
// (rejecting what the engine does not implement, with the reason) or the tiny test configuration.
// C++17-clean: included by CUDA sources.
#include <cstdint>
#include <string>

namespace gpuscout::workloads {
struct ModelInfo;
}

namespace gpuscout::infer {

// How the engine stores the projection matrices (QKV, O, gate/up, down); embedding, norms, LM head
// and KV cache are BF16 in both.
enum class WeightFormat { bf16, fp8_e4m3 };
// "bf16" / "fp8"; parse_weight_format throws UsageError naming `flag` for anything else.
const char* to_string(WeightFormat format);
WeightFormat parse_weight_format(const std::string& text, const std::string& flag);

struct TransformerConfig {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn_hidden = 0;
  int vocab = 0;
  double rope_theta = 10000.0;  // plain RoPE; Llama 3.1's long-context rescaling changes values, not cost
  float norm_eps = 1e-5f;
  bool tied_embeddings = false;
  bool qkv_bias = false;  // a bias added to Q, K and V after their projection (Qwen2 / Qwen2.5)
  std::int64_t max_context = 0;

  // Throws UsageError naming the model and what the engine does not implement (MoE, MLA, biases
  // other than QKV's,
  // LayerNorm, non-gated or non-SiLU MLP, encoder).
  static TransformerConfig from_model(const workloads::ModelInfo& model);
  // 2 layers, hidden 128, 4 query heads / 2 KV heads of 32, FFN 256, vocab 512: the configuration
  // the GPU engine is checked against the CPU reference with, and the CPU engine of CI tests.
  static TransformerConfig tiny();

  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  // Parameters of the weights the engine holds (embedding, layers with their QKV biases, final norm,
  // LM head unless tied).
  std::int64_t weight_params() const;
  // Parameters of the projection matrices of all layers (what WeightFormat applies to).
  std::int64_t projection_params() const;
  // KV cache bytes per token over all layers (K and V) at `bytes_per_element`.
  std::int64_t kv_bytes_per_token(int bytes_per_element) const;
  // Throws UsageError naming --tp when heads, KV heads or FFN width do not divide by `tp`.
  void check_tensor_parallel(int tp) const;
};

}  // namespace gpuscout::infer
