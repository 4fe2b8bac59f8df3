// The CUDA serving engine (engine.hpp): weights generated in place (BF16, or FP8 E4M3
// projections), paged KV cache, cuBLASLt or skinny GEMMs chosen by timing, decode steps replayed
// from CUDA graphs, tensor parallelism.
//
// Tensor parallelism (Megatron): QKV and gate/up are column-parallel (each rank holds its heads'
// rows and its FFN slice), O and down are row-parallel (each rank holds the matching input
// columns), so each rank's O/down product is a partial sum. Rank 0 runs them with beta = 1 into
// the residual stream (h + y_0), the other ranks with beta = 0 into their copy of it (y_r), and one
// in-place all-reduce of the residual leaves h + sum_r y_r on every rank: one GEMM and one
// collective per projection, no extra add kernel, and every rank's residual stays identical (the
// all-reduce result is the same on all ranks), which the trick relies on.
//
// LM head: sharded by vocabulary rows, not replicated. A decode step streams the whole head, so a
// replica costs each GPU tp times the bytes of a shard (Llama-3.1-70B at TP2: 2.1 GB instead of
// 1.05 GB, ~0.25 ms more per step at 4.3 TB/s, plus 1 GB of memory), while sharding adds only an
// all-gather of one (index, value) pair per sampled row and rank and a merge kernel.
//
// One host thread per rank (rank 0 is the caller's): each thread enqueues its GPU's step, captures
// its own graphs and makes its own NCCL calls, as one process per GPU would; the host work of a
// step (hundreds of launches when eager) runs in parallel and no cross-device NCCL group is needed.
//
// No hangs (TP > 1): each rank waits for its stream by polling (bench::wait_or_abort) instead of
// blocking, together with ncclCommGetAsyncError and a flag any failed rank sets; a failure or the
// collective timeout aborts every communicator, so a peer stuck in an all-reduce returns. A host
// call that blocks inside NCCL (init, first connections) is covered by a DeadlineGuard that ends
// the process with a message, since no thread could return from it.
#include "engine.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#if defined(GPUSCOUT_HAVE_NCCL)
#include <nccl.h>
#endif

#include "engine_gemm.hpp"
#include "gpuscout/bench/stats.hpp"
#include "gpuscout/bench/watchdog.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/infer/weights.hpp"
#include "gpuscout/util/error.hpp"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace gi = gpuscout::infer;
using gi::WeightKind;

namespace {

constexpr std::size_t kAlign = 256;  // cuBLASLt's default operand alignment assumption
constexpr std::size_t kLtWorkspaceBytes = 32ull << 20;
constexpr int kDefaultMaxContext = 32768;
constexpr double kGB = 1e9;

std::size_t align_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}
int ceil_div(std::int64_t a, std::int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

#if defined(GPUSCOUT_HAVE_NCCL)
void nccl_check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw gpuscout::Error(fmt::format("{} failed: {} ({})", what, ncclGetErrorString(rc), static_cast<int>(rc)));
}
#endif

// Hands out aligned pieces of one allocation. Run the same sequence of take() twice: once with a
// null base to learn the size, once on the allocation.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* take(std::size_t count) {
    const std::size_t at = used_;
    used_ = align_up(used_ + count * sizeof(T), kAlign);
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + at);
  }
  std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

// The shapes one rank holds.
struct Shard {
  int tp = 1, rank = 0;
  int heads = 0, kv_heads = 0, q_dim = 0, kv_dim = 0, qkv_dim = 0, ffn = 0;
  int vocab_begin = 0, vocab_count = 0, vocab_stride = 0;  // LM head rows [begin, begin + count)
};

Shard make_shard(const gi::TransformerConfig& c, int tp, int rank) {
  Shard s;
  s.tp = tp;
  s.rank = rank;
  s.heads = c.heads / tp;
  s.kv_heads = c.kv_heads / tp;
  s.q_dim = s.heads * c.head_dim;
  s.kv_dim = s.kv_heads * c.head_dim;
  s.qkv_dim = s.q_dim + 2 * s.kv_dim;
  s.ffn = c.ffn_hidden / tp;
  s.vocab_stride = ceil_div(c.vocab, tp);
  s.vocab_begin = std::min(c.vocab, rank * s.vocab_stride);
  s.vocab_count = std::min(c.vocab, s.vocab_begin + s.vocab_stride) - s.vocab_begin;
  return s;
}

// Weight bytes one GPU holds at tensor-parallel degree `tp` (the largest shard): BF16, or FP8
// projection matrices (1 byte) with BF16 embedding, norms, QKV biases and LM head.
std::int64_t weight_bytes_per_gpu(const gi::TransformerConfig& c, int tp, bool fp8) {
  const Shard s = make_shard(c, tp, 0);
  const std::int64_t h = c.hidden;
  const std::int64_t projections = static_cast<std::int64_t>(s.qkv_dim) * h + h * s.q_dim + 3ll * s.ffn * h;
  std::int64_t bf16_elements = c.layers * 2 * h + static_cast<std::int64_t>(c.vocab) * h + h;
  if (!c.tied_embeddings) bf16_elements += static_cast<std::int64_t>(s.vocab_stride) * h;
  if (c.qkv_bias) bf16_elements += static_cast<std::int64_t>(c.layers) * s.qkv_dim;
  return 2 * bf16_elements + c.layers * projections * (fp8 ? 1 : 2);
}

std::int64_t kv_bytes_per_block(const gi::TransformerConfig& c, int tp, int block_size) {
  return static_cast<std::int64_t>(c.layers) * 2 * (c.kv_heads / tp) * block_size * c.head_dim * 2;
}

// Offsets (in int32 units) of a step's metadata, one packed block copied with one cudaMemcpyAsync.
// A function of the step's sizes only, so a decode bucket always gets the same addresses (graphs).
struct MetaLayout {
  std::size_t tokens = 0, positions = 0, slots = 0;
  std::size_t dec_q_start = 0, dec_q_len = 0, dec_ctx = 0, pre_q_start = 0, pre_q_len = 0, pre_ctx = 0;
  std::size_t sample_rows = 0, dec_tables = 0, pre_tables = 0;
  // The last layer's attention for the sampling rows only (StepDims::nl): one query each.
  std::size_t last_q_start = 0, last_q_len = 0, last_ctx = 0, last_tables = 0;
  std::size_t words = 0;

  static MetaLayout make(int rows, int nd, int np, int ns, int mbps_d, int mbps_p, int nl = 0, int mbps_l = 1) {
    MetaLayout m;
    std::size_t at = 0;
    auto take = [&at](std::size_t n) {
      const std::size_t o = at;
      at += align_up(n, 4);  // 16-byte aligned arrays
      return o;
    };
    m.tokens = take(rows);
    m.positions = take(rows);
    m.slots = take(rows);
    m.dec_q_start = take(nd);
    m.dec_q_len = take(nd);
    m.dec_ctx = take(nd);
    m.pre_q_start = take(np);
    m.pre_q_len = take(np);
    m.pre_ctx = take(np);
    m.sample_rows = take(ns);
    m.dec_tables = take(static_cast<std::size_t>(nd) * mbps_d);
    m.pre_tables = take(static_cast<std::size_t>(np) * mbps_p);
    m.last_q_start = take(nl);
    m.last_q_len = take(nl);
    m.last_ctx = take(nl);
    m.last_tables = take(static_cast<std::size_t>(nl) * mbps_l);
    m.words = at;
    return m;
  }
};

// What one step computes, as the kernels need it.
struct StepDims {
  MetaLayout meta;
  int rows = 0;  // token rows (decode rows first)
  int nd = 0;    // decode sequences (rows [0, nd))
  int np = 0;    // prefill chunks
  int ns = 0;    // sampling rows
  int mbps_d = 1, mbps_p = 1;
  int dec_max_ctx = 0, pre_max_ctx = 0, pre_max_q = 0;
  // Steps with prefill chunks (EngineOptions::prune_last_layer): the last layer runs attention,
  // o and the MLP for the ns sampling rows only (nl = ns, maybe 0), over contexts up to last_max_ctx.
  bool prune_last = false;
  int nl = 0, mbps_l = 1, last_max_ctx = 0;
  DecodeAttentionPlan attention;  // a decode bucket's timed plan; automatic elsewhere
};

// Runs fn(rank) for every rank at once: rank 0 on the calling thread, the others on one persistent
// thread each (their CUDA device stays current there). Rethrows the first failure.
class RankPool {
 public:
  explicit RankPool(int ranks) : errors_(static_cast<std::size_t>(ranks)) {
    for (int r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { worker(r); });
  }
  ~RankPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  RankPool(const RankPool&) = delete;
  RankPool& operator=(const RankPool&) = delete;

