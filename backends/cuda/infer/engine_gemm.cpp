// cuBLASLt (or skinny-kernel) GEMMs of the serving engine; see engine_gemm.hpp for the layout.
#include "engine_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "gpuscout/cuda/check.hpp"
#include "kernel_variants.hpp"

namespace gpuscout::cuda::infer {

namespace {
constexpr int kRequestedAlgos = 8;
constexpr int kTimedRounds = 3;
// The configuration search (GemmRunner::tune; GPUSCOUT_GEMM_SEARCH=0 turns it off): the row counts it runs at,
// and how many of its candidates, after one quick round each, go on to the full timing.
constexpr int kSearchMinRows = 2, kSearchMaxRows = 64;
constexpr int kSearchFinalists = 6;
constexpr int kMaxRotation = 8;  // weight instances cycled through per timed round
// cuBLASLt's part of the runner's workspace: all but the small-m counters at its end.
std::size_t lt_workspace_bytes(std::size_t total) {
  return total >= 2 * GemmRunner::kSmallMCounterBytes ? total - GemmRunner::kSmallMCounterBytes : total;
}

// Whether the skinny path of a GEMM is the ring GEMV (kernel_variants.hpp): one BF16 row.
bool skinny_is_ring(int rows, bool fp8) {
  return rows == 1 && !fp8 && ring_gemv_by_default();
}

// A configuration attribute of `algo` (-1 where it cannot be read). The cluster shape is 16 bits
// wide, the others 32.
long long algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  std::size_t written = 0;
  if (attribute == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID) {
    std::uint16_t value = 0;
    const bool ok = cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written) ==
                    CUBLAS_STATUS_SUCCESS;
    return ok && written == sizeof(value) ? value : -1;
  }
  std::int32_t value = 0;
  const bool ok =
      cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written) == CUBLAS_STATUS_SUCCESS;
  return ok && written == sizeof(value) ? value : -1;
}

