#pragma once
// Memory per GPU of a transformer model, for inference (serving) and for training, under tensor (TP),
// pipeline (PP), data (DP) and expert (EP) parallelism. Every result is a list of terms, each with its
// bytes, the formula it came from and the assumptions it rests on, so a caller can print why a
// configuration fits or not. Formulas: docs/modeling.md (after ../shared/reference/modeling.md §4.2).
//
// Units: bytes everywhere (double: the counts exceed 2^53 only for absurd inputs). GiB = 2^30 bytes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/workloads/model_arch.hpp"

namespace gpuscout::model {

// How the weights of the linear layers are stored. Embeddings, LM head and norms stay 16-bit in every
// quantized format (GPTQ/AWQ/FP8 checkpoints keep them unquantized); that is an assumption, labelled.
struct Quantization {
  std::string name;                 // "fp32", "bf16", "fp16", "fp8", "int8", "int4"
  double bits_per_weight = 16;      // storage of one quantized weight
  std::int64_t group_size = 0;      // weights sharing one scale (0: per-channel or per-tensor scale, negligible)
  double scale_bits_per_group = 0;  // scale (+ zero point) bits stored per group
  specs::Precision compute = specs::Precision::bf16;

  // Bytes per linear-layer weight, group scales included: (bits + scale_bits / group) / 8.
  double bytes_per_weight() const;
};
// bf16, fp16, fp32, fp8, int8, int4 (group 128, fp16 scale + 4-bit zero point, as GPTQ/AWQ pack them).
// Throws UsageError naming `flag` for anything else.
Quantization parse_quantization(const std::string& text, const std::string& flag);

struct Parallelism {
  std::int64_t tp = 1;  // tensor parallel: splits heads and MLP columns
  std::int64_t pp = 1;  // pipeline parallel: splits layers into stages
  std::int64_t dp = 1;  // data parallel: replicas (ZeRO shards model states over them)
  std::int64_t ep = 1;  // expert parallel: MoE routed experts spread over this many GPUs of a stage
  std::int64_t gpus() const { return tp * pp * dp; }
};

// Checks a parallel layout against a model: TP divides the attention heads (and the KV heads divide TP
// or TP divides them), PP is at most the layer count, EP divides the experts and TP x DP. Throws
// UsageError naming the flag (--tp, --pp, --ep, --dp) and the numbers.
void check_parallelism(const workloads::ModelArch& arch, const Parallelism& par);

// One line of a breakdown.
struct MemoryTerm {
  std::string key;      // machine name: "weights", "kv_cache", "activations", ...
  std::string label;    // human name
  double bytes = 0;     // per GPU
  std::string formula;  // how it was computed, with the numbers
};

struct MemoryBreakdown {
  std::vector<MemoryTerm> terms;
  double total_bytes = 0;     // sum of the terms
  double capacity_bytes = 0;  // the GPU's memory
  double usable_bytes = 0;    // what the framework may use (capacity x memory fraction)
  std::string stage;          // which pipeline stage the figures are for ("single stage", "first stage", ...)
  std::vector<std::string> assumptions;