  void run(const std::function<void(int)>& fn) {
    if (threads_.empty()) return fn(0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &fn;
      pending_ = static_cast<int>(threads_.size());
      ++generation_;
      for (auto& e : errors_) e = nullptr;
    }
    wake_.notify_all();
    try {
      fn(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    for (auto& e : errors_) {
      if (e) std::rethrow_exception(e);
    }
  }

 private:
  void worker(int rank) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      try {
        (*job)(rank);
      } catch (...) {
        errors_[static_cast<std::size_t>(rank)] = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --pending_;
      }
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

struct LayerWeights {
  bf16 *attn_norm = nullptr, *mlp_norm = nullptr;
  void *wqkv = nullptr, *wo = nullptr, *w_gate_up = nullptr, *w_down = nullptr;  // BF16 or E4M3 codes
  bf16* qkv_bias = nullptr;  // [qkv_dim of this rank] when the model has QKV biases
  bf16 *k_cache = nullptr, *v_cache = nullptr;
};

// The GEMM classes with FP8 weights, in the order of their scales on the GPU.
enum Fp8Class { fp8_qkv, fp8_o, fp8_gate_up, fp8_down, fp8_classes };
constexpr int kFp8ScaleStride = static_cast<int>(kAlign / sizeof(float));

// Everything one GPU holds.
struct Rank {
  int rank = 0, device = 0;
  Shard shard;
  cudaStream_t stream = nullptr;
#if defined(GPUSCOUT_HAVE_NCCL)
  ncclComm_t comm = nullptr;
#endif
  char *weight_mem = nullptr, *work_mem = nullptr, *kv_mem = nullptr;
  std::size_t weight_bytes = 0, work_bytes = 0, kv_bytes = 0;
  std::size_t free_after_weights = 0;
  bf16 *embedding = nullptr, *final_norm = nullptr, *lm_head = nullptr;
  std::vector<LayerWeights> layers;
  // Activations (rows_cap rows unless said) and step buffers.
  bf16 *h = nullptr, *xn = nullptr, *qkv = nullptr, *attn = nullptr, *gu = nullptr, *act = nullptr;
  bf16 *gathered = nullptr, *gathered_norm = nullptr, *logits = nullptr;  // max_running rows
  bf16* qkv_sampled = nullptr;  // max_running rows of qkv: the pruned last layer's queries
  std::int32_t *cand_index = nullptr, *all_index = nullptr, *sampled = nullptr;
  float *cand_value = nullptr, *all_value = nullptr;
  void *attn_workspace = nullptr, *lt_workspace = nullptr;
  // A step's metadata, one buffer per pipeline slot: slot s's copy goes in on copy_stream while the
  // other slot's step runs, and the step waits for it (meta_ready) instead of a copy in its stream.
  std::array<std::int32_t*, 2> meta{nullptr, nullptr};
  cudaStream_t copy_stream = nullptr;
  std::array<cudaEvent_t, 2> meta_ready{nullptr, nullptr};
  // Recorded after a step, one per pipeline slot (CudaEngine::submit): what collect() waits for,
  // where the stream may already hold the next step.
  std::array<cudaEvent_t, 2> step_done{nullptr, nullptr};
  // FP8 weights only: quantized activations, the quantization's scratch words, per-class scales.
  std::uint8_t* x_fp8 = nullptr;
  std::size_t x_fp8_bytes = 0;
  Fp8Scratch fp8_scratch;
  float* fp8_scales = nullptr;  // class c's scale at fp8_scales[c * kFp8ScaleStride]
  std::unique_ptr<GemmRunner> gemm;
  int g_qkv = 0, g_o = 0, g_gate_up = 0, g_down = 0, g_lm = 0;
  // (decode bucket, context class) -> replayable step, one graph per pipeline slot (its metadata
  // buffer and token destination).
  std::map<std::pair<int, int>, std::array<cudaGraphExec_t, 2>> graphs;
};

}  // namespace

struct CudaEngine::Impl {
  gi::TransformerConfig cfg;
  EngineOptions opt;
  EngineInfo info;
  int tp = 1;
  int max_context = 0, mbps = 0, rows_cap = 0, max_running = 0, max_step_tokens = 0;
  std::vector<int> buckets;
  // Graph keys besides the bucket: the bound on the context the decode attention grid is sized for
  // (its splits follow it), so short contexts do not launch and merge the splits of the longest.
  std::vector<int> ctx_classes;
  // (bucket, context class) -> the decode attention plan timed fastest there (tune_attention).
  std::map<std::pair<int, int>, DecodeAttentionPlan> attention_plans;
  AttentionShape shape;
  std::vector<std::unique_ptr<Rank>> ranks;
  std::unique_ptr<RankPool> pool;
  // Pinned, one block per pipeline slot (two steps may be outstanding): the step's metadata and
  // its sampled tokens. `staging` is the current slot's block, which fill_step writes. The tokens
  // are mapped: the last kernel of a step writes them there itself (no copy after the step).
  std::int32_t* staging_mem = nullptr;
  std::int32_t* tokens_mem = nullptr;
  std::array<std::int32_t*, 2> tokens_device{nullptr, nullptr};  // tokens_mem's slots as the GPUs see them
  std::int32_t* staging = nullptr;
  std::size_t meta_words_cap = 0;
  // Pipelined stepping: steps submitted and not yet collected, oldest first, and the sampling rows
  // of the last submitted one by sequence (where a later decode chunk's pending token comes from).
  struct Submitted {
    int slot = 0, sampled = 0, graph_batch = 0, index = 0;
  };
  std::deque<Submitted> submitted;
  int next_slot = 0;
  std::unordered_map<std::uint64_t, int> previous_sampling;
  bool keep = false;
  std::vector<std::vector<float>> logits;
  int executed_steps = 0;
  // TP fault handling (see the header comment).
  std::atomic<bool> rank_failed{false};
  std::mutex fault_mutex;
  std::string first_fault;  // the root cause: the first rank's error
  std::atomic<bool> comms_aborted{false};
  std::string broken;  // set once a TP step failed: later steps are refused
  std::unique_ptr<gpuscout::bench::DeadlineGuard> host_guard;

  ~Impl();
  // Runs fn on every rank; under TP, a rank's failure aborts the communicators, the engine is
  // marked broken and the root cause is rethrown with the ranks named.
  // `what` and `index` name the step in messages ("step 12"); formatted only when needed.
  void run_ranks(const char* what, int index, const std::function<void(int)>& fn);
  // graph_batch > 0: the step replays that batch bucket's graph (named in messages).
  void wait_rank(Rank& r, int graph_batch, int slot);
  void abort_comms();
  void allocate_and_init_weights(Rank& r);
  void allocate_workspace(Rank& r, bool count_only);
  // One forward pass over the step whose metadata is in r.meta[slot]; rank 0 also writes the
  // sampled tokens to tokens_device[slot].
  void forward(Rank& r, const StepDims& d, cudaStream_t stream, int slot);
  void all_reduce(Rank& r, bf16* buf, std::size_t count, cudaStream_t stream);
  StepDims fill_step(const gi::StepPlan& plan, int bucket, int ctx_class);
  StepDims fill_padding(int bucket, int ctx_class);
  int bucket_for(int n) const;
  // How execute() runs a plan: its decode bucket (0: not decode-only), context class, graph key
  // (first 0: eager) and sampled rows.
  struct StepKey {
    int bucket = 0, ctx_class = 0, sampled = 0;
    std::pair<int, int> graph{0, 0};
  };
  StepKey key_for(const gi::StepPlan& plan) const;
  // The graph of one pipeline slot. Start-up timing captures and re-captures slot 0 only; slot 1
  // is captured once the choices are final (by resolve_gemm_ties where it settles ties, else at
  // the end of create()).
  void capture(Rank& r, std::pair<int, int> key, const StepDims& d, int slot);
  // key.first 0: eager. launch_on_rank queues the step (metadata copy from the current staging
  // block into meta[slot] on the copy stream, graph or kernels of `slot`, step_done[slot]);
  // step_on_rank also waits for it.
  void launch_on_rank(Rank& r, const StepDims& d, std::pair<int, int> key, int slot);
  void step_on_rank(Rank& r, const StepDims& d, std::pair<int, int> key);
  void tune(Rank& r, std::vector<std::string>& lines);
  void tune_attention(Rank& r, std::vector<std::string>& lines);
  void resolve_gemm_ties(std::vector<std::string>& lines);
};

CudaEngine::Impl::~Impl() {
  pool.reset();
  host_guard.reset();
  for (auto& r : ranks) {
    if (!r) continue;
    GPUSCOUT_CUDA_CHECK_NOTHROW(cudaSetDevice(r->device));
    if (r->stream) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(r->stream));
    if (r->copy_stream) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(r->copy_stream));
    for (cudaEvent_t ev : r->step_done) {
      if (ev) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaEventDestroy(ev));
    }
    for (cudaEvent_t ev : r->meta_ready) {
      if (ev) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaEventDestroy(ev));
    }
    for (auto& [b, g] : r->graphs) {
      for (cudaGraphExec_t exec : g) {
        if (exec) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
      }
    }
    r->gemm.reset();
#if defined(GPUSCOUT_HAVE_NCCL)
    if (r->comm && !comms_aborted) (void)ncclCommDestroy(r->comm);
#endif
    for (char* p : {r->weight_mem, r->work_mem, r->kv_mem}) {
      if (p) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFree(p));
    }
    if (r->stream) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamDestroy(r->stream));
    if (r->copy_stream) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaStreamDestroy(r->copy_stream));
  }
  if (staging_mem) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFreeHost(staging_mem));
  if (tokens_mem) GPUSCOUT_CUDA_CHECK_NOTHROW(cudaFreeHost(tokens_mem));
}

// Weights of one rank in one allocation: embedding (replicated), per layer the norms (replicated),
// fused QKV rows [q shard | k shard | v shard] of [qkv, hidden], the O shard (its q columns of
// [hidden, q_dim]), fused gate/up rows [gate shard | up shard], the down shard (its FFN columns of
// [hidden, ffn]); final norm; the LM head's vocabulary rows of this rank (or the embedding's rows
// when tied).
void CudaEngine::Impl::allocate_and_init_weights(Rank& r) {
  const Shard& s = r.shard;
  const int hidden = cfg.hidden;
  const bool fp8 = opt.fp8_weights;
  const std::size_t weight_size = fp8 ? 1 : sizeof(bf16);
  auto layout = [&](Carver& c) {
    auto projection = [&](std::size_t count) -> void* { return c.take<std::uint8_t>(count * weight_size); };
    r.embedding = c.take<bf16>(static_cast<std::size_t>(cfg.vocab) * hidden);
    r.layers.assign(static_cast<std::size_t>(cfg.layers), {});
    for (auto& l : r.layers) {
      l.attn_norm = c.take<bf16>(hidden);
      l.wqkv = projection(static_cast<std::size_t>(s.qkv_dim) * hidden);
      if (cfg.qkv_bias) l.qkv_bias = c.take<bf16>(s.qkv_dim);
      l.wo = projection(static_cast<std::size_t>(hidden) * s.q_dim);
      l.mlp_norm = c.take<bf16>(hidden);
      l.w_gate_up = projection(2ull * s.ffn * hidden);
      l.w_down = projection(static_cast<std::size_t>(hidden) * s.ffn);
    }
    r.final_norm = c.take<bf16>(hidden);
    r.lm_head = cfg.tied_embeddings ? nullptr : c.take<bf16>(static_cast<std::size_t>(s.vocab_count) * hidden);
  };
  Carver count(nullptr);
  layout(count);
  r.weight_bytes = count.used();
  GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.weight_mem, r.weight_bytes));
  Carver carve(r.weight_mem);
  layout(carve);
  if (cfg.tied_embeddings) r.lm_head = r.embedding + static_cast<std::size_t>(s.vocab_begin) * hidden;

  const std::uint64_t seed = opt.weight_seed;
  cudaStream_t st = r.stream;
  auto at = [&](void* base, std::size_t elements) -> void* {
    return static_cast<char*>(base) + elements * weight_size;
  };
  auto init = [&](void* dst, WeightKind kind, int layer, int in, std::int64_t row0, std::int64_t rows,
                  std::int64_t col0, std::int64_t cols) {
    const bool projection = kind != WeightKind::embedding && kind != WeightKind::attn_norm &&
                            kind != WeightKind::mlp_norm && kind != WeightKind::final_norm &&
                            kind != WeightKind::lm_head && kind != WeightKind::qkv_bias;
    if (fp8 && projection) {
      launch_init_weights_fp8(static_cast<std::uint8_t*>(dst), seed, kind, static_cast<std::uint32_t>(layer), in, row0,
                              rows, col0, cols, gi::fp8_weight_scale(in), st);
    } else {
      launch_init_weights(static_cast<bf16*>(dst), seed, kind, static_cast<std::uint32_t>(layer), in, row0, rows, col0,
                          cols, st);
    }
    GPUSCOUT_CUDA_CHECK_LAUNCH();
  };
  init(r.embedding, WeightKind::embedding, 0, hidden, 0, cfg.vocab, 0, hidden);
  for (int i = 0; i < cfg.layers; ++i) {
    const LayerWeights& l = r.layers[static_cast<std::size_t>(i)];
    init(l.attn_norm, WeightKind::attn_norm, i, hidden, 0, 1, 0, hidden);
    init(l.wqkv, WeightKind::wq, i, hidden, static_cast<std::int64_t>(s.rank) * s.q_dim, s.q_dim, 0, hidden);
    init(at(l.wqkv, static_cast<std::size_t>(s.q_dim) * hidden), WeightKind::wk, i, hidden,
         static_cast<std::int64_t>(s.rank) * s.kv_dim, s.kv_dim, 0, hidden);
    init(at(l.wqkv, static_cast<std::size_t>(s.q_dim + s.kv_dim) * hidden), WeightKind::wv, i, hidden,
         static_cast<std::int64_t>(s.rank) * s.kv_dim, s.kv_dim, 0, hidden);
    if (cfg.qkv_bias) {
      // This rank's Q, K and V columns of the full [Q | K | V] bias vector, in the shard's order.
      const std::int64_t full = cfg.qkv_dim();
      init(l.qkv_bias, WeightKind::qkv_bias, i, static_cast<int>(full), 0, 1,
           static_cast<std::int64_t>(s.rank) * s.q_dim, s.q_dim);
      init(l.qkv_bias + s.q_dim, WeightKind::qkv_bias, i, static_cast<int>(full), 0, 1,
           cfg.q_dim() + static_cast<std::int64_t>(s.rank) * s.kv_dim, s.kv_dim);
      init(l.qkv_bias + s.q_dim + s.kv_dim, WeightKind::qkv_bias, i, static_cast<int>(full), 0, 1,
           cfg.q_dim() + cfg.kv_dim() + static_cast<std::int64_t>(s.rank) * s.kv_dim, s.kv_dim);
    }
    init(l.wo, WeightKind::wo, i, cfg.q_dim(), 0, hidden, static_cast<std::int64_t>(s.rank) * s.q_dim, s.q_dim);
    init(l.mlp_norm, WeightKind::mlp_norm, i, hidden, 0, 1, 0, hidden);
    init(l.w_gate_up, WeightKind::w_gate, i, hidden, static_cast<std::int64_t>(s.rank) * s.ffn, s.ffn, 0, hidden);
    init(at(l.w_gate_up, static_cast<std::size_t>(s.ffn) * hidden), WeightKind::w_up, i, hidden,
         static_cast<std::int64_t>(s.rank) * s.ffn, s.ffn, 0, hidden);
    init(l.w_down, WeightKind::w_down, i, cfg.ffn_hidden, 0, hidden, static_cast<std::int64_t>(s.rank) * s.ffn, s.ffn);
  }
  init(r.final_norm, WeightKind::final_norm, 0, hidden, 0, 1, 0, hidden);
  if (!cfg.tied_embeddings) init(r.lm_head, WeightKind::lm_head, 0, hidden, s.vocab_begin, s.vocab_count, 0, hidden);
  GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(st));
}