constexpr std::pair<const char*, cublasLtMatmulAlgoConfigAttributes_t> kDescribedFields[] = {
    {"algo", CUBLASLT_ALGO_CONFIG_ID},
    {"tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
    {"stages", CUBLASLT_ALGO_CONFIG_STAGES_ID},
    {"split-k", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
    {"custom", CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION},
    {"cluster", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID}};

// "#3/8 (algo 66 tile 18 stages 33 split-k 1 custom 1 cluster 3)": which candidate (the heuristic's
// come first, then the search's) and its configuration, so that choices can be compared between
// engines (attributes that cannot be read are left out).
std::string describe_algo(const cublasLtMatmulAlgo_t& algo, int index, std::size_t count) {
  std::string s = fmt::format("#{}/{} (", index + 1, count);
  bool first = true;
  for (const auto& [name, attribute] : kDescribedFields) {
    const long long v = algo_config(algo, attribute);
    if (v < 0) continue;
    s += fmt::format("{}{} {}", first ? "" : " ", name, v);
    first = false;
  }
  return s + ")";
}

// Configurations of cuBLASLt's own kernels that its heuristic does not offer, around the candidates
// it does: each candidate with another tile of 8..48 batch rows, thread-block cluster, custom option
// or no split-k. Why these (bench/probe/lt_tactics_probe.cu, session 25, one H200, cuBLASLt 13.1):
// timing every configuration AlgoCheck accepted for the Llama-3.1-8B layer GEMMs at 8 and 32 rows
// (~20k each), the fastest were all of this kind (the o and down projections without split-k on a
// 1x1x1 or 1x2x1 cluster, 8-9% and 5% faster per call at 32 rows), and 16-layer graphs of the four
// GEMMs took 0.949 (32 rows) and 0.981 (8 rows) of the heuristic's best. The search keeps what
// AlgoCheck accepts within the workspace; tune() times it beside the heuristic's candidates.
// In the engine's steps, with the norms, attention and programmatic launches between the GEMMs,
// the same picks first gained 0-0.18 ms of a 5.3 ms batch-32 H200 step and nothing in the serve
// benchmark (session 25). Since a searched pick must also beat the heuristic's best in whole steps
// (the in-step resolution, session 27), it is on by default (GPUSCOUT_GEMM_SEARCH=0 turns it off):
// on H100s the serve benchmark's batch-32 steps -2.1% and static batch +1.2-1.7% (session 29,
// bench/NOTES.md), for 2-4 s more start-up.
std::vector<cublasLtMatmulHeuristicResult_t> search_configurations(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t d, const std::vector<cublasLtMatmulHeuristicResult_t>& seeds, std::size_t workspace_bytes) {
  // Tiles are (W rows) x (batch rows): the heuristic's picks at 8-32 rows are 64- and 128-row tiles.
  constexpr std::uint32_t kTiles[] = {
      CUBLASLT_MATMUL_TILE_64x8,   CUBLASLT_MATMUL_TILE_64x16,  CUBLASLT_MATMUL_TILE_64x24,
      CUBLASLT_MATMUL_TILE_64x32,  CUBLASLT_MATMUL_TILE_64x40,  CUBLASLT_MATMUL_TILE_64x48,
      CUBLASLT_MATMUL_TILE_128x8,  CUBLASLT_MATMUL_TILE_128x16, CUBLASLT_MATMUL_TILE_128x24,
      CUBLASLT_MATMUL_TILE_128x32, CUBLASLT_MATMUL_TILE_128x40, CUBLASLT_MATMUL_TILE_128x48};
  constexpr std::uint16_t kClusters[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                         CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
  constexpr std::uint32_t kCustomOptions[] = {1, 3};
  auto key_of = [](const cublasLtMatmulAlgo_t& algo) {
    std::array<long long, std::size(kDescribedFields) + 1> key{};
    for (std::size_t i = 0; i < std::size(kDescribedFields); ++i)
      key[i] = algo_config(algo, kDescribedFields[i].second);
    key.back() = algo_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
    return key;
  };
  std::vector<decltype(key_of(seeds.front().algo))> seen;
  for (const auto& s : seeds) seen.push_back(key_of(s.algo));
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  for (const auto& seed : seeds) {
    std::vector<std::uint32_t> tiles;
    std::size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&seed.algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes) ==
            CUBLAS_STATUS_SUCCESS &&
        bytes > 0) {
      tiles.resize(bytes / sizeof(std::uint32_t));
      if (cublasLtMatmulAlgoCapGetAttribute(&seed.algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), bytes, &bytes) !=
          CUBLAS_STATUS_SUCCESS)
        tiles.clear();
    }
    std::int32_t custom_max = 0;
    (void)cublasLtMatmulAlgoCapGetAttribute(&seed.algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max,
                                            sizeof(custom_max), &bytes);
    const long long seed_split = algo_config(seed.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    for (std::uint32_t tile : kTiles) {
      if (std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) continue;
      for (std::uint16_t cluster : kClusters) {
        for (std::uint32_t custom : kCustomOptions) {
          if (static_cast<std::int32_t>(custom) > custom_max) continue;
          for (const bool keep_split : {true, false}) {
            if (!keep_split && seed_split <= 1) continue;
            cublasLtMatmulAlgo_t algo = seed.algo;
            (void)cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
            (void)cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                                       sizeof(cluster));
            (void)cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                                       sizeof(custom));
            if (!keep_split) {
              const std::int32_t one = 1;
              const std::uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
              (void)cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one));
              (void)cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                                         sizeof(none));
            }
            const auto key = key_of(algo);
            if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
            seen.push_back(key);
            cublasLtMatmulHeuristicResult_t result{};
            if (cublasLtMatmulAlgoCheck(handle, desc, a, b, d, d, &algo, &result) != CUBLAS_STATUS_SUCCESS ||
                result.workspaceSize > workspace_bytes) {
              continue;
            }
            result.algo = algo;
            result.state = CUBLAS_STATUS_SUCCESS;
            found.push_back(result);
          }
        }
      }
    }
  }
  return found;
}
}  // namespace

struct GemmRunner::Class {
  std::string name;
  int out = 0, in = 0;
  std::vector<const void*> weights;
  float fp8_scale = 0.0f;                   // > 0: FP8 weights
  const float* fp8_scale_device = nullptr;  // the same scale, for cuBLASLt
  bool fp8() const { return fp8_scale_device != nullptr; }
};

