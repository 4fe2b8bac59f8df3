#pragma once
// What `gpuscout bench --only serve` measures, as the CLI validated it (before any GPU is touched).
// The arithmetic of its figures (prefill FLOPs, decode bytes and roofline, prefill vs the run's GEMM)
// is in serve_metrics.hpp, included here for the callers of both. Pure C++17: included by the CUDA
// backend's benchmark.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuscout/bench/serve_metrics.hpp"
#include "gpuscout/infer/transformer_config.hpp"
#include "gpuscout/serve/loadgen.hpp"

namespace gpuscout::bench {

// The catalog model `serve` uses without --model.
inline constexpr const char* kDefaultServeModel = "llama-3.1-8b";
// Runs of the static batch without --static-repeats (PyTorch's baseline, bench/serve_baseline_torch.py,
// also reports the median of 3).
inline constexpr int kDefaultStaticRepeats = 3;

struct ServeOptions {
  infer::TransformerConfig model;  // resolved from the catalog (kDefaultServeModel without --model)
  std::string model_slug;          // lower-case catalog name, the model part of every record key
  int tp = 1;                      // tensor-parallel GPUs (--tp, else the number of --gpus given)
  infer::WeightFormat weights = infer::WeightFormat::bf16;  // --weights: projection matrices BF16 or FP8
  std::vector<int> decode_batches{1, 8, 32};                // --serve-batch: decode roofline cases
  std::vector<int> prefill_tokens{8192};                    // --serve-prefill: one prompt of each length
  int isl = 512, osl = 128;                    // decode context; static batch prompt/output lengths; fixed load lengths
  int static_repeats = kDefaultStaticRepeats;  // --static-repeats: runs of the static batch (serve::repeated_record)
  double range_ratio = 0;                      // --range-ratio: load lengths uniform in [L(1 - R), L(1 + R)]; 0: fixed
  // --scenario (or --find-peak, which implies server): the load-generator case; absent: not run.
  std::optional<serve::LoadSettings> load;
  // The load points of that run: --rate R1,R2,... (Server) or --concurrency N1,N2,... (Concurrency),
  // the first also in `load`. Two or more make a latency-vs-throughput sweep on one engine: a record
  // per point, each passed whether VALID or not (serve::sweep_records).
  std::vector<double> rates;
  std::vector<int> concurrencies;
  bool default_warmup = true;  // no --warmup: each point's warm-up is serve::default_warmup's
  bool find_peak = false;
  serve::PeakSearch peak;
  std::int64_t kv_blocks = 0;  // --kv-blocks: cap on the engine's KV-cache blocks; 0: as memory allows
  int max_batch = 0;           // --max-batch: the engine's largest decode batch; 0: its default
  // --engine-tuning: GEMM kernel choices that per-call timing found close are settled inside whole
  // decode steps of each CUDA graph (steps), or left as per-call timing made them (alone: shorter
  // start-up, and the step time can move between engines; docs/serving.md).
  bool gemm_ties_in_steps = true;
  // --stepping: pipelined (default): the host submits a step before it collects the one running
  // (EngineSut::set_pipelined), so its collect, scheduling and launch overlap the GPU's work;
  // synchronous: each step is launched after the previous one's tokens are back.
  bool pipelined_steps = true;
  // --max-step-tokens: the scheduler's token budget per step (decode tokens + prefill chunk tokens)
  // in the static batch and the load runs; 0: step_token_budget()'s defaults.
  int max_step_tokens = 0;
  // Longest sequence any case needs (prompt + output), for the engine's context.
  int max_sequence_tokens() const;
};

// The scheduler's token budget per step for a load scenario on a GPU: --max-step-tokens when given,
// else vLLM's defaults (EngineArgs.get_batch_defaults), so that a run compares with vLLM's as users
// launch it: on GPUs with at least 70 GiB other than the A100, 16384 tokens offline (its LLM class)
// and 8192 online (its API server: here server, single-stream and concurrency); on other GPUs 8192
// and 2048.
int step_token_budget(const ServeOptions& options, serve::Scenario scenario, std::uint64_t device_memory_bytes,
                      std::string_view device_name);

// Whether a --only selector names the benchmark `key` itself or one of its cases ("serve",
// "serve/decode"), as an opt-in benchmark (serve) must be named: a prefix of its key ("s") or an
// empty --only does not select it.
bool names_benchmark(const std::vector<std::string>& selectors, std::string_view key);

// "Llama-3.1-8B" -> "llama-3.1-8b" (record keys are lower case on every machine).
std::string model_slug(std::string_view catalog_name);

}  // namespace gpuscout::bench