// Activations for rows_cap token rows, sampling buffers for max_running rows, the decode attention
// split workspace, cuBLASLt's workspace and the metadata block.
void CudaEngine::Impl::allocate_workspace(Rank& r, bool count_only) {
  const Shard& s = r.shard;
  const std::size_t rows = static_cast<std::size_t>(rows_cap);
  const std::size_t sr = static_cast<std::size_t>(max_running);
  const std::size_t hidden = static_cast<std::size_t>(cfg.hidden);
  // gu doubles as the random input of GEMM tuning, logits as its output: sized for the widest.
  const std::size_t widest_in = std::max<std::size_t>({2ull * s.ffn, hidden, static_cast<std::size_t>(s.q_dim)});
  const std::size_t widest_out = std::max<std::size_t>(
      {static_cast<std::size_t>(s.vocab_count), static_cast<std::size_t>(s.qkv_dim), hidden, 2ull * s.ffn});
  auto layout = [&](Carver& c) {
    r.h = c.take<bf16>(rows * hidden);
    r.xn = c.take<bf16>(rows * hidden);
    r.qkv = c.take<bf16>(rows * s.qkv_dim);
    r.attn = c.take<bf16>(rows * s.q_dim);
    r.gu = c.take<bf16>(rows * widest_in);
    r.act = c.take<bf16>(rows * s.ffn);
    r.gathered = c.take<bf16>(sr * hidden);
    r.qkv_sampled = c.take<bf16>(sr * s.qkv_dim);
    r.gathered_norm = c.take<bf16>(sr * hidden);
    r.logits = c.take<bf16>(sr * widest_out);
    r.cand_index = c.take<std::int32_t>(sr);
    r.cand_value = c.take<float>(sr);
    r.all_index = c.take<std::int32_t>(sr * static_cast<std::size_t>(tp));
    r.all_value = c.take<float>(sr * static_cast<std::size_t>(tp));
    r.sampled = c.take<std::int32_t>(sr);
    r.attn_workspace = c.take<char>(decode_attention_workspace_bytes(max_running, s.heads, cfg.head_dim, max_context));
    r.lt_workspace = c.take<char>(kLtWorkspaceBytes);
    for (auto& m : r.meta) m = c.take<std::int32_t>(meta_words_cap);
    if (opt.fp8_weights) {
      r.x_fp8_bytes =
          rows * std::max<std::size_t>({hidden, static_cast<std::size_t>(s.q_dim), static_cast<std::size_t>(s.ffn)});
      r.x_fp8 = c.take<std::uint8_t>(r.x_fp8_bytes);
      r.fp8_scratch.amax_bits = c.take<unsigned>(1);
      r.fp8_scratch.blocks_done = c.take<unsigned>(1);
      r.fp8_scratch.scale = c.take<float>(1);
      // One 256-byte slot per scale: cuBLASLt refuses (at the matmul) a scale pointer that is not
      // aligned like an allocation, which the second float of a packed array is not.
      r.fp8_scales = c.take<float>(fp8_classes * kFp8ScaleStride);
    }
  };
  Carver count(nullptr);
  layout(count);
  r.work_bytes = count.used();
  if (count_only) return;
  GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.work_mem, r.work_bytes));
  Carver carve(r.work_mem);
  layout(carve);
  // Rows a step leaves unwritten (padding rows of a decode bucket skip attention) stay finite.
  GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(r.work_mem, 0, r.work_bytes, r.stream));
}

void CudaEngine::Impl::all_reduce(Rank& r, bf16* buf, std::size_t count, cudaStream_t stream) {
#if defined(GPUSCOUT_HAVE_NCCL)
  if (tp > 1) nccl_check(ncclAllReduce(buf, buf, count, ncclBfloat16, ncclSum, r.comm, stream), "ncclAllReduce");
#else
  (void)r, (void)buf, (void)count, (void)stream;
#endif
}

void CudaEngine::Impl::forward(Rank& r, const StepDims& d, cudaStream_t st, int slot) {
  const Shard& s = r.shard;
  const int hidden = cfg.hidden;
  const std::int32_t* m = r.meta[static_cast<std::size_t>(slot)];
  std::int32_t* tokens_out = r.rank == 0 ? tokens_device[static_cast<std::size_t>(slot)] : nullptr;
  const MetaLayout& L = d.meta;
  const bool first = r.rank == 0;  // adds the residual; the others add their partial sums to it
  auto batch = [m](std::size_t q_start, std::size_t q_len, std::size_t ctx, std::size_t tables, int mbps, int seqs,
                   int max_ctx, int max_q) {
    AttentionBatch b;
    b.q_start = m + q_start;
    b.q_len = m + q_len;
    b.context_len = m + ctx;
    b.block_tables = m + tables;
    b.max_blocks_per_seq = mbps;
    b.num_seqs = seqs;
    b.max_context = max_ctx;
    b.max_q_len = max_q;
    return b;
  };
  const AttentionBatch dec =
      batch(L.dec_q_start, L.dec_q_len, L.dec_ctx, L.dec_tables, d.mbps_d, d.nd, d.dec_max_ctx, 1);
  const AttentionBatch pre =
      batch(L.pre_q_start, L.pre_q_len, L.pre_ctx, L.pre_tables, d.mbps_p, d.np, d.pre_max_ctx, d.pre_max_q);
  const AttentionBatch last =
      batch(L.last_q_start, L.last_q_len, L.last_ctx, L.last_tables, d.mbps_l, d.nl, d.last_max_ctx, 1);

  launch_embedding(m + L.tokens, d.rows, r.embedding, hidden, r.h, st, r.sampled);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  const unsigned skip = opt.knock_out;
  // Prefill-sized steps: the gate/up GEMM with SwiGLU in its epilogue, where the engine has it.
  const bool swiglu_fused = info.swiglu_min_rows > 0 && d.rows >= info.swiglu_min_rows;
  for (const LayerWeights& l : r.layers) {
    const bool pruned = d.prune_last && &l == &r.layers.back();
    // The RMSNorms and SiLU * up go into the ring GEMV where a GEMM of one row runs on it
    // (GemmRunner::run_normed, run_silu_mul).
    if (skip & knock_out_norms) {
      r.gemm->run(r.g_qkv, d.rows, r.xn, l.wqkv, r.qkv, false, st);
    } else {
      r.gemm->run_normed(r.g_qkv, d.rows, r.h, l.attn_norm, cfg.norm_eps, r.xn, l.wqkv, r.qkv, st);
    }
    if (!(skip & knock_out_rope)) {
      launch_rope_store_kv(r.qkv, s.qkv_dim, m + L.positions, m + L.slots, d.rows, shape,
                           static_cast<float>(cfg.rope_theta), l.k_cache, l.v_cache, st, l.qkv_bias);
    }
    if (pruned) {
      // The last layer's K/V are stored; only the sampling rows go on (their hidden states feed the
      // LM head): their queries and residual rows gathered, one-query attention over their whole
      // contexts, then o and the MLP on ns rows in r.gathered. A step of prompt chunks that complete
      // no prompt samples nothing: its last layer ends here.
      if (d.ns == 0) break;
      launch_gather_rows(r.qkv, m + L.sample_rows, d.ns, s.qkv_dim, r.qkv_sampled, st);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
      launch_gather_rows(r.h, m + L.sample_rows, d.ns, hidden, r.gathered, st);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
      if (!(skip & knock_out_attention)) {
        launch_decode_attention(r.qkv_sampled, s.qkv_dim, l.k_cache, l.v_cache, last, shape, r.attn_workspace, r.attn,
                                s.q_dim, st, DecodeAttentionPlan{});
      }
      r.gemm->run(r.g_o, d.ns, r.attn, l.wo, r.gathered, first, st);
      all_reduce(r, r.gathered, static_cast<std::size_t>(d.ns) * hidden, st);
      r.gemm->run_normed(r.g_gate_up, d.ns, r.gathered, l.mlp_norm, cfg.norm_eps, r.xn, l.w_gate_up, r.gu, st);
      r.gemm->run_silu_mul(r.g_down, d.ns, r.gu, r.act, l.w_down, r.gathered, first, st);
      all_reduce(r, r.gathered, static_cast<std::size_t>(d.ns) * hidden, st);
      break;
    }
    if (d.nd > 0 && !(skip & knock_out_attention)) {
      launch_decode_attention(r.qkv, s.qkv_dim, l.k_cache, l.v_cache, dec, shape, r.attn_workspace, r.attn, s.q_dim, st,
                              d.attention);
    }
    if (d.np > 0 && !(skip & knock_out_attention)) {
      launch_prefill_attention(r.qkv, s.qkv_dim, l.k_cache, l.v_cache, pre, shape, r.attn, s.q_dim, st);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
    }
    r.gemm->run(r.g_o, d.rows, r.attn, l.wo, r.h, first, st);
    all_reduce(r, r.h, static_cast<std::size_t>(d.rows) * hidden, st);
    if (swiglu_fused && !(skip & (knock_out_norms | knock_out_silu))) {
      launch_rmsnorm(r.h, l.mlp_norm, d.rows, hidden, cfg.norm_eps, r.xn, st);
      GPUSCOUT_CUDA_CHECK_LAUNCH();
      if (!launch_gate_up_swiglu(r.xn, d.rows, hidden, static_cast<const bf16*>(l.w_gate_up), s.ffn, r.act, st,
                                 swiglu_epilogue_by_default())) {
        throw std::logic_error("the gate/up SwiGLU GEMM refused a shape the engine checked at start-up");
      }
      r.gemm->run(r.g_down, d.rows, r.act, l.w_down, r.h, first, st);
      all_reduce(r, r.h, static_cast<std::size_t>(d.rows) * hidden, st);
      continue;
    }
    if (skip & knock_out_norms) {
      r.gemm->run(r.g_gate_up, d.rows, r.xn, l.w_gate_up, r.gu, false, st);
    } else {
      r.gemm->run_normed(r.g_gate_up, d.rows, r.h, l.mlp_norm, cfg.norm_eps, r.xn, l.w_gate_up, r.gu, st);
    }
    if (skip & knock_out_silu) {
      r.gemm->run(r.g_down, d.rows, r.act, l.w_down, r.h, first, st);
    } else {
      r.gemm->run_silu_mul(r.g_down, d.rows, r.gu, r.act, l.w_down, r.h, first, st);
    }
    all_reduce(r, r.h, static_cast<std::size_t>(d.rows) * hidden, st);
  }
  // Only the sampling rows go through the final norm and the LM head (a pruned last layer left
  // them in r.gathered).
  if (!d.prune_last) {
    launch_gather_rows(r.h, m + L.sample_rows, d.ns, hidden, r.gathered, st);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
  }
  launch_rmsnorm(r.gathered, r.final_norm, d.ns, hidden, cfg.norm_eps, r.gathered_norm, st);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  r.gemm->run(r.g_lm, d.ns, r.gathered_norm, r.lm_head, r.logits, false, st);
  if (tp == 1) {
    launch_argmax(r.logits, d.ns, s.vocab_count, 0, r.sampled, nullptr, st, tokens_out);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    return;
  }
#if defined(GPUSCOUT_HAVE_NCCL)
  // Per vocabulary shard the best (index, value), all-gathered [ranks, rows], then merged.
  launch_argmax(r.logits, d.ns, s.vocab_count, s.vocab_begin, r.cand_index, r.cand_value, st);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  nccl_check(ncclAllGather(r.cand_index, r.all_index, static_cast<std::size_t>(d.ns), ncclInt32, r.comm, st),
             "ncclAllGather");
  nccl_check(ncclAllGather(r.cand_value, r.all_value, static_cast<std::size_t>(d.ns), ncclFloat32, r.comm, st),
             "ncclAllGather");
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  launch_argmax_merge(r.all_index, r.all_value, tp, d.ns, r.sampled, st, tokens_out);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
#endif
}