struct GemmRunner::Plan {
  lt::MatrixLayout a, b, d;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
  int chosen = 0;           // index into algos
  int heuristic_count = 0;  // algos[0, heuristic_count) are the heuristic's, the rest the search's
  bool skinny = false;      // launch_skinny_gemm instead
  int small_m_split = 0;    // > 0: launch_small_m_gemm with this k-split instead
  int small_m_variant = 0;
  // The kernel tune() ranked second (cuBLASLt or our own, whichever lost; or cuBLASLt's runner-up,
  // alternative_algo >= 0) and both per-call times: swap_choice() exchanges the two.
  // alternative_us < 0: there was no second kernel.
  bool alternative_skinny = false;
  int alternative_split = 0, alternative_variant = 0;
  int alternative_algo = -1;
  double chosen_us = -1, alternative_us = -1;
};

GemmRunner::GemmRunner(void* workspace, std::size_t workspace_bytes)
    : lt_(lt::make_handle()),
      desc_(lt::make_matmul_desc(CUBLAS_COMPUTE_32F, CUDA_R_32F)),
      desc_fp8_(lt::make_matmul_desc(CUBLAS_COMPUTE_32F, CUDA_R_32F)),
      pref_(lt::make_preference(lt_workspace_bytes(workspace_bytes))),
      workspace_(workspace),
      workspace_bytes_(lt_workspace_bytes(workspace_bytes)) {
  const char* small_m = std::getenv("GPUSCOUT_SMALL_M_GEMM");
  small_m_enabled_ = small_m != nullptr && std::strcmp(small_m, "1") == 0;
  search_enabled_ = env_switch_on("GPUSCOUT_GEMM_SEARCH");
  lt_ties_enabled_ = env_switch_on("GPUSCOUT_GEMM_LT_TIES");
  if (workspace != nullptr && workspace_bytes_ < workspace_bytes) {
    small_m_ws_.counters = reinterpret_cast<unsigned*>(static_cast<char*>(workspace) + workspace_bytes_);
    small_m_ws_.counter_count = static_cast<int>(kSmallMCounterBytes / sizeof(unsigned));
    small_m_ws_.partials = static_cast<float*>(workspace);
    small_m_ws_.partial_floats = workspace_bytes_ / sizeof(float);
    // Zero before any launch, whatever stream the launches come on.
    GPUSCOUT_CUDA_CHECK(cudaMemset(small_m_ws_.counters, 0, kSmallMCounterBytes));
    GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (cublasLtMatmulDesc_t d : {desc_.get(), desc_fp8_.get()}) {  // "TN": the only layout FP8 accepts
    lt::set(d, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    lt::set(d, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  }
  const std::int8_t fast_accum = 0;  // full FP32 accumulation, as torch._scaled_mm's default
  lt::set(desc_fp8_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum);
}

void GemmRunner::set_fp8_buffers(std::uint8_t* x_fp8, std::size_t x_fp8_bytes, Fp8Scratch scratch) {
  x_fp8_ = x_fp8;
  x_fp8_bytes_ = x_fp8_bytes;
  fp8_ = scratch;
  const void* scale = fp8_.scale;
  lt::set(desc_fp8_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale);
}

GemmRunner::~GemmRunner() = default;

int GemmRunner::add_class(std::string name, int out, int in, std::vector<const void*> weights, float fp8_scale,
                          const float* fp8_scale_device) {
  if (fp8_scale_device != nullptr && (x_fp8_ == nullptr || fp8_.scale == nullptr)) {
    throw std::logic_error("GemmRunner: an FP8 class before set_fp8_buffers()");
  }
  auto c = std::make_unique<Class>();
  c->name = std::move(name);
  c->out = out;
  c->in = in;
  c->weights = std::move(weights);
  c->fp8_scale = fp8_scale;
  c->fp8_scale_device = fp8_scale_device;
  classes_.push_back(std::move(c));
  return static_cast<int>(classes_.size()) - 1;
}

GemmRunner::Plan& GemmRunner::plan(int cls, int rows) {
  const std::int64_t key = (static_cast<std::int64_t>(cls) << 32) | static_cast<std::uint32_t>(rows);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  const Class& c = *classes_.at(cls);
  auto p = std::make_unique<Plan>();
  const cudaDataType_t in_type = c.fp8() ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  p->a = lt::make_layout(in_type, c.in, c.out, c.in);
  p->b = lt::make_layout(in_type, c.in, rows, c.in);
  p->d = lt::make_layout(CUDA_R_16BF, c.out, rows, c.out);
  if (c.fp8()) {
    const void* scale = c.fp8_scale_device;
    lt::set(desc_fp8_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale);
  }
  std::array<cublasLtMatmulHeuristicResult_t, kRequestedAlgos> results{};
  int returned = 0;
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt_, c.fp8() ? desc_fp8_ : desc_, p->a, p->b, p->d, p->d, pref_,
                                                       kRequestedAlgos, results.data(), &returned));
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p->algos.push_back(results[i]);
  }
  if (p->algos.empty()) {
    throw std::runtime_error(fmt::format("cuBLASLt has no {} algorithm for the {} GEMM [{} x {}] x [{} x {}]^T",
                                         c.fp8() ? "FP8 (E4M3)" : "BF16", c.name, rows, c.in, c.out, c.in));
  }
  p->heuristic_count = static_cast<int>(p->algos.size());
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

void GemmRunner::launch(const Class& c, const Plan& p, int algo_index, bool skinny, int small_m_split,
                        int small_m_variant, int rows, const bf16* x, const void* w, bf16* y, bool accumulate,
                        cudaStream_t stream) {
  const bf16* residual = accumulate ? y : nullptr;
  if (small_m_split > 0 && !c.fp8() &&
      launch_small_m_gemm(x, rows, static_cast<const bf16*>(w), c.out, c.in, small_m_split, residual, y, small_m_ws_,
                          stream, small_m_variant)) {
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (skinny && c.fp8()) {
    launch_skinny_gemm_fp8(x, rows, static_cast<const std::uint8_t*>(w), c.fp8_scale, c.out, c.in, residual, y, stream);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    return;
  }
  if (skinny) {
    launch_skinny_gemm(x, rows, static_cast<const bf16*>(w), c.out, c.in, residual, y, stream);
    GPUSCOUT_CUDA_CHECK_LAUNCH();
    return;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const auto& h = p.algos[static_cast<std::size_t>(algo_index)];
  if (!c.fp8()) {
    GPUSCOUT_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &h.algo, workspace_,
                                         workspace_bytes_, stream));
    return;
  }
  const std::int64_t count = static_cast<std::int64_t>(rows) * c.in;
  if (static_cast<std::size_t>(count) > x_fp8_bytes_) {
    throw std::logic_error(
        fmt::format("GemmRunner: {} rows of the {} GEMM exceed the FP8 activation buffer", rows, c.name));
  }
  launch_quantize_fp8(x, count, fp8_, x_fp8_, stream);
  const void* scale = c.fp8_scale_device;  // the descriptor is shared by the FP8 classes
  lt::set(desc_fp8_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale);
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_fp8_, &alpha, w, p.a, x_fp8_, p.b, &beta, y, p.d, y, p.d, &h.algo,
                                       workspace_, workspace_bytes_, stream));
}

