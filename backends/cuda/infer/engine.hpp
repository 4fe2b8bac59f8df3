#pragma once
// The CUDA serving engine: a Llama-family decoder with deterministic random weights generated on
// the GPU (BF16, or FP8 E4M3 projection matrices: EngineOptions::fp8_weights), a paged KV cache
// sized from the memory left after the weights, cuBLASLt GEMMs (or the skinny GEMM where it is
// faster for a decode shape: timed at start-up, the choice recorded), our attention and fused
// elementwise kernels (kernels.hpp), decode steps replayed from CUDA graphs per batch-size
// bucket, and tensor parallelism over the GPUs of one node through NCCL. It implements
// infer::Executor, so the Scheduler and EngineSut drive it like the CPU reference.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuscout/infer/scheduler.hpp"
#include "gpuscout/infer/transformer_config.hpp"
#include "gpuscout/util/error.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

enum KnockOut : unsigned {
  knock_out_norms = 1u << 0,      // both RMSNorms of each layer
  knock_out_rope = 1u << 1,       // RoPE + KV store
  knock_out_attention = 1u << 2,  // decode/prefill attention
  knock_out_silu = 1u << 3,       // SiLU * up
};

struct EngineOptions {
  std::vector<int> gpus{0};  // one per tensor-parallel rank
  std::uint64_t weight_seed = 1;
  int kv_block_size = 16;
  double memory_fraction = 0.90;   // of the GPU's free memory after the weights, for KV cache + workspaces
  std::int64_t max_kv_blocks = 0;  // 0: as many as the memory fraction allows
  int max_running = 256;           // largest decode batch (and the largest CUDA-graph bucket)
  int max_step_tokens = 8192;      // largest step (prefill chunk budget)
  int max_context = 0;             // longest sequence; 0: the model's max_context, capped at 32768
  bool cuda_graphs = true;         // decode-only steps replay a captured graph per batch bucket
  // FP8 (E4M3) projection weights, one scale per tensor (compute capability 8.9+): cuBLASLt FP8
  // GEMMs on activations quantized per tensor at run time (scale = max|x| / 448), and for decode
  // batches of a few rows the skinny kernel on FP8 weights and BF16 activations. Embedding, norms,
  // LM head and KV cache stay BF16.
  bool fp8_weights = false;
  // Programmatic dependent launch of the engine's own kernels (compute capability 9.0+): each
  // kernel starts loading what does not depend on its predecessor (decode GEMM weights) while
  // that one finishes.
  bool programmatic_launch = true;
  // TP > 1: a step whose GPUs have not finished within this many seconds is treated as a hung
  // collective: every communicator is aborted (ncclCommAbort) and execute() throws. A rank that
  // fails ends the others' waits at once the same way. Afterwards the engine refuses further steps.
  double collective_timeout_s = 60;
  // Tests only: at the Nth execute() (1-based) the last rank throws instead of running its part
  // (fault_throws) or silently skips it, leaving its peers in the all-reduce (a hang).
  int inject_fault_at_step = 0;
  bool fault_throws = true;
  // Timing attribution only (the tokens are then wrong): leave these per-layer kernels out of every
  // step, so that step-time differences give their cost in a real step (graph, PDL, neighbours)
  // where no profiler that sees inside a graph is available. Bits of KnockOut. Memory-bound
  // (decode) steps only: in a prefill step the GEMMs after a left-out kernel read zeros, which a
  // power-capped GPU runs faster than real data (bench/NOTES.md, session 6).
  unsigned knock_out = 0;
  // Time the decode attention kernels and grids per decode bucket and context class at start-up and
  // capture each graph with the fastest (CudaEngine::Impl::tune_attention); off: the kernels' own
  // choice by pair count. Only with cuda_graphs (the plans belong to the graphs).
  bool tune_attention = true;
  // A plan other than automatic: every decode graph uses it and nothing is timed (A/B runs:
  // infer_engine_test --attention-plan).
  DecodeAttentionPlan attention_plan_override;
  // GEMM kernel choices that timing alone found close (the second within 25% per call): time both
  // in whole decode steps of each graph (bucket and context class) and capture it with the faster
  // (CudaEngine::Impl::resolve_gemm_ties). Only with cuda_graphs.
  bool resolve_gemm_ties = true;
  // Tests only: GEMMs of up to 8 rows on the engine's own kernels whatever the timing says
  // (GemmRunner::prefer_own_kernels), and no in-step resolution, so the checks run those paths.
  bool prefer_own_gemm_kernels = false;
  // Steps with prefill chunks: the last layer finishes only the rows that sample (each completed
  // prompt's last token, every decode row). Its K/V must be stored for every row, but attention,
  // o and the MLP of the others feed nothing (the next step reads only the KV cache), so they run on
  // the gathered sampling rows, with one-query attention over each one's context (none at all in a
  // step whose prompt chunks complete no prompt). Exact: the same tokens and logits.
  // GPUSCOUT_PRUNE_LAST_LAYER=0 turns it off (A/B runs).
  bool prune_last_layer = true;
  // Large steps run the MLP's gate/up GEMM with SwiGLU in its epilogue (gemm_swiglu_wgmma.cu:
  // BF16 weights on compute capability 9.0; elsewhere ignored) instead of cuBLASLt and the SiLU * up
  // kernel (on one H200 the 8k prefill 1-2.5% faster, bench/NOTES.md, session 21): steps of at least
  // EngineInfo::swiglu_min_rows rows (gate_up_swiglu_min_rows: 1024 for Llama-3.1-8B on an H200).
  // GPUSCOUT_SWIGLU_GEMM=0 turns it off (A/B runs).
  bool fused_swiglu = true;
  // Tests only: the row count from which it runs instead of the rule's (> 0), so that small models'
  // steps reach it.
  int fused_swiglu_min_rows = 0;
};