int CudaEngine::Impl::bucket_for(int n) const {
  for (int b : buckets) {
    if (b >= n) return b;
  }
  return 0;
}

// Host metadata of a plan into the pinned staging block. bucket > 0: a decode-only step padded to
// `bucket` rows with the fixed layout of that bucket's graph.
StepDims CudaEngine::Impl::fill_step(const gi::StepPlan& plan, int bucket, int ctx_class) {
  const int bs = opt.kv_block_size;
  StepDims d;
  int rows = 0, nd = 0, np = 0, ns = 0;
  bool in_decode = true;
  for (const auto& c : plan.chunks) {
    const int n = static_cast<int>(c.tokens.size());
    if (n <= 0) throw std::invalid_argument("CudaEngine::execute: a chunk without tokens");
    const std::int64_t end = static_cast<std::int64_t>(c.start_position) + n;
    if (end > max_context) {
      throw gpuscout::UsageError(fmt::format(
          "sequence {} reaches position {}, beyond the engine's context of {} tokens", c.seq_id, end, max_context));
    }
    const int need = ceil_div(end, bs);
    if (static_cast<int>(c.block_table.size()) < need) {
      throw std::invalid_argument(
          fmt::format("CudaEngine::execute: sequence {} has {} KV blocks for {} tokens ({} needed)", c.seq_id,
                      c.block_table.size(), end, need));
    }
    for (int b = 0; b < need; ++b) {
      if (c.block_table[static_cast<std::size_t>(b)] < 0 ||
          c.block_table[static_cast<std::size_t>(b)] >= info.kv_blocks) {
        throw std::invalid_argument(fmt::format("CudaEngine::execute: sequence {} names KV block {} of {}", c.seq_id,
                                                c.block_table[static_cast<std::size_t>(b)], info.kv_blocks));
      }
    }
    const bool dec = in_decode && c.is_decode();
    if (!dec) in_decode = false;
    (dec ? nd : np) += 1;
    if (dec) {
      d.dec_max_ctx = std::max<int>(d.dec_max_ctx, static_cast<int>(end));
      d.mbps_d = std::max(d.mbps_d, need);
    } else {
      d.pre_max_ctx = std::max<int>(d.pre_max_ctx, static_cast<int>(end));
      d.pre_max_q = std::max(d.pre_max_q, n);
      d.mbps_p = std::max(d.mbps_p, need);
    }
    rows += n;
    if (c.samples) {
      ++ns;
      d.mbps_l = std::max(d.mbps_l, need);
      d.last_max_ctx = std::max<int>(d.last_max_ctx, static_cast<int>(end));
    }
  }
  if (rows > rows_cap || ns > max_running || nd > max_running || np > max_running) {
    throw std::invalid_argument(
        fmt::format("CudaEngine::execute: step of {} tokens, {} sequences, {} sampled exceeds the engine's {} tokens / "
                    "{} sequences",
                    rows, nd + np, ns, rows_cap, max_running));
  }
  const int nd_real = nd, rows_real = rows, ns_real = ns;
  if (bucket > 0) {
    // Graph layout: every bucket row is a decode row and samples; the kernels' grids see the
    // engine's limits, not this step's.
    rows = nd = ns = bucket;
    // Block tables as long as the context class needs: the table copy of a batch-32 step at context
    // class 2048 is 16 KB, not the 256 KB of the engine's longest context (32768 tokens).
    d.mbps_d = std::min(mbps, ceil_div(ctx_class, bs));
    d.dec_max_ctx = ctx_class;
    const auto plan_for = attention_plans.find({bucket, ctx_class});
    if (plan_for != attention_plans.end()) d.attention = plan_for->second;
    if (opt.attention_plan_override.kernel != DecodeAttentionPlan::Kernel::automatic) {
      d.attention = opt.attention_plan_override;
    }
  }
  d.rows = rows;
  d.nd = nd;
  d.np = np;
  d.ns = ns;
  // Only steps with prefill chunks have rows the last layer need not finish (decode rows all sample).
  d.prune_last = info.last_layer_pruned && np > 0 && bucket == 0;
  d.nl = d.prune_last ? ns : 0;
  d.meta = MetaLayout::make(rows, nd, np, ns, d.mbps_d, d.mbps_p, d.nl, d.mbps_l);
  std::int32_t* m = staging;
  std::memset(m, 0, d.meta.words * sizeof(std::int32_t));
  int row = 0, di = 0, pi = 0, si = 0;
  for (const auto& c : plan.chunks) {
    const int n = static_cast<int>(c.tokens.size());
    const bool dec = di < nd_real && row == di;  // the leading decode chunks, one row each
    for (int j = 0; j < n; ++j) {
      const int pos = c.start_position + j;
      std::int32_t token = c.tokens[static_cast<std::size_t>(j)];
      if (token == gi::kPendingToken) {
        // Sampled by the step submitted just before (still running): the embedding gather reads it
        // from that step's sampled row, encoded as -(1 + row).
        const auto prev = previous_sampling.find(c.seq_id);
        if (!dec || prev == previous_sampling.end()) {
          throw std::logic_error(fmt::format(
              "CudaEngine: sequence {} has a pending token that the previous step does not sample", c.seq_id));
        }
        token = -1 - prev->second;
      }
      m[d.meta.tokens + row + j] = token;
      m[d.meta.positions + row + j] = pos;
      m[d.meta.slots + row + j] = c.block_table[static_cast<std::size_t>(pos / bs)] * bs + pos % bs;
    }
    const int need = ceil_div(static_cast<std::int64_t>(c.start_position) + n, bs);
    if (dec) {
      m[d.meta.dec_q_start + di] = row;
      m[d.meta.dec_q_len + di] = 1;
      m[d.meta.dec_ctx + di] = c.start_position + 1;
      std::copy_n(c.block_table.begin(), need, m + d.meta.dec_tables + static_cast<std::size_t>(di) * d.mbps_d);
      ++di;
    } else {
      m[d.meta.pre_q_start + pi] = row;
      m[d.meta.pre_q_len + pi] = n;
      m[d.meta.pre_ctx + pi] = c.start_position + n;
      std::copy_n(c.block_table.begin(), need, m + d.meta.pre_tables + static_cast<std::size_t>(pi) * d.mbps_p);
      ++pi;
    }
    if (c.samples) {
      if (d.prune_last) {
        m[d.meta.last_q_start + si] = si;  // row si of qkv_sampled
        m[d.meta.last_q_len + si] = 1;
        m[d.meta.last_ctx + si] = c.start_position + n;
        std::copy_n(c.block_table.begin(), need, m + d.meta.last_tables + static_cast<std::size_t>(si) * d.mbps_l);
      }
      m[d.meta.sample_rows + si++] = row + n - 1;
    }
    row += n;
  }
  // Padding rows: token 0 at position 0, stored nowhere (slot -1), attention skipped (context 0).
  for (int p = rows_real; p < rows; ++p) {
    m[d.meta.slots + p] = -1;
    m[d.meta.dec_q_start + p] = p;
    m[d.meta.dec_q_len + p] = 1;
    m[d.meta.dec_ctx + p] = 0;
  }
  for (int p = ns_real; p < ns; ++p) m[d.meta.sample_rows + p] = p;
  return d;
}

StepDims CudaEngine::Impl::fill_padding(int bucket, int ctx_class) {
  return fill_step(gi::StepPlan{}, bucket, ctx_class);
}

void CudaEngine::Impl::capture(Rank& r, std::pair<int, int> key, const StepDims& d, int slot) {
  cudaGraph_t graph = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal));
  try {
    forward(r, d, r.stream, slot);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(r.stream, &broken);
    if (broken) (void)cudaGraphDestroy(broken);
    throw;
  }
  GPUSCOUT_CUDA_CHECK(cudaStreamEndCapture(r.stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  GPUSCOUT_CUDA_CHECK(rc);
  // A re-capture (resolve_gemm_ties) finds the stream idle and the old graphs unused. Slot 0's
  // re-capture also drops slot 1's graph, whose kernel choices may now be stale.
  auto& execs = r.graphs[key];
  const auto s = static_cast<std::size_t>(slot);
  for (std::size_t i = 0; i < execs.size(); ++i) {
    if (execs[i] != nullptr && (i == s || slot == 0)) {
      GPUSCOUT_CUDA_CHECK(cudaGraphExecDestroy(execs[i]));
      execs[i] = nullptr;
    }
  }
  execs[s] = exec;
}

void CudaEngine::Impl::launch_on_rank(Rank& r, const StepDims& d, std::pair<int, int> key, int slot) {
  GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.device));
  if (opt.inject_fault_at_step > 0 && executed_steps == opt.inject_fault_at_step && r.rank == tp - 1) {
    if (opt.fault_throws) throw gpuscout::Error(fmt::format("injected fault at step {}", executed_steps));
    return;  // the peers' all-reduce now waits for a rank that never joins
  }
  const auto s = static_cast<std::size_t>(slot);
  // The copy runs at once on its own stream, beside the step in flight (the other slot's, reading
  // the other buffer): only the event wait, not the copy, sits between two steps. meta[slot] was
  // last read by the step two back, which collect() saw end before this submit.
  GPUSCOUT_CUDA_CHECK(
      cudaMemcpyAsync(r.meta[s], staging, d.meta.words * sizeof(std::int32_t), cudaMemcpyHostToDevice, r.copy_stream));
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(r.meta_ready[s], r.copy_stream));
  GPUSCOUT_CUDA_CHECK(cudaStreamWaitEvent(r.stream, r.meta_ready[s], 0));
  const auto g = key.first > 0 ? r.graphs.find(key) : r.graphs.end();
  if (g != r.graphs.end() && g->second[s] != nullptr) {
    GPUSCOUT_CUDA_CHECK(cudaGraphLaunch(g->second[s], r.stream));
  } else {
    forward(r, d, r.stream, slot);
  }
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(r.step_done[s], r.stream));
}