void GemmRunner::run(int cls, int rows, const bf16* x, const void* w, bf16* y, bool accumulate, cudaStream_t stream) {
  if (rows <= 0) return;
  const Plan& p = plan(cls, rows);
  launch(*classes_[cls], p, p.chosen, p.skinny, p.small_m_split, p.small_m_variant, rows, x, w, y, accumulate, stream);
}

bool GemmRunner::run_on_ring(int cls, int rows, const bf16* x, const void* w, const bf16* residual, bf16* y,
                             const RingInput& input, cudaStream_t stream) {
  const Class& c = *classes_[cls];
  if (!plan(cls, rows).skinny || !skinny_is_ring(rows, c.fp8()) ||
      !launch_ring_gemv(x, static_cast<const bf16*>(w), c.out, c.in, residual, y, stream, input)) {
    return false;
  }
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  return true;
}

void GemmRunner::run_normed(int cls, int rows, const bf16* h, const bf16* norm_weight, float eps, bf16* xn,
                            const void* w, bf16* y, cudaStream_t stream) {
  if (rows <= 0) return;
  RingInput input;
  input.norm_weight = norm_weight;
  input.norm_eps = eps;
  if (run_on_ring(cls, rows, h, w, nullptr, y, input, stream)) return;
  launch_rmsnorm(h, norm_weight, rows, classes_[cls]->in, eps, xn, stream);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  run(cls, rows, xn, w, y, false, stream);
}