// A tensor-parallel step failed or hung: the communicators were aborted and the engine refuses
// further steps. Not a usage error: the run records it as failed.
class EngineFault : public gpuscout::Error {
 public:
  using gpuscout::Error::Error;
};

// What the engine decided at start-up, for the result record.
struct EngineInfo {
  int tp = 1;
  std::string weight_format = "bf16";  // "bf16", or "fp8_e4m3" (projection matrices)
  std::int64_t weight_bytes_per_gpu = 0;
  std::int64_t kv_cache_bytes_per_gpu = 0;
  std::int64_t workspace_bytes_per_gpu = 0;
  int kv_blocks = 0;
  int kv_block_size = 0;
  std::vector<int> graph_buckets;    // decode batch sizes with a captured graph
  bool programmatic_launch = false;  // used (asked for and supported by every GPU)
  // The kernel of prefill chunks over 64 queries: "wgmma" (head size 128 on compute capability 9.0,
  // unless GPUSCOUT_PREFILL_WGMMA=0) or "mma.sync" (attention_prefill*.cu).
  std::string prefill_attention = "mma.sync";
  // EngineOptions::prune_last_layer in effect (asked for, not turned off by the environment).
  bool last_layer_pruned = false;
  // The MLP's gate/up GEMM of steps of at least swiglu_min_rows rows: "wgmma + swiglu" (the GEMM with
  // SwiGLU in its epilogue, EngineOptions::fused_swiglu, where the GPUs and weights allow it; "...,
  // in place" with GPUSCOUT_SWIGLU_EPILOGUE=in-place), or "cublaslt, silu" (cuBLASLt's product, then
  // the SiLU * up kernel: the fused kernel off, and always for smaller steps; swiglu_min_rows 0).
  std::string mlp_gate_up = "cublaslt, silu";
  int swiglu_min_rows = 0;
  // One line per GEMM shape class the engine timed: "qkv m=1: skinny 41.2 us vs cublaslt 48.0 us".
  std::vector<std::string> gemm_choices;
  // One line per decode bucket and context class, when timed: the plan kept, then each candidate's
  // us at the bottom, middle and top of the class: "batch 32 context <= 2048: streaming 132 blocks
  // (1/SM) (us at 513/1280/2048 tokens: split 30.1/56.4/80.2, streaming 132 blocks (1/SM) ...)".
  std::vector<std::string> attention_choices;
};

class CudaEngine final : public gpuscout::infer::Executor {
 public:
  // Throws gpuscout::Error with the numbers when the model does not fit: "Llama-3.1-70B BF16 needs
  // 141.1 GB of weights per GPU at TP1, 139.8 GB free on GPU 0: use --tp 2 (70.6 GB per GPU)".
  static std::unique_ptr<CudaEngine> create(const gpuscout::infer::TransformerConfig& config,
                                            const EngineOptions& options);
  ~CudaEngine() override;

  std::string name() const override;
  int kv_block_size() const override;
  int kv_blocks() const override;
  int max_running() const override;
  int max_step_tokens() const override;
  std::vector<std::int32_t> execute(const gpuscout::infer::StepPlan& plan) override;
  // Pipelined: submit() queues the step (metadata copy, graph or kernels, token copy) and returns;
  // the GPU starts it as soon as the step before it ends, so the host's collect, plan and launch
  // of the next step no longer sit between two steps. A pending decode token is read on the GPU
  // from the previous step's sampled rows.
  void submit(const gpuscout::infer::StepPlan& plan) override;
  std::vector<std::int32_t> collect() override;

  const EngineInfo& info() const;
  const gpuscout::infer::TransformerConfig& config() const;
  // FP32 copies of the logits of the sampling rows of the last execute() (tests: against the CPU
  // reference); only kept when `keep_logits(true)` was called before it.
  void keep_logits(bool keep);
  const std::vector<std::vector<float>>& last_logits() const;
  // Bench only (TP1, decode-only plans with a graph): GPU milliseconds per replay of the plan's step
  // graph, `replays` launches back to back between two events with the metadata copied once (each
  // replay rewrites the same KV slots). Against execute()'s wall time per step it gives the time a
  // step spends outside the GPU's work: metadata copy, launch, token copy and host wake-up.
  // with_copies: each replay also copies the metadata in and the tokens out, as a step does.
  double time_graph_replays(const gpuscout::infer::StepPlan& plan, int replays, bool with_copies = false);

 private:
  struct Impl;
  explicit CudaEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuscout::cuda::infer