void CudaEngine::Impl::step_on_rank(Rank& r, const StepDims& d, std::pair<int, int> key) {
  if (!submitted.empty()) throw std::logic_error("CudaEngine: a synchronous step while pipelined steps are in flight");
  launch_on_rank(r, d, key, 0);
  wait_rank(r, key.first, 0);
}

void CudaEngine::Impl::abort_comms() {
  std::lock_guard<std::mutex> lock(fault_mutex);
  if (comms_aborted) return;
#if defined(GPUSCOUT_HAVE_NCCL)
  // All ranks' aborts at once, one thread each: NCCL's teardown synchronizes the ranks of a node
  // (NVIDIA/nccl#863), so aborting them one after another from one thread can wait forever.
  // The graphs go first: NCCL's teardown waits until no CUDA graph that captured a collective of
  // the communicator is left (a running launch keeps its own reference and ends once the abort
  // flag stops its kernels).
  std::vector<std::thread> aborts;
  for (auto& r : ranks) {
    if (!r) continue;
    aborts.emplace_back([&rank = *r] {
      (void)cudaSetDevice(rank.device);
      for (auto& [key, execs] : rank.graphs) {
        for (cudaGraphExec_t exec : execs) {
          if (exec) (void)cudaGraphExecDestroy(exec);
        }
      }
      rank.graphs.clear();
      if (rank.comm) (void)ncclCommAbort(rank.comm);
    });
  }
  for (auto& t : aborts) t.join();
#endif
  comms_aborted = true;
}

namespace {
// Thrown by a rank that stopped waiting because another rank failed: not the root cause.
struct PeerFailed : gpuscout::Error {
  using gpuscout::Error::Error;
};
}  // namespace

void CudaEngine::Impl::wait_rank(Rank& r, int graph_batch, int slot) {
  const cudaEvent_t done = r.step_done[static_cast<std::size_t>(slot)];
  if (tp == 1) {
    GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(done));
    return;
  }
  gpuscout::bench::WatchdogOptions wo;
  wo.timeout_s = opt.collective_timeout_s;
  wo.spin_s = 1.0;  // spin like cudaStreamSynchronize does: a step's latency is what we measure
  int polls = 0;
  bool peer_failed = false;
  const auto res = gpuscout::bench::wait_or_abort(
      [&](std::string& error) {
        const cudaError_t q = cudaEventQuery(done);
        if (q == cudaSuccess) return gpuscout::bench::PollState::done;
        if (q != cudaErrorNotReady) {
          error = fmt::format("CUDA error {}", cudaGetErrorString(q));
          return gpuscout::bench::PollState::failed;
        }
        if (rank_failed.load()) {
          peer_failed = true;
          error = "another rank failed";
          return gpuscout::bench::PollState::failed;
        }
#if defined(GPUSCOUT_HAVE_NCCL)
        if (++polls % 64 == 0 && r.comm && !comms_aborted) {
          ncclResult_t st = ncclSuccess;
          (void)ncclCommGetAsyncError(r.comm, &st);
          if (st != ncclSuccess && st != ncclInProgress) {
            error = fmt::format("NCCL: {}", ncclGetErrorString(st));
            return gpuscout::bench::PollState::failed;
          }
        }
#endif
        return gpuscout::bench::PollState::pending;
      },
      [&] { abort_comms(); }, wo);
  if (res.status == gpuscout::bench::WatchdogResult::Status::completed) return;
  const std::string what =
      graph_batch > 0 ? fmt::format("decode step (batch {}, graph)", graph_batch) : std::string("step");
  if (res.status == gpuscout::bench::WatchdogResult::Status::timeout) {
    throw gpuscout::Error(fmt::format(
        "{} on GPU {}: not finished within {:g} s (collective timeout): a tensor-parallel collective is hung", what,
        r.device, opt.collective_timeout_s));
  }
  const std::string message = fmt::format("{} on GPU {}: {}", what, r.device, res.error);
  if (peer_failed) throw PeerFailed(message);
  throw gpuscout::Error(message);
}

void CudaEngine::Impl::run_ranks(const char* what, int index, const std::function<void(int)>& fn) {
  if (!broken.empty()) throw EngineFault("the engine is unusable after an earlier failure: " + broken);
  if (tp == 1) return pool->run(fn);
  const std::string label = fmt::format("{} {}", what, index);
  std::optional<gpuscout::bench::DeadlineGuard::Scope> scope;
  // Later than the polling timeout: it only fires when a thread cannot return at all.
  if (host_guard) scope.emplace(*host_guard, label, opt.collective_timeout_s + 30);
  try {
    pool->run([&](int ri) {
      try {
        fn(ri);
      } catch (const PeerFailed&) {
        throw;  // the failing rank records the cause
      } catch (const std::exception& ex) {
        {
          std::lock_guard<std::mutex> lock(fault_mutex);
          if (first_fault.empty()) first_fault = fmt::format("rank {}: {}", ri, ex.what());
        }
        rank_failed = true;
        throw;
      }
    });
  } catch (const std::exception& ex) {
    abort_comms();
    broken = first_fault.empty() ? ex.what() : first_fault;
    throw EngineFault(
        fmt::format("{} failed under TP{}: {}; communicators aborted (ncclCommAbort)", label, tp, broken));
  }
}

void CudaEngine::Impl::tune(Rank& r, std::vector<std::string>& lines) {
  // Candidates are timed as plain launches. Under programmatic launch, back-to-back calls of one
  // skinny kernel overlap (each loads its weights while the previous finishes), an overlap a step
  // never offers it: on the H200 the skinny gate/up GEMM won such a timing by 0.1 us and then cost
  // ~0.47 ms per batch-1 step (bench/NOTES.md, session 3).
  const ProgrammaticLaunchPause plain_launches;
  // Random inputs (not zeros: they run faster than real data) for the timed GEMMs.
  const std::int64_t n =
      static_cast<std::int64_t>(buckets.back()) * std::max({cfg.hidden, 2 * r.shard.ffn, r.shard.q_dim});
  launch_init_weights(r.gu, opt.weight_seed + 7, WeightKind::embedding, 0, 1, 0, 1, 0, n, r.stream);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  for (int b : buckets) {
    for (int cls : {r.g_qkv, r.g_o, r.g_gate_up, r.g_down, r.g_lm}) {
      lines.push_back(r.gemm->tune(cls, b, r.gu, r.logits, r.stream));
    }
  }
  GPUSCOUT_CUDA_CHECK(cudaStreamSynchronize(r.stream));
}

// GEMM choices that were close when timed alone, settled in whole decode steps. On the H200 the
// batch-8 step of Llama-3.1-8B took ~5.0 or ~5.25 ms from one engine to the next: the o projection
// went to the skinny kernel or to cuBLASLt on a 1-9% difference per call (in one engine over 10%),
// and inside a step at 512..576 tokens (the streaming attention on two blocks per SM before it) the
// skinny one cost ~6 us more per layer, while at <= 512 tokens (the split attention) the two tied
// (bench/NOTES.md, session 9). So the choice is made per graph: for every bucket with a GEMM class
// whose second kernel was within kTieMargin per call, and every context class up to
// kLongestTimedClass (on the H200 the 8192 class chose as the 2048 one), the graph is timed at the
// bottom and the middle of its context range (a batch-1 qkv choice timed at 1280 tokens alone cost
// ~0.19 ms per step at 512), then with each such class swapped (on every rank), keeping a swap
// when the step is faster by more than kKeepMargin, in passes until one keeps nothing (at most
// kMaxPasses; a later pass times again only the classes whose last comparison was within
// kRetimeMargin of the step: in the 445 later-pass comparisons of bench/results up to session 10,
// none of the 233 whose previous one differed by more kept a swap); longer classes take the
// choices of the longest timed one. Each graph is captured with its own choices; the runner is
// left with the ones timing alone made (eager steps). Steps are timed like serving steps (wall
// time around the replay and the sampled tokens' copy-back): the sum over the two contexts of the
// median of kTimedSteps after kWarmSteps (kTimedStepsLong when the class's first timing found
// steps above kLongStepMs: a 70B step's spread is a smaller part of it, and its comparisons made
// most of the 70B TP2 start-up).
void CudaEngine::Impl::resolve_gemm_ties(std::vector<std::string>& lines) {
  constexpr double kTieMargin = 0.25, kKeepMargin = 0.003, kRetimeMargin = 0.01;
  constexpr int kWarmSteps = 1, kTimedSteps = 5, kTimedStepsLong = 3, kLongestTimedClass = 2048, kMaxPasses = 3;
  constexpr double kLongStepMs = 10;
  const int bs = opt.kv_block_size;
  Rank& r0 = *ranks[0];
  auto swap_all = [&](int cls, int b) {
    for (auto& r : ranks) {
      if (std::isfinite(r->gemm->tie_margin(cls, b))) r->gemm->swap_choice(cls, b);
    }
  };
  for (int b : buckets) {
    std::vector<int> ties;
    for (int cls : {r0.g_qkv, r0.g_o, r0.g_gate_up, r0.g_down, r0.g_lm}) {
      if (r0.gemm->tie_margin(cls, b) < kTieMargin) ties.push_back(cls);
    }
    if (ties.empty()) continue;
    // Slot 0 while choices are timed; both slots once they are final (pipelined steps alternate
    // between the two, and a slot with other choices would compute other numbers).
    auto recapture = [&](int c, bool both_slots = false) {
      const StepDims pad = fill_padding(b, c);
      run_ranks("start-up capture, batch", b, [&](int ri) {
        for (int slot = 0; slot < (both_slots ? 2 : 1); ++slot) {
          capture(*ranks[static_cast<std::size_t>(ri)], {b, c}, pad, slot);
        }
      });
    };
    std::vector<int> kept;  // classes swapped in the last timed context class
    int below = 0;          // the previous class's bound
    for (int c : ctx_classes) {
      // Two contexts of the class: its bottom and its middle (the choices can cross inside it).
      const std::array<int, 2> contexts{std::max(2, below + 1), std::max(2, (below + 1 + c) / 2)};
      below = c;
      if (c > kLongestTimedClass && c != ctx_classes.front()) {
        for (int cls : kept) swap_all(cls, b);
        recapture(c, true);
        for (int cls : kept) swap_all(cls, b);
        continue;
      }
      // b decode sequences of ctx tokens on distinct KV blocks (wrapping when the cache is small).
      auto decode_plan = [&](int ctx) {
        gi::StepPlan plan;
        const int blocks_per_seq = ceil_div(ctx, bs);
        for (int i = 0; i < b; ++i) {
          gi::SeqChunk chunk;
          chunk.seq_id = static_cast<std::uint64_t>(i + 1);
          chunk.slot = i;
          chunk.tokens = {1};
          chunk.start_position = ctx - 1;
          chunk.samples = true;
          for (int j = 0; j < blocks_per_seq; ++j) {
            chunk.block_table.push_back(
                static_cast<std::int32_t>((static_cast<std::int64_t>(i) * blocks_per_seq + j) % info.kv_blocks));
          }
          plan.chunks.push_back(std::move(chunk));
        }
        plan.decode_tokens = b;
        return plan;
      };
      const std::array<gi::StepPlan, 2> plans{decode_plan(contexts[0]), decode_plan(contexts[1])};
      // The sum over the two contexts of the median step time.
      int timed_steps = kTimedSteps;
      auto step_ms = [&] {
        double sum = 0;
        for (const gi::StepPlan& plan : plans) {
          const StepDims d = fill_step(plan, b, c);  // the staging block: this step's metadata
          std::vector<double> times;
          for (int i = 0; i < kWarmSteps + timed_steps; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            run_ranks("start-up timing step, batch", b, [&](int ri) {
              step_on_rank(*ranks[static_cast<std::size_t>(ri)], d, {b, c});
            });
            const std::chrono::duration<double, std::milli> t = std::chrono::steady_clock::now() - t0;
            if (i >= kWarmSteps) times.push_back(t.count());
          }
          std::nth_element(times.begin(), times.begin() + timed_steps / 2, times.end());
          sum += times[timed_steps / 2];
        }
        return sum;
      };
      double best = step_ms();
      if (best / static_cast<double>(plans.size()) > kLongStepMs) timed_steps = kTimedStepsLong;
      kept.clear();
      std::string line =
          fmt::format("in-step batch {} context <= {}, steps at {} + {} tokens:", b, c, contexts[0], contexts[1]);
      // Passes until one keeps nothing: the choices interact (at batch 8 the skinny qkv tied with
      // cuBLASLt while o was skinny and won by 1% once o was cuBLASLt).
      bool kept_any = true;
      std::map<int, double> last_gap;  // per class: |swapped - kept| / kept of its last comparison
      for (int pass = 1; pass <= kMaxPasses && kept_any; ++pass) {
        kept_any = false;
        if (pass > 1) line += fmt::format(" pass {}:", pass);
        for (int cls : ties) {
          if (pass > 1 && last_gap[cls] > kRetimeMargin) continue;
          const std::string before = r0.gemm->choice_name(cls, b);
          swap_all(cls, b);
          const std::string after = r0.gemm->choice_name(cls, b);
          recapture(c);
          const double t = step_ms();
          last_gap[cls] = std::fabs(t - best) / best;
          const bool keep = t < best * (1.0 - kKeepMargin);
          line += fmt::format(" {} {} {:.3f} vs {} {:.3f} ms -> {};", r0.gemm->class_name(cls), before, best, after, t,
                              keep ? after : before);
          if (keep) {
            best = t;
            kept_any = true;
            // An even number of swaps is the choice timing alone made.
            const auto it = std::find(kept.begin(), kept.end(), cls);
            if (it == kept.end()) {
              kept.push_back(cls);
            } else {
              kept.erase(it);
            }
          } else {
            swap_all(cls, b);
          }
        }
      }
      line.pop_back();
      lines.push_back(line);
      recapture(c, true);                     // both slots, with the choices kept
      for (int cls : kept) swap_all(cls, b);  // the runner back to the choices timing alone made
    }
  }
}