  bool fits() const { return total_bytes <= usable_bytes; }
  double headroom_bytes() const { return usable_bytes - total_bytes; }
  const MemoryTerm* find(const std::string& key) const;
  double bytes_of(const std::string& key) const;  // 0 when absent
};

// Memory of one GPU as the framework sees it. HBM parts: memory_gb x 2^30 (an H100 80GB shows
// 81559 MiB in nvidia-smi, 0.4% below 80 GiB); GDDR parts lose ECC and reserved memory, so
// memory_gb x 1e9 (an L40S 48GB shows 46068 MiB = 48.3e9 B).
double gpu_capacity_bytes(const specs::GpuSpec& gpu);

// Runtime costs outside the model, per GPU.
struct RuntimeReserve {
  double cuda_context_bytes = 0.75 * (1ull << 30);  // CUDA context, cuBLAS/cuDNN workspaces: 0.5-1 GiB
  double nccl_bytes = 0.4 * (1ull << 30);           // NCCL buffers when the GPU talks to others (AIC: 0.35-0.4)
  double memory_fraction = 0.90;                    // vLLM gpu_memory_utilization default; TRT-LLM kv fraction 0.9-0.95
};

// ---- inference -------------------------------------------------------------------------------

struct InferenceConfig {
  Quantization weights;
  double kv_bytes_per_element = 2;  // BF16/FP16 cache; 1 for an FP8 cache
  std::int64_t context = 4096;      // tokens per sequence (prompt + output)
  std::int64_t batch = 1;           // sequences resident at once
  std::int64_t kv_block = 16;       // paged KV block size in tokens (vLLM default); 1 = no paging
  // Largest prefill chunk processed in one forward pass; 0 = min(context x batch, 8192) as vLLM's
  // chunked prefill (max_num_batched_tokens 8192).
  std::int64_t prefill_chunk = 0;
  double activation_bytes = 2;  // BF16 activations
  RuntimeReserve runtime;
};

struct InferenceMemory {
  MemoryBreakdown breakdown;
  double kv_bytes_per_token = 0;          // per GPU, all layers of its stage
  double kv_tokens_capacity = 0;          // tokens of KV cache that fit beside everything else (0 if none)
  std::int64_t max_batch_at_context = 0;  // sequences of `context` tokens that fit (block-rounded)
};

InferenceMemory inference_memory(const workloads::ModelArch& arch, const Parallelism& par,
                                 const InferenceConfig& config, double capacity_bytes);

// ---- training --------------------------------------------------------------------------------

enum class Recompute { none, selective, full };
Recompute parse_recompute(const std::string& text, const std::string& flag);
std::string to_string(Recompute recompute);

enum class PipelineSchedule { one_f_one_b, interleaved };

enum class FineTune { full, lora, qlora };

struct TrainingConfig {
  std::string precision = "bf16";  // bf16 or fp8 GEMMs; model states are the same (FP8 keeps BF16 weights)
  std::int64_t seq = 4096;         // s
  std::int64_t micro_batch = 1;    // b
  std::int64_t micro_batches = 0;  // m per step per pipeline; 0 = pp (enough to fill the pipeline)
  Recompute recompute = Recompute::selective;
  bool sequence_parallel = true;       // with TP > 1 (Megatron-LM's default for large models)
  bool flash_attention = true;         // no s^2 score tensors are stored
  bool dropout = false;                // modern LLMs train without dropout; Korthikanti's 34 counts its masks
  int zero_stage = 0;                  // DeepSpeed ZeRO 0-3
  bool distributed_optimizer = false;  // Megatron: FP32 main grads, optimizer sharded over DP
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  std::int64_t virtual_stages = 1;  // v for the interleaved schedule
  FineTune fine_tune = FineTune::full;
  std::int64_t lora_rank = 16;
  double fragmentation = 0.05;                     // allocator fragmentation, fraction of activations and model states
  RuntimeReserve runtime{.memory_fraction = 1.0};  // training uses all memory the allocator can get
};

// Activation bytes of one transformer layer for one micro-batch, per GPU (Korthikanti et al. 2022,
// generalised term by term to GQA, gated MLPs, any ffn width, with or without dropout). For GPT-3-like
// layers (MHA, plain MLP of 4h, dropout, no FlashAttention): s·b·h·(34 + 5·a·s/h) without TP;
// s·b·h·(10 + 24/t + 5·a·s/(h·t)) with TP t; s·b·h·(34 + 5·a·s/h)/t with TP and SP; drop the a·s/h
// terms with selective recompute; 2·s·b·h (/t with SP) stored with full recompute.
struct LayerActivations {
  double replicated = 0;  // norms, block inputs, dropout masks: split by t only with SP
  double split = 0;       // Q, K, V, attention output, MLP intermediates: split by t
  double scores = 0;      // softmax/dropout over a·s²·b: split by t; gone with FlashAttention or selective
  double stored = 0;      // per GPU after TP/SP/recompute
  std::string formula;
};
LayerActivations layer_activations(const workloads::ModelArch& arch, std::int64_t tp, const TrainingConfig& config);

struct TrainingMemory {
  MemoryBreakdown breakdown;            // the worst pipeline stage
  double params_per_gpu = 0;            // Ψ of that stage's GPU (after TP/PP/EP)
  double trainable_params_per_gpu = 0;  // = params, or the LoRA adapters
  double in_flight_micro_batches = 0;
};

TrainingMemory training_memory(const workloads::ModelArch& arch, const Parallelism& par, const TrainingConfig& config,
                               double capacity_bytes);

// Parameters per GPU of one pipeline stage, split by component (after TP and EP sharding).
struct StageParams {
  double layers = 0;          // transformer layers on the stage (ceil(L/p) for the worst stage)
  double linear = 0;          // attention + MLP matrices on this GPU (quantizable)
  double routed_experts = 0;  // part of linear: MoE routed experts on this GPU
  double other = 0;           // embeddings, LM head, norms on this GPU (kept 16-bit)
  double total() const { return linear + other; }
};
// first: the first stage (embedding), last: the last stage (LM head, final norm); same when pp = 1.
StageParams stage_params(const workloads::ModelArch& arch, const Parallelism& par, bool first, bool last);

// KV-cache bytes one token adds on one GPU: GQA heads split over TP (at least one per GPU: replicated
// when TP exceeds the KV heads); MLA's latent is replicated on every TP rank. Layers: ceil(L/p).
double kv_bytes_per_token_per_gpu(const workloads::ModelArch& arch, const Parallelism& par, double bytes_per_element);

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace gpuscout::model