void GemmRunner::run_silu_mul(int cls, int rows, const bf16* gate_up, bf16* act, const void* w, bf16* y,
                              bool accumulate, cudaStream_t stream) {
  if (rows <= 0) return;
  RingInput input;
  input.silu_mul = true;
  if (run_on_ring(cls, rows, gate_up, w, accumulate ? y : nullptr, y, input, stream)) return;
  launch_silu_mul(gate_up, rows, classes_[cls]->in, act, stream);
  GPUSCOUT_CUDA_CHECK_LAUNCH();
  run(cls, rows, act, w, y, accumulate, stream);
}

std::string GemmRunner::tune(int cls, int rows, const bf16* x_scratch, bf16* y_scratch, cudaStream_t stream) {
  Plan& p = plan(cls, rows);
  const Class& c = *classes_[cls];
  const int rotation = std::min<int>(kMaxRotation, static_cast<int>(c.weights.size()));
  cudaEvent_t start = nullptr, stop = nullptr;
  GPUSCOUT_CUDA_CHECK(cudaEventCreate(&start));
  GPUSCOUT_CUDA_CHECK(cudaEventCreate(&stop));
  // Per-call time of one candidate: best of a few rounds, each cycling through `rotation` weights
  // (distinct layers) so each call reads its weight from HBM, as in a real step.
  auto time_us = [&](int algo, bool skinny, int small_m_split = 0, int small_m_variant = 0, int warm_ups = 2,
                     int rounds = kTimedRounds) {
    for (int i = 0; i < warm_ups; ++i)
      launch(c, p, algo, skinny, small_m_split, small_m_variant, rows, x_scratch, c.weights[i % rotation], y_scratch,
             false, stream);
    float best = std::numeric_limits<float>::max();
    for (int round = 0; round < rounds; ++round) {
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < rotation; ++i)
        launch(c, p, algo, skinny, small_m_split, small_m_variant, rows, x_scratch, c.weights[i], y_scratch, false,
               stream);
      GPUSCOUT_CUDA_CHECK(cudaEventRecord(stop, stream));
      GPUSCOUT_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      GPUSCOUT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      best = std::min(best, ms * 1000.0f / static_cast<float>(rotation));
    }
    return static_cast<double>(best);
  };
  // The search's candidates: one quick round each, and the kSearchFinalists fastest go on to the
  // full timing beside the heuristic's (at ~1 ms per configuration, most of it the kernel's first
  // load, a full timing of every one would add seconds per class and row count to the start-up).
  // Only here, not in plan(): plan() also serves the row counts of eager steps that were never
  // tuned, inside a step, where AlgoCheck's ~1500 calls would be time lost.
  if (search_enabled_ && rows >= kSearchMinRows && rows <= kSearchMaxRows &&
      static_cast<int>(p.algos.size()) == p.heuristic_count) {
    std::vector<cublasLtMatmulHeuristicResult_t> seeds(p.algos.begin(), p.algos.end());
    auto more = search_configurations(lt_, c.fp8() ? desc_fp8_ : desc_, p.a, p.b, p.d, seeds, workspace_bytes_);
    p.algos.insert(p.algos.end(), more.begin(), more.end());
  }
  std::vector<int> timed;
  for (int a = 0; a < p.heuristic_count; ++a) timed.push_back(a);
  {
    std::vector<std::pair<double, int>> quick;
    for (int a = p.heuristic_count; a < static_cast<int>(p.algos.size()); ++a) {
      try {
        quick.emplace_back(time_us(a, false, 0, 0, 1, 1), a);
      } catch (const CudaError&) {
        continue;
      }
    }
    std::sort(quick.begin(), quick.end());
    for (std::size_t i = 0; i < quick.size() && i < static_cast<std::size_t>(kSearchFinalists); ++i)
      timed.push_back(quick[i].second);
  }
  double best_lt = std::numeric_limits<double>::max(), runner_up_lt = best_lt, first_lt = -1;
  double best_heuristic_lt = best_lt;
  int best_algo = 0, runner_up_algo = -1, best_heuristic_algo = -1;
  for (int a : timed) {
    // An algorithm the heuristic offered can still refuse these pointers; skip it then.
    double t = 0;
    try {
      t = time_us(a, false);
    } catch (const CudaError&) {
      continue;
    }
    if (a == 0) first_lt = t;
    if (a < p.heuristic_count && t < best_heuristic_lt) {
      best_heuristic_lt = t;
      best_heuristic_algo = a;
    }
    if (t < best_lt) {
      if (best_lt < std::numeric_limits<double>::max()) runner_up_algo = best_algo;
      runner_up_lt = best_lt;
      best_lt = t;
      best_algo = a;
    } else if (t < runner_up_lt) {
      runner_up_lt = t;
      runner_up_algo = a;
    }
  }
  if (best_lt == std::numeric_limits<double>::max()) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    throw std::runtime_error(
        fmt::format("none of the {} cuBLASLt algorithms for the {} GEMM (m={}) ran", p.algos.size(), c.name, rows));
  }
  p.chosen = best_algo;
  p.skinny = false;
  p.small_m_split = 0;
  p.small_m_variant = 0;
  last_tune_ = TuneTimes{};
  last_tune_.cublaslt_us = best_lt;
  last_tune_.cublaslt_first_us = first_lt;
  last_tune_.cublaslt_best = best_algo;
  last_tune_.cublaslt_candidates = p.heuristic_count;
  last_tune_.searched_candidates = static_cast<int>(p.algos.size()) - p.heuristic_count;
  last_tune_.chosen = "cublaslt";
  // The small-m kernel's splits that it accepts for these pointers and this workspace.
  std::vector<int> splits;
  if (small_m_enabled_ && !c.fp8() && rows > kSkinnyMaxRows && rows <= kSmallMMaxRows) {
    int last_effective = 0;
    for (int s : kSmallMSplits) {
      const int effective = small_m_gemm_effective_split(c.in, s);
      if (effective == last_effective) continue;  // the same launch as the previous request
      bool accepted = check_small_m_gemm(x_scratch, rows, static_cast<const bf16*>(c.weights[0]), c.out, c.in, s,
                                         small_m_ws_) == nullptr;
      for (const void* w : c.weights) accepted = accepted && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
      if (!accepted) continue;
      splits.push_back(s);
      last_effective = effective;
    }
  }
  // cuBLASLt's pick among its candidates and the runner-up's time: near ties flip between engines.
  const std::string lt_pick =
      describe_algo(p.algos[static_cast<std::size_t>(best_algo)].algo, best_algo, p.algos.size()) +
      (best_algo >= p.heuristic_count ? ", searched" : "") +
      (runner_up_lt < std::numeric_limits<double>::max() ? fmt::format(", next {:.1f} us", runner_up_lt) : "") +
      (p.algos.size() > static_cast<std::size_t>(p.heuristic_count)
           ? fmt::format("; {} heuristic + {} searched, {} timed", p.heuristic_count,
                         p.algos.size() - static_cast<std::size_t>(p.heuristic_count), timed.size())
           : "");
  p.chosen_us = best_lt;
  p.alternative_us = -1;
  p.alternative_skinny = false;
  p.alternative_split = p.alternative_variant = 0;
  p.alternative_algo = -1;
  std::string line;
  if (rows <= kSkinnyMaxRows) {
    const double skinny = time_us(0, true);
    last_tune_.skinny_us = skinny;
    p.skinny = prefer_own_ || skinny < best_lt;
    if (p.skinny) last_tune_.chosen = "skinny";
    p.alternative_skinny = !p.skinny;
    p.chosen_us = std::min(skinny, best_lt);
    p.alternative_us = std::max(skinny, best_lt);
    const char* own = skinny_is_ring(rows, c.fp8()) ? "ring" : "skinny";
    line = fmt::format("{} m={} ({}x{}): {} {:.1f} us vs {} {:.1f} us (cuBLASLt {})", c.name, rows, c.out, c.in,
                       p.skinny ? own : "cublaslt", p.skinny ? skinny : best_lt, p.skinny ? "cublaslt" : own,
                       p.skinny ? best_lt : skinny, lt_pick);
  } else if (!splits.empty()) {
    double best_small = std::numeric_limits<double>::max();
    int best_split = 0, best_variant = 0;
    for (int v = 0; v < kSmallMVariants; ++v) {
      for (int s : splits) {
        const double t = time_us(0, false, s, v);
        if (t < best_small) {
          best_small = t;
          best_split = s;
          best_variant = v;
        }
      }
    }
    last_tune_.small_m_us = best_small;
    last_tune_.small_m_split = best_split;
    last_tune_.small_m_variant = best_variant;
    const bool small = best_small < best_lt;
    if (small) {
      p.small_m_split = best_split;
      p.small_m_variant = best_variant;
      last_tune_.chosen = "small_m";
    } else {
      p.alternative_split = best_split;
      p.alternative_variant = best_variant;
    }
    p.chosen_us = std::min(best_small, best_lt);
    p.alternative_us = std::max(best_small, best_lt);
    const std::string small_name = fmt::format("small_m ({}, split {})", small_m_variant_name(best_variant),
                                               small_m_gemm_effective_split(c.in, best_split));
    line = fmt::format("{} m={} ({}x{}): {} {:.1f} us vs {} {:.1f} us (cuBLASLt {}; {} variants x {} splits)", c.name,
                       rows, c.out, c.in, small ? small_name : "cublaslt", small ? best_small : best_lt,
                       small ? "cublaslt" : small_name, small ? best_lt : best_small, lt_pick, kSmallMVariants,
                       splits.size());
  } else {
    // A searched pick's second kernel is the heuristic's best rather than the runner-up (most likely
    // another searched one): the search's per-call gains need not survive a step (session 26's
    // timeline: some searched picks start ~4 us late after a small kernel), and the in-step timing
    // decides between the two.
    const bool searched_pick = best_algo >= p.heuristic_count && best_heuristic_algo >= 0;
    if (lt_ties_enabled_ && (searched_pick || runner_up_algo >= 0)) {
      p.alternative_algo = searched_pick ? best_heuristic_algo : runner_up_algo;
      p.alternative_us = searched_pick ? best_heuristic_lt : runner_up_lt;
    }
    line = fmt::format("{} m={} ({}x{}): cublaslt {:.1f} us ({})", c.name, rows, c.out, c.in, best_lt, lt_pick);
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return line;
}