// For every decode bucket and context class, the decode attention kernel and grid that ran fastest
// here, for that class's graphs. Which one wins depends on the head shape, the batch, the context
// and the GPU (bench/NOTES.md, session 7: on the H200 Qwen2.5-7B's batch-32 step at 512..576 tokens
// is 0.35 ms faster on one streaming block per SM than on two, Llama-3.1-8B's 0.32 ms faster on
// two), so it is measured, not fixed. Each candidate runs as the class's graph runs it (the class's max_context,
// the engine's blocks per sequence) on sequences at the bottom, middle and top of the class's
// context range, with distinct KV blocks where the cache has enough, rotating through the layers'
// caches so that each round reads >= 64 MB of K/V (from HBM, as in a step); plain launches, best of
// 3 rounds. The plan kept has the lowest sum over the three contexts of its time over the best
// time there: the class's graph serves every context in its range.
void CudaEngine::Impl::tune_attention(Rank& r, std::vector<std::string>& lines) {
  const ProgrammaticLaunchPause plain;
  const std::vector<DecodeAttentionPlan> candidates = decode_attention_candidates(cfg.head_dim);
  launch_init_weights(r.qkv, opt.weight_seed + 11, WeightKind::embedding, 0, 1, 0, 1, 0,
                      static_cast<std::int64_t>(max_running) * r.shard.qkv_dim, r.stream);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  const Event start, stop;
  const double kv_bytes_per_token = 2.0 * shape.kv_heads * shape.head_dim * sizeof(bf16);
  const int layers = static_cast<int>(r.layers.size());
  std::vector<std::int32_t> host;
  // Per-call microseconds of each candidate for `b` sequences of `ctx` tokens in class `c`.
  auto time_candidates = [&](int b, int c, int ctx) {
    const int blocks_per_seq = ceil_div(ctx, opt.kv_block_size);
    const MetaLayout L = MetaLayout::make(b, b, 0, b, mbps, 1);
    host.assign(L.words, 0);
    for (int i = 0; i < b; ++i) {
      host[L.dec_q_start + i] = i;
      host[L.dec_q_len + i] = 1;
      host[L.dec_ctx + i] = ctx;
      for (int j = 0; j < blocks_per_seq; ++j) {
        host[L.dec_tables + static_cast<std::size_t>(i) * mbps + j] =
            static_cast<std::int32_t>((static_cast<std::int64_t>(i) * blocks_per_seq + j) % info.kv_blocks);
      }
    }
    GPUSCOUT_CUDA_CHECK(
        cudaMemcpyAsync(r.meta[0], host.data(), L.words * sizeof(std::int32_t), cudaMemcpyHostToDevice, r.stream));
    AttentionBatch batch;
    batch.q_start = r.meta[0] + L.dec_q_start;
    batch.q_len = r.meta[0] + L.dec_q_len;
    batch.context_len = r.meta[0] + L.dec_ctx;
    batch.block_tables = r.meta[0] + L.dec_tables;
    batch.max_blocks_per_seq = mbps;
    batch.num_seqs = b;
    batch.max_context = c;
    batch.max_q_len = 1;
    const double round_bytes = static_cast<double>(b) * ctx * kv_bytes_per_token;
    const int per_round = std::clamp(static_cast<int>(std::ceil(64e6 / round_bytes)), 1, layers);
    auto run = [&](const DecodeAttentionPlan& p, int layer) {
      const LayerWeights& l = r.layers[static_cast<std::size_t>(layer)];
      launch_decode_attention(r.qkv, r.shard.qkv_dim, l.k_cache, l.v_cache, batch, shape, r.attn_workspace, r.attn,
                              r.shard.q_dim, r.stream, p);
    };
    std::vector<double> us(candidates.size(), std::numeric_limits<double>::max());
    for (std::size_t k = 0; k < candidates.size(); ++k) {
      run(candidates[k], 0);
      for (int round = 0; round < 3; ++round) {
        GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), r.stream));
        for (int l = 0; l < per_round; ++l) run(candidates[k], l);
        GPUSCOUT_CUDA_CHECK(cudaEventRecord(stop.get(), r.stream));
        GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
        us[k] = std::min(us[k], 1e6 * stop.seconds_since(start) / per_round);
      }
    }
    return us;
  };
  int lower = 0;
  for (int c : ctx_classes) {
    const int points[3] = {lower + 1, std::max(1, (lower + c) / 2), c};
    for (int b : buckets) {
      std::vector<std::vector<double>> us;
      for (int ctx : points) us.push_back(time_candidates(b, c, ctx));
      const std::size_t best = gpuscout::bench::best_over_points(us);
      attention_plans[{b, c}] = candidates[best];
      std::string detail;
      for (std::size_t k = 0; k < candidates.size(); ++k) {
        detail += fmt::format("{}{} {:.1f}/{:.1f}/{:.1f}", k ? ", " : "", describe(candidates[k]), us[0][k], us[1][k],
                              us[2][k]);
      }
      lines.push_back(fmt::format("batch {} context <= {}: {} (us at {}/{}/{} tokens: {})", b, c,
                                  describe(candidates[best]), points[0], points[1], points[2], detail));
    }
    lower = c;
  }
}

// ---------------------------------------------------------------------------------------------

