#pragma once
// Per-operator speed model (docs/modeling.md "Speed model"): every operator's time is
//   max(FLOPs / (dense peak x η_gemm(precision, m)), bytes / (bandwidth x η_mem))
// composed per layer (GEMMs, attention, norms/elementwise, TP all-reduce), plus kernel gaps and the
// framework's per-step overhead. Inference: prefill (TTFT), decode step (TPOT), static batch, max
// batch from KV capacity (memory.hpp), throughput at a TTFT/TPOT bound. Training: step time, tokens/s,
// MFU, TP/PP/DP communication, pipeline bubble, exposed DP gradient reduction, time to train.
// Units: seconds, FLOPs, bytes in the structs; the CLI converts to ms, GB/s, ...
#include <cstdint>
#include <string>
#include <vector>

#include "gpuscout/data/data_source.hpp"
#include "gpuscout/model/calibration.hpp"
#include "gpuscout/model/memory.hpp"
#include "gpuscout/specs/gpu_spec.hpp"
#include "gpuscout/workloads/model_arch.hpp"

namespace gpuscout::model {

struct FrameworkProfile {
  std::string key;   // "vllm"
  std::string name;  // "vLLM"
  double step_overhead_ms = 1.0;
  double kernel_gap_us = 1.0;
  // cuda_graphs: decode-only steps replay CUDA graphs (kernel_gap_us per kernel); a step that carries
  // prompt tokens is launched kernel by kernel and pays eager_kernel_gap_us (optional in the file;
  // when absent, kernel_gap_us: no difference assumed). Without graphs every step pays kernel_gap_us.
  bool cuda_graphs = true;
  double eager_kernel_gap_us = 1.0;
  double memory_fraction = 0.9;
  double tp_overlap = 0;
  double dp_overlap = 0;
  // A step with prefill finishes the last decoder layer for the sampled rows only (K/V for every
  // row): gpuscout's engine (EngineOptions::prune_last_layer). Optional in the file, default false.
  bool prunes_last_layer = false;
  // Large steps compute SiLU(gate) * up in the gate/up GEMM's epilogue, so no separate activation kernel
  // reads the [tokens, 2 ffn] product back: gpuscout's engine on compute capability 9.0 with BF16
  // weights (EngineOptions::fused_swiglu), for steps whose 128-token x 128-output tiles fill at least
  // fused_swiglu_min_waves waves over the GPU's SMs (0: never, the file's default). A run's own
  // threshold, where validation knows it, is fused_swiglu_min_tokens (> 0: it decides; not in the file).
  double fused_swiglu_min_waves = 0;
  double fused_swiglu_min_tokens = 0;
  // A one-row step (batch-1 decode) with BF16 weights on compute capability 9.0 computes the two
  // RMSNorms and SiLU * up inside its GEMVs (gpuscout's ring GEMV: GemmRunner::run_normed and
  // run_silu_mul), so three kernels a layer and the activation op do not run. Optional, default false.
  bool folds_elementwise_at_one_row = false;
  // FP8 weights: each dense GEMM's input is quantized to FP8 by kernels of its own ahead of the GEMM
  // (gpuscout's engine: an amax kernel and a quantize kernel, GemmRunner::run) in steps of at least
  // fp8_quantize_min_tokens tokens; below that its own GEMM kernels read the BF16 activations. Each such
  // kernel is priced as a kernel gap, and the two passes as 5 bytes per element (read, read, FP8
  // write). Optional, default 0: no separate quantization (fused into the kernel before, or unknown).
  double fp8_quantize_kernels_per_gemm = 0;
  double fp8_quantize_min_tokens = 1;
  // The attention core's FLOP rate as a fraction of a same-m GEMM's (the calibrated efficiency curve).
  // Optional in the file; 0.8 (an assumption for FlashAttention kernels) when absent.
  double flash_efficiency = 0.8;
  std::string source;
};
// data/frameworks.toml. Throws DataError.
std::vector<FrameworkProfile> load_frameworks(const data::DataSource& source);
// By key or name, case-insensitive; UsageError naming `flag` otherwise.
const FrameworkProfile& find_framework(const std::vector<FrameworkProfile>& all, const std::string& name,
                                       const std::string& flag);

// One operator's share of a step, per GPU.
struct OpTime {
  std::string key;  // "qkv", "attention", "allreduce", ...
  double flops = 0;
  double bytes = 0;
  double seconds = 0;  // all occurrences (layers x count)
  std::string bound;   // "compute", "memory", "communication", "overhead"
};

struct StepTime {
  std::vector<OpTime> ops;
  double seconds = 0;
  void add(OpTime op);
};

// What the model needs to know about the hardware and software.
struct SpeedContext {
  const specs::GpuSpec* gpu = nullptr;
  Calibration calibration;
  FrameworkProfile framework;
};

// Time of one GEMM of m x n x k with weights of `weight_bytes_per_element` (activations 2 bytes).
OpTime gemm_time(const SpeedContext& ctx, specs::Precision precision, const std::string& key, double m, double n,
                 double k, double weight_bytes_per_element, double count = 1);
// Time of a memory-bound operator moving `bytes`.
OpTime memory_time(const SpeedContext& ctx, const std::string& key, double bytes, double count = 1);

// ---- inference -------------------------------------------------------------------------------

// Sequences of one shape in a step: each computes `new_tokens` after `context` cached positions.
struct AttentionGroup {
  double sequences = 0;
  double new_tokens = 1;
  double context = 0;
};

struct InferenceSetup {
  workloads::ModelArch arch;
  Parallelism par;       // tp, pp (dp = replicas: throughput scales, latency not)
  Quantization weights;  // parse_quantization(): bf16, fp8, int8, int4 ...
  double kv_bytes_per_element = 2;
};

// Forward pass over `sequences` sequences of `new_tokens` each, attending to `context` earlier plus
// their own tokens (prefill: new_tokens = ISL, context = 0; decode: new_tokens = 1, context = c).
// `logits_tokens`: rows through the LM head (prefill: one per sequence).
StepTime forward_step(const SpeedContext& ctx, const InferenceSetup& setup, double sequences, double new_tokens,
                      double context);
// One engine step of continuous batching over groups of sequences of different shapes (decodes at their
// contexts, prefill chunks): the GEMMs run once over all tokens, attention per group, the LM head over
// `sampled_sequences` rows, plus the framework's step overhead.
StepTime engine_step(const SpeedContext& ctx, const InferenceSetup& setup, const std::vector<AttentionGroup>& groups,
                     double sampled_sequences);

struct StaticBatch {
  double batch = 0;
  double ttft_s = 0;               // prefill of the whole batch, first token included
  double tpot_s = 0;               // mean decode step over the OSL - 1 later tokens
  double total_s = 0;              // ttft + (osl - 1) x tpot
  double output_tokens_per_s = 0;  // whole system (all GPUs of one replica): batch x osl / total
  double total_tokens_per_s = 0;   // (isl + osl) x batch / total
  StepTime prefill;
  StepTime decode_mid;  // the decode step at the mean context
};
StaticBatch static_batch(const SpeedContext& ctx, const InferenceSetup& setup, double batch, double isl, double osl);

// Continuous batching steady state with `batch` sequences resident (modeling.md 4.7): each step decodes
// every sequence at the mean context ISL + OSL/2 and admits batch/OSL new requests, whose prefill it
// carries (chunked prefill). TPOT = step; TTFT = prefill of one request + one step; tokens/s = batch/step.
struct ServingPoint {
  double batch = 0;
  double step_s = 0;
  double prefill_s = 0;  // the step's share of prefill (batch/OSL requests admitted per step)
  double ttft_s = 0;
  double tpot_s = 0;
  double output_tokens_per_s = 0;  // one replica (tp x pp GPUs)
};
ServingPoint continuous_batching(const SpeedContext& ctx, const InferenceSetup& setup, double batch, double isl,
                                 double osl);
// Largest batch up to max_batch with TTFT <= ttft_bound and TPOT <= tpot_bound (0 = no bound). Batch 0
// when even batch 1 misses a bound.
ServingPoint best_batch_under_bounds(const SpeedContext& ctx, const InferenceSetup& setup, double isl, double osl,
                                     std::int64_t max_batch, double ttft_bound_s, double tpot_bound_s);

// ---- training --------------------------------------------------------------------------------

struct TrainingSetup {
  workloads::ModelArch arch;
  Parallelism par;
  TrainingConfig config;          // precision, seq, micro_batch, recompute, zero, schedule, v
  std::int64_t global_batch = 0;  // sequences per step
};

struct TrainingStep {
  double micro_batches = 0;  // per pipeline per step
  double forward_s = 0;      // one micro-batch, one stage
  double backward_s = 0;     // incl. recompute
  double recompute_s = 0;
  double tp_comm_s = 0;  // exposed, one micro-batch, one stage (fwd + bwd)
  double ep_comm_s = 0;  // expert-parallel all-to-alls, one micro-batch, one stage (fwd + bwd)
  double pp_comm_s = 0;  // per step
  double bubble_s = 0;
  double bubble_fraction = 0;
  double dp_comm_s = 0;  // whole gradient reduction
  double dp_exposed_s = 0;
  double optimizer_s = 0;
  double overhead_s = 0;
  double step_s = 0;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;  // 6·N·tokens + attention (no recompute)
  double hardware_flops_per_step = 0;
  double mfu = 0;  // model FLOPs / (gpus x peak x step)
  double hfu = 0;
  double peak_tflops = 0;  // which dense peak MFU uses
  std::string peak_label;
  StepTime forward;  // one micro-batch, one stage
};
TrainingStep training_step(const SpeedContext& ctx, const TrainingSetup& setup);

// Model FLOPs per token of training (forward + backward, no recompute): 3 x forward with causal attention.
double training_flops_per_token(const workloads::ModelArch& arch, std::int64_t seq);

}  // namespace gpuscout::model