void GemmRunner::set_config_search(bool on) {
  search_enabled_ = on;
}

void GemmRunner::set_lt_ties(bool on) {
  lt_ties_enabled_ = on;
}

int GemmRunner::cublaslt_candidate_count(int cls, int rows) {
  return static_cast<int>(plan(cls, rows).algos.size());
}

void GemmRunner::run_cublaslt_candidate(int cls, int rows, int index, const bf16* x, const void* w, bf16* y,
                                        bool accumulate, cudaStream_t stream) {
  const Plan& p = plan(cls, rows);
  if (index < 0 || index >= static_cast<int>(p.algos.size())) {
    throw std::out_of_range(fmt::format("GemmRunner: no cuBLASLt candidate {} of {}", index, p.algos.size()));
  }
  launch(*classes_[cls], p, index, false, 0, 0, rows, x, w, y, accumulate, stream);
}

double GemmRunner::tie_margin(int cls, int rows) {
  const Plan& p = plan(cls, rows);
  if (p.alternative_us < 0 || p.chosen_us <= 0) return std::numeric_limits<double>::infinity();
  return (p.alternative_us - p.chosen_us) / p.chosen_us;
}

void GemmRunner::swap_choice(int cls, int rows) {
  Plan& p = plan(cls, rows);
  if (p.alternative_us < 0) throw std::logic_error("GemmRunner::swap_choice: no second kernel was timed");
  std::swap(p.skinny, p.alternative_skinny);
  std::swap(p.small_m_split, p.alternative_split);
  std::swap(p.small_m_variant, p.alternative_variant);
  if (p.alternative_algo >= 0) std::swap(p.chosen, p.alternative_algo);
  std::swap(p.chosen_us, p.alternative_us);
}

std::string GemmRunner::choice_name(int cls, int rows) {
  const Plan& p = plan(cls, rows);
  const Class& c = *classes_.at(cls);
  if (p.skinny) return skinny_is_ring(rows, c.fp8()) ? "ring" : "skinny";
  if (p.small_m_split > 0) return "small_m";
  if (p.alternative_algo >= 0) return fmt::format("cublaslt#{}", p.chosen + 1);
  return "cublaslt";
}

const std::string& GemmRunner::class_name(int cls) const {
  return classes_.at(cls)->name;
}

}  // namespace gpuscout::cuda::infer