std::unique_ptr<CudaEngine> CudaEngine::create(const gi::TransformerConfig& config, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  Impl& e = *impl;
  e.cfg = config;
  e.opt = options;
  e.tp = static_cast<int>(options.gpus.size());
  if (e.tp < 1) throw gpuscout::UsageError("CudaEngine: no GPU given");
  config.check_tensor_parallel(e.tp);
  e.shape = AttentionShape{config.heads / e.tp, config.kv_heads / e.tp, config.head_dim, options.kv_block_size};
  if (const char* why = check_attention_shape(e.shape); why != nullptr && *why != '\0') {
    throw gpuscout::UsageError(fmt::format("{}: {}", config.name, why));
  }
  if (options.kv_block_size < 1) throw gpuscout::UsageError("kv block size must be at least 1");
  if (options.max_running < 1 || options.max_step_tokens < 1) {
    throw gpuscout::UsageError(fmt::format("max_running ({}) and max_step_tokens ({}) must be at least 1",
                                           options.max_running, options.max_step_tokens));
  }
  if (!(options.memory_fraction > 0.0 && options.memory_fraction <= 1.0)) {
    throw gpuscout::UsageError(fmt::format("memory fraction {} is not in (0, 1]", options.memory_fraction));
  }
#if !defined(GPUSCOUT_HAVE_NCCL)
  if (e.tp > 1) throw gpuscout::UsageError("tensor parallelism needs NCCL, and this build has none: use --tp 1");
#endif
  int device_count = 0;
  GPUSCOUT_CUDA_CHECK(cudaGetDeviceCount(&device_count));
  bool pdl_capable = true, prefill_wgmma = prefill_attention_wgmma_by_default(), swiglu_gemm = true;
  int min_sms = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < options.gpus.size(); ++i) {
    const int g = options.gpus[i];
    if (g < 0 || g >= device_count) {
      throw gpuscout::UsageError(fmt::format("GPU {} does not exist ({} visible)", g, device_count));
    }
    if (std::count(options.gpus.begin(), options.gpus.end(), g) > 1) {
      throw gpuscout::UsageError(fmt::format("GPU {} is given twice", g));
    }
    cudaDeviceProp prop{};
    GPUSCOUT_CUDA_CHECK(cudaGetDeviceProperties(&prop, g));
    if (prop.major < 8) {
      throw gpuscout::UsageError(
          fmt::format("GPU {} ({}, compute capability {}.{}) has no BF16 tensor cores: the "
                      "engine needs compute capability 8.0 or newer",
                      g, prop.name, prop.major, prop.minor));
    }
    pdl_capable = pdl_capable && prop.major >= 9;
    prefill_wgmma = prefill_wgmma && prefill_attention_wgmma_supported(config.head_dim, prop.major, prop.minor) &&
                    prefill_attention_wgmma_fits(g);
    swiglu_gemm = swiglu_gemm &&
                  gate_up_swiglu_supported(config.hidden, config.ffn_hidden / e.tp, prop.major, prop.minor) &&
                  gate_up_swiglu_fits(g);
    min_sms = std::min(min_sms, prop.multiProcessorCount);
    if (options.fp8_weights && prop.major * 10 + prop.minor < 89) {
      throw gpuscout::UsageError(
          fmt::format("GPU {} ({}, compute capability {}.{}) has no FP8 tensor cores: FP8 weights need compute "
                      "capability 8.9 or newer (Ada, Hopper, Blackwell); use BF16",
                      g, prop.name, prop.major, prop.minor));
    }
  }
  e.info.weight_format = options.fp8_weights ? "fp8_e4m3" : "bf16";
  e.info.prefill_attention = prefill_wgmma ? "wgmma" : "mma.sync";
  e.info.last_layer_pruned = options.prune_last_layer && env_switch_on("GPUSCOUT_PRUNE_LAST_LAYER");
  if (swiglu_gemm && !options.fp8_weights && options.fused_swiglu && gate_up_swiglu_by_default()) {
    e.info.mlp_gate_up =
        swiglu_epilogue_by_default() == SwigluEpilogue::deferred ? "wgmma + swiglu" : "wgmma + swiglu, in place";
    e.info.swiglu_min_rows = options.fused_swiglu_min_rows > 0
                                 ? options.fused_swiglu_min_rows
                                 : gate_up_swiglu_min_rows(config.ffn_hidden / e.tp, min_sms);
  }
  // Process-wide (kernels.hpp): the last engine created decides.
  e.info.programmatic_launch = options.programmatic_launch && pdl_capable;
  set_programmatic_launch(e.info.programmatic_launch);
  e.max_context = options.max_context > 0
                      ? options.max_context
                      : static_cast<int>(std::min<std::int64_t>(
                            config.max_context > 0 ? config.max_context : kDefaultMaxContext, kDefaultMaxContext));
  e.mbps = ceil_div(e.max_context, options.kv_block_size);
  e.max_running = options.max_running;
  e.max_step_tokens = options.max_step_tokens;
  for (int b = 1; b < e.max_running; b *= 2) e.buckets.push_back(b);
  e.buckets.push_back(e.max_running);
  for (int c = 128; c < e.max_context; c *= 4) e.ctx_classes.push_back(c);
  e.ctx_classes.push_back(e.max_context);
  e.rows_cap = std::max(e.max_step_tokens, e.max_running);
  e.meta_words_cap = std::max(
      MetaLayout::make(e.rows_cap, e.max_running, e.max_running, e.max_running, e.mbps, e.mbps, e.max_running, e.mbps)
          .words,
      MetaLayout::make(e.max_running, e.max_running, 0, e.max_running, e.mbps, 1).words);
  GPUSCOUT_CUDA_CHECK(
      cudaHostAlloc(&e.staging_mem, 2 * e.meta_words_cap * sizeof(std::int32_t), cudaHostAllocPortable));
  GPUSCOUT_CUDA_CHECK(cudaHostAlloc(&e.tokens_mem, 2 * static_cast<std::size_t>(e.max_running) * sizeof(std::int32_t),
                                    cudaHostAllocPortable | cudaHostAllocMapped));
  for (int slot = 0; slot < 2; ++slot) {
    void* device_view = nullptr;
    GPUSCOUT_CUDA_CHECK(cudaHostGetDevicePointer(&device_view, e.tokens_mem + slot * e.max_running, 0));
    e.tokens_device[static_cast<std::size_t>(slot)] = static_cast<std::int32_t*>(device_view);
  }
  e.staging = e.staging_mem;

  for (int r = 0; r < e.tp; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->rank = r;
    rank->device = options.gpus[static_cast<std::size_t>(r)];
    rank->shard = make_shard(config, e.tp, r);
    e.ranks.push_back(std::move(rank));
  }

  // Does it fit? Weights + workspaces + the KV cache of one longest sequence, on every GPU. Not a
  // UsageError: the machine, not the command line, is short; a multi-benchmark run records the serve
  // case as skipped with this message and goes on.
  const bool fp8 = options.fp8_weights;
  const std::int64_t weights = weight_bytes_per_gpu(config, e.tp, fp8);
  e.allocate_workspace(*e.ranks[0], true);
  const std::int64_t work = static_cast<std::int64_t>(e.ranks[0]->work_bytes);
  const std::int64_t min_kv = kv_bytes_per_block(config, e.tp, options.kv_block_size) * e.mbps;
  for (auto& r : e.ranks) {
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(r->device));
    std::size_t free_b = 0, total_b = 0;
    GPUSCOUT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double usable = static_cast<double>(free_b);
    if (static_cast<double>(weights + work + min_kv) > usable) {
      std::string fix;
      for (int t = e.tp * 2; t <= 8; t *= 2) {
        if (config.heads % t || config.kv_heads % t || config.ffn_hidden % t) break;
        const std::int64_t need =
            weight_bytes_per_gpu(config, t, fp8) + work + kv_bytes_per_block(config, t, options.kv_block_size) * e.mbps;
        if (static_cast<double>(need) <= usable) {
          fix =
              fmt::format("use --tp {} ({:.1f} GB of weights per GPU)", t, weight_bytes_per_gpu(config, t, fp8) / kGB);
          break;
        }
      }
      const std::int64_t fp8_weights = weight_bytes_per_gpu(config, e.tp, true);
      if (!fp8 && static_cast<double>(fp8_weights + work + min_kv) <= usable) {
        fix += fmt::format("{} FP8 weights ({:.1f} GB per GPU at TP{}: --weights fp8)", fix.empty() ? "use" : ", or",
                           fp8_weights / kGB, e.tp);
      }
      // Workspaces grow with the largest step: where they alone tip the balance, say so first.
      if (static_cast<double>(weights + min_kv) <= usable) {
        fix = fmt::format(
            "the workspaces hold steps of up to {} tokens: use smaller steps (--max-step-tokens, a shorter "
            "--serve-prefill){}{}",
            e.max_step_tokens, fix.empty() ? "" : "; or ", fix);
      }
      if (fix.empty()) fix = "no tensor-parallel degree up to 8 fits on GPUs like this one";
      throw gpuscout::Error(fmt::format(
          "{} {} needs {:.1f} GB of weights per GPU at TP{} plus {:.1f} GB of workspaces and {:.1f} GB of KV cache "
          "for one {}-token sequence, {:.1f} GB free on GPU {}: {}",
          config.name, fp8 ? "FP8" : "BF16", weights / kGB, e.tp, work / kGB, min_kv / kGB, e.max_context, usable / kGB,
          r->device, fix));
    }
  }

  e.pool = std::make_unique<RankPool>(e.tp);
#if defined(GPUSCOUT_HAVE_NCCL)
  if (e.tp > 1) {
    const double guard_s = options.collective_timeout_s + 30;
    e.host_guard = std::make_unique<gpuscout::bench::DeadlineGuard>([guard_s](const std::string& what) {
      std::fprintf(stderr,
                   "gpuscout: fatal: %s did not return within %g s: a tensor-parallel rank is stuck inside NCCL; "
                   "ending the run\n",
                   what.c_str(), guard_s);
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(3);
    });
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(e.tp));
    gpuscout::bench::DeadlineGuard::Scope scope(*e.host_guard, "ncclCommInitAll", guard_s);
    nccl_check(ncclCommInitAll(comms.data(), e.tp, options.gpus.data()), "ncclCommInitAll");
    for (int r = 0; r < e.tp; ++r) e.ranks[static_cast<std::size_t>(r)]->comm = comms[static_cast<std::size_t>(r)];
  }
#endif

  // Weights and workspaces, then the KV cache from what the fraction leaves.
  const bool small_kernel_carveout = env_switch_on("GPUSCOUT_SMALL_KERNEL_CARVEOUT");  // kernels.hpp
  e.pool->run([&](int ri) {
    Rank& r = *e.ranks[static_cast<std::size_t>(ri)];
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.device));
    if (small_kernel_carveout) prefer_shared_carveout_in_small_kernels();
    GPUSCOUT_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    GPUSCOUT_CUDA_CHECK(cudaStreamCreateWithFlags(&r.copy_stream, cudaStreamNonBlocking));
    for (cudaEvent_t& ev : r.step_done) GPUSCOUT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    for (cudaEvent_t& ev : r.meta_ready) GPUSCOUT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    e.allocate_and_init_weights(r);
    std::size_t free_b = 0, total_b = 0;
    GPUSCOUT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    r.free_after_weights = free_b;
    e.allocate_workspace(r, false);
  });
  const std::int64_t block_bytes = kv_bytes_per_block(config, e.tp, options.kv_block_size);
  std::int64_t blocks = std::numeric_limits<std::int64_t>::max();
  for (auto& r : e.ranks) {
    const double budget =
        options.memory_fraction * static_cast<double>(r->free_after_weights) - static_cast<double>(r->work_bytes);
    blocks = std::min<std::int64_t>(blocks, budget > 0 ? static_cast<std::int64_t>(budget / block_bytes) : 0);
  }
  if (blocks < e.mbps && (options.max_kv_blocks == 0 || options.max_kv_blocks > blocks)) {
    throw gpuscout::Error(fmt::format(
        "{}: {:.0f}% of the {:.1f} GB left after the weights holds {} KV blocks of {} tokens, fewer than one {}-token "
        "sequence needs ({}): raise the memory fraction, lower the context or use more GPUs",
        config.name, options.memory_fraction * 100, e.ranks[0]->free_after_weights / kGB, blocks, options.kv_block_size,
        e.max_context, e.mbps));
  }
  if (options.max_kv_blocks > 0) blocks = std::min(blocks, options.max_kv_blocks);
  blocks = std::min<std::int64_t>(blocks, std::numeric_limits<std::int32_t>::max() / options.kv_block_size);
  e.info.kv_blocks = static_cast<int>(blocks);

  std::vector<std::vector<std::string>> choices(static_cast<std::size_t>(e.tp));
  e.pool->run([&](int ri) {
    Rank& r = *e.ranks[static_cast<std::size_t>(ri)];
    const Shard& s = r.shard;
    GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.device));
    const std::size_t per_layer =
        static_cast<std::size_t>(blocks) * s.kv_heads * options.kv_block_size * config.head_dim;
    r.kv_bytes = per_layer * 2 * sizeof(bf16) * static_cast<std::size_t>(config.layers);
    GPUSCOUT_CUDA_CHECK(cudaMalloc(&r.kv_mem, r.kv_bytes));
    auto* kv = reinterpret_cast<bf16*>(r.kv_mem);
    for (std::size_t l = 0; l < r.layers.size(); ++l) {
      r.layers[l].k_cache = kv + (2 * l) * per_layer;
      r.layers[l].v_cache = kv + (2 * l + 1) * per_layer;
    }
    r.gemm = std::make_unique<GemmRunner>(r.lt_workspace, kLtWorkspaceBytes);
    r.gemm->prefer_own_kernels(options.prefer_own_gemm_kernels);
    auto collect = [&](auto member) {
      std::vector<const void*> w;
      for (const auto& l : r.layers) w.push_back(l.*member);
      return w;
    };
    // FP8: each class's scale (the same for every layer: it depends on the full matrix's in
    // features only, weights.hpp) on the host for the skinny kernel and on the GPU for cuBLASLt.
    std::array<float, fp8_classes> scales{};
    if (fp8) {
      scales = {gi::fp8_weight_scale(config.hidden), gi::fp8_weight_scale(config.q_dim()),
                gi::fp8_weight_scale(config.hidden), gi::fp8_weight_scale(config.ffn_hidden)};
      for (int c = 0; c < fp8_classes; ++c) {
        GPUSCOUT_CUDA_CHECK(cudaMemcpy(r.fp8_scales + c * kFp8ScaleStride, &scales[static_cast<std::size_t>(c)],
                                       sizeof(float), cudaMemcpyHostToDevice));
      }
      r.gemm->set_fp8_buffers(r.x_fp8, r.x_fp8_bytes, r.fp8_scratch);
    }
    auto add = [&](const char* name, int out, int in, std::vector<const void*> w, Fp8Class cls) {
      return fp8 ? r.gemm->add_class(name, out, in, std::move(w), scales[cls], r.fp8_scales + cls * kFp8ScaleStride)
                 : r.gemm->add_class(name, out, in, std::move(w));
    };
    r.g_qkv = add("qkv", s.qkv_dim, config.hidden, collect(&LayerWeights::wqkv), fp8_qkv);
    r.g_o = add("o", config.hidden, s.q_dim, collect(&LayerWeights::wo), fp8_o);
    r.g_gate_up = add("gate_up", 2 * s.ffn, config.hidden, collect(&LayerWeights::w_gate_up), fp8_gate_up);
    r.g_down = add("down", config.hidden, s.ffn, collect(&LayerWeights::w_down), fp8_down);
    r.g_lm = r.gemm->add_class("lm_head", s.vocab_count, config.hidden, {r.lm_head});
    e.tune(r, choices[static_cast<std::size_t>(ri)]);
    // The attention plans are the engine's, not a rank's: every rank has the same shapes and must
    // capture the same kernels, so rank 0 times them.
    const bool overridden = options.attention_plan_override.kernel != DecodeAttentionPlan::Kernel::automatic;
    if (ri == 0 && options.tune_attention && e.opt.cuda_graphs && !overridden) {
      e.tune_attention(r, e.info.attention_choices);
    }
    if (ri == 0 && overridden) {
      std::string line =
          "every bucket and context: " + describe(options.attention_plan_override) + " (set by the caller)";
      const DecodeAttentionPlan& forced = options.attention_plan_override;
      const int fits = forced.kernel == DecodeAttentionPlan::Kernel::streaming
                           ? decode_attention_streaming_max_seqs(config.head_dim)
                           : e.buckets.back();
      if (forced.kernel == DecodeAttentionPlan::Kernel::pairs &&
          !decode_attention_pairs_supported(config.head_dim, forced.stages)) {
        line += fmt::format(
            "; the split kernel runs instead: the pair kernel does not run head size {} with {} stages on this GPU "
            "(it runs head sizes 64 and 128)",
            config.head_dim, forced.stages);
      } else if (fits < e.buckets.back()) {
        line += fits == 0
                    ? "; the split kernel runs instead: the streaming kernel's shared memory does not fit this GPU"
                    : fmt::format(
                          "; the split kernel runs instead for more than {} sequences: the streaming "
                          "kernel's shared memory does not fit this GPU beyond them",
                          fits);
      }
      e.info.attention_choices.push_back(std::move(line));
    }
  });
  for (int r = 0; r < e.tp; ++r) {
    for (auto& line : choices[static_cast<std::size_t>(r)]) {
      e.info.gemm_choices.push_back(e.tp > 1 ? fmt::format("rank {} {}", r, line) : line);
    }
  }

  // One eager all-padding step per bucket and context class (checks the path, sets up NCCL's
  // connections outside any capture), then the capture of its graph: at start-up rather than on
  // first use, so no serving step pays for a capture.
  for (int b : e.buckets) {
    for (int c : e.ctx_classes) {
      const StepDims d = e.fill_padding(b, c);
      e.run_ranks("start-up step, batch", b, [&](int ri) {
        Rank& r = *e.ranks[static_cast<std::size_t>(ri)];
        e.step_on_rank(r, d, {0, 0});
        if (options.cuda_graphs) e.capture(r, {b, c}, d, 0);
      });
    }
    if (options.cuda_graphs) e.info.graph_buckets.push_back(b);
  }
  if (options.cuda_graphs && options.resolve_gemm_ties && !options.prefer_own_gemm_kernels) {
    e.resolve_gemm_ties(e.info.gemm_choices);
  }
  if (options.cuda_graphs) {
    // Pipelined steps alternate between two graphs (their own metadata buffers and token slots).
    // resolve_gemm_ties captured slot 1 where it settled choices in whole steps: the runner holds
    // the choices of timing alone again, which a capture here would give slot 1 instead (session 18:
    // the two slots then computed different numbers, and half the steps ran the unsettled choices).
    for (int b : e.buckets) {
      for (int c : e.ctx_classes) {
        if (e.ranks[0]->graphs[{b, c}][1] != nullptr) continue;
        const StepDims d = e.fill_padding(b, c);
        e.run_ranks("start-up capture, batch", b, [&](int ri) {
          e.capture(*e.ranks[static_cast<std::size_t>(ri)], {b, c}, d, 1);
        });
      }
    }
  }

  e.info.tp = e.tp;
  e.info.weight_bytes_per_gpu = static_cast<std::int64_t>(e.ranks[0]->weight_bytes);
  e.info.kv_cache_bytes_per_gpu = static_cast<std::int64_t>(e.ranks[0]->kv_bytes);
  e.info.workspace_bytes_per_gpu = static_cast<std::int64_t>(e.ranks[0]->work_bytes);
  e.info.kv_block_size = options.kv_block_size;
  return std::unique_ptr<CudaEngine>(new CudaEngine(std::move(impl)));
}

CudaEngine::CudaEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaEngine::~CudaEngine() = default;

std::string CudaEngine::name() const {
  return fmt::format("cuda-engine {} TP{}", impl_->cfg.name, impl_->tp);
}
int CudaEngine::kv_block_size() const {
  return impl_->opt.kv_block_size;
}
int CudaEngine::kv_blocks() const {
  return impl_->info.kv_blocks;
}
int CudaEngine::max_running() const {
  return impl_->max_running;
}
int CudaEngine::max_step_tokens() const {
  return impl_->max_step_tokens;
}
const EngineInfo& CudaEngine::info() const {
  return impl_->info;
}
const gi::TransformerConfig& CudaEngine::config() const {
  return impl_->cfg;
}
void CudaEngine::keep_logits(bool keep) {
  impl_->keep = keep;
}
const std::vector<std::vector<float>>& CudaEngine::last_logits() const {
  return impl_->logits;
}

CudaEngine::Impl::StepKey CudaEngine::Impl::key_for(const gi::StepPlan& plan) const {
  StepKey k;
  bool decode_only = true;
  int longest = 0;
  for (const auto& c : plan.chunks) {
    decode_only = decode_only && c.is_decode() && c.samples;
    k.sampled += c.samples ? 1 : 0;
    longest = std::max(longest, c.start_position + static_cast<int>(c.tokens.size()));
  }
  // Decode-only steps run at their bucket's size, so they use the tuned GEMMs (and the graph).
  k.bucket = decode_only ? bucket_for(static_cast<int>(plan.chunks.size())) : 0;
  k.ctx_class = max_context;
  for (int c : ctx_classes) {
    if (c >= longest) {
      k.ctx_class = c;
      break;
    }
  }
  k.graph = {k.bucket > 0 && opt.cuda_graphs ? k.bucket : 0, k.ctx_class};
  return k;
}

double CudaEngine::time_graph_replays(const gi::StepPlan& plan, int replays, bool with_copies) {
  Impl& e = *impl_;
  if (e.tp != 1 || replays < 1) throw std::invalid_argument("time_graph_replays: TP1 and at least one replay");
  if (!e.submitted.empty()) throw std::logic_error("time_graph_replays while pipelined steps are in flight");
  const Impl::StepKey k = e.key_for(plan);
  Rank& r = *e.ranks[0];
  const auto g = k.graph.first > 0 ? r.graphs.find(k.graph) : r.graphs.end();
  if (g == r.graphs.end()) throw std::invalid_argument("time_graph_replays: the plan's step has no graph");
  const StepDims d = e.fill_step(plan, k.bucket, k.ctx_class);
  GPUSCOUT_CUDA_CHECK(cudaSetDevice(r.device));
  GPUSCOUT_CUDA_CHECK(
      cudaMemcpyAsync(r.meta[0], e.staging, d.meta.words * sizeof(std::int32_t), cudaMemcpyHostToDevice, r.stream));
  Event start, stop;
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(start.get(), r.stream));
  for (int i = 0; i < replays; ++i) {
    if (with_copies && i > 0) {
      GPUSCOUT_CUDA_CHECK(
          cudaMemcpyAsync(r.meta[0], e.staging, d.meta.words * sizeof(std::int32_t), cudaMemcpyHostToDevice, r.stream));
    }
    GPUSCOUT_CUDA_CHECK(cudaGraphLaunch(g->second[0], r.stream));
    if (with_copies) {
      GPUSCOUT_CUDA_CHECK(cudaMemcpyAsync(e.tokens_mem, r.sampled,
                                          static_cast<std::size_t>(d.ns) * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                          r.stream));
    }
  }
  GPUSCOUT_CUDA_CHECK(cudaEventRecord(stop.get(), r.stream));
  GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms) / replays;
}

std::vector<std::int32_t> CudaEngine::execute(const gi::StepPlan& plan) {
  if (!impl_->submitted.empty()) throw std::logic_error("CudaEngine::execute while pipelined steps are in flight");
  if (plan.chunks.empty()) return {};
  submit(plan);
  return collect();
}

void CudaEngine::submit(const gi::StepPlan& plan) {
  Impl& e = *impl_;
  if (plan.chunks.empty()) throw std::invalid_argument("CudaEngine::submit: an empty plan");
  if (e.submitted.size() >= 2) throw std::logic_error("CudaEngine::submit: two steps are already in flight");
  const Impl::StepKey k = e.key_for(plan);
  const int slot = e.next_slot;
  // This slot's staging block was last copied by the step two back, which collect() has seen end.
  e.staging = e.staging_mem + static_cast<std::size_t>(slot) * e.meta_words_cap;
  const StepDims d = e.fill_step(plan, k.bucket, k.ctx_class);
  ++e.executed_steps;
  e.run_ranks("step", e.executed_steps,
              [&](int ri) { e.launch_on_rank(*e.ranks[static_cast<std::size_t>(ri)], d, k.graph, slot); });
  e.submitted.push_back(Impl::Submitted{slot, k.sampled, k.graph.first, e.executed_steps});
  e.next_slot = 1 - slot;
  e.previous_sampling = sampling_index(plan);
}

std::vector<std::int32_t> CudaEngine::collect() {
  Impl& e = *impl_;
  if (e.submitted.empty()) throw std::logic_error("CudaEngine::collect without a submitted step");
  const Impl::Submitted step = e.submitted.front();
  e.submitted.pop_front();
  e.run_ranks("step", step.index,
              [&](int ri) { e.wait_rank(*e.ranks[static_cast<std::size_t>(ri)], step.graph_batch, step.slot); });
  const int sampled = step.sampled;
  if (e.keep) {
    // Tests only: the sampling rows' logits, every rank's vocabulary shard in order (the buffer
    // holds the last step's: nothing may be in flight behind this one).
    if (!e.submitted.empty()) throw std::logic_error("CudaEngine: keep_logits with pipelined steps");
    e.logits.assign(static_cast<std::size_t>(sampled), std::vector<float>(static_cast<std::size_t>(e.cfg.vocab)));
    std::vector<std::uint16_t> shard;
    for (auto& r : e.ranks) {
      const Shard& s = r->shard;
      shard.resize(static_cast<std::size_t>(sampled) * s.vocab_count);
      GPUSCOUT_CUDA_CHECK(cudaSetDevice(r->device));
      GPUSCOUT_CUDA_CHECK(
          cudaMemcpy(shard.data(), r->logits, shard.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
      for (int i = 0; i < sampled; ++i) {
        for (int v = 0; v < s.vocab_count; ++v) {
          e.logits[static_cast<std::size_t>(i)][static_cast<std::size_t>(s.vocab_begin + v)] =
              gi::bf16_bits_to_float(shard[static_cast<std::size_t>(i) * s.vocab_count + v]);
        }
      }
    }
  }
  const std::int32_t* tokens = e.tokens_mem + static_cast<std::size_t>(step.slot) * e.max_running;
  return std::vector<std::int32_t>(tokens, tokens + sampled);
}

}  // namespace gpuscout::cuda::infer
