// Experiment (session 36): split-k as a strided batch, its reduction done by the kernel that reads
// the GEMM's output anyway. At 32 decode rows the small layer GEMMs launch few blocks (the H100's qkv
// pick 48, o and down 64 on 132 SMs) or pay a separate split-k reduction kernel (the H200's o and
// down, ~2.5 us each). Here each GEMM is cut along k into s slices as a strided batch of s GEMMs with
// FP32 outputs (no reduction kernel: s x more blocks, s partial outputs), and the kernel after it (an
// RMSNorm with the residual add, as the engine runs after o and down) sums the s partials as it reads
// them. Both forms are timed as the engine runs them: CUDA graphs of `layers` x (that consumer kernel,
// the GEMM), distinct weights per layer so that they stream from HBM.
//   engine form: D BF16, the residual added by the GEMM (beta = 1, in place) for o and down, and the
//                consumer reads D;
//   partials form (s = 1, 2, 3, 4, 6, 7, 8 where k / s is a multiple of 8): D FP32 [s][rows][out],
//                beta = 0, the consumer adds the residual and the s partials in order.
// Each form's cuBLASLt candidates are the heuristic's, up to 16 (8 came on an H100; the engine also
// searches around them, which is not here), each timed in the chain, the best kept. The consumer is
// a plain one (scalar loads, one block per row): compare the GEMM columns, the chain minus the
// consumer alone, not the chain totals.
// Build (repository root):
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probe/split_partials_probe.cu -lcublasLt -o split_partials_probe
// Run: ./split_partials_probe [rows, default 32] [layers, default 32] [rounds, default 7]
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.hpp"

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // as the engine's GemmRunner
constexpr int kCandidates = 16;

// One block per row: v = residual + sum of the `parts` FP32 partials (parts > 0), or v = y_bf16
// (parts == 0, the engine form, where the GEMM added the residual); writes v back as the new
// residual (BF16) and x_next[row][k] = v[k % out] / rms(v) for k < in_next: the RMSNorm that feeds the
// next GEMM, sized to its input.
template <int kThreads>
__global__ void consume(const float* partials, int parts, __nv_bfloat16* residual, int out, __nv_bfloat16* x_next,
                        int in_next, std::size_t part_stride) {
  const int row = blockIdx.x;
  __nv_bfloat16* res = residual + std::size_t(row) * out;
  float ss = 0;
  for (int j = threadIdx.x; j < out; j += kThreads) {
    float v = __bfloat162float(res[j]);
    if (parts > 0)
      for (int p = 0; p < parts; ++p) v += partials[p * part_stride + std::size_t(row) * out + j];
    const __nv_bfloat16 b = __float2bfloat16(v);
    if (parts > 0) res[j] = b;
    const float r = __bfloat162float(b);
    ss += r * r;
  }
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  const float inv = rsqrtf(total / out + 1e-5f);
  __nv_bfloat16* xn = x_next + std::size_t(row) * in_next;
  for (int k = threadIdx.x; k < in_next; k += kThreads) xn[k] = __float2bfloat16(__bfloat162float(res[k % out]) * inv);
}

struct Shape {
  const char* name;
  int out, in;
  bool residual;  // the engine adds the residual in the GEMM (o, down)
};

struct Lt {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  void* workspace = nullptr;
  cudaStream_t stream = nullptr;
};

// One form of one shape: the descriptors, the candidates, the buffers.
struct Form {
  int split = 0;  // 0: engine form; s >= 1: s FP32 partials
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;
};

void set_batch(cublasLtMatrixLayout_t l, int count, std::int64_t stride) {
  LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

Form make_form(Lt& lt, const Shape& s, int rows, int split) {
  Form f;
  f.split = split;
  LT(cublasLtMatmulDescCreate(&f.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(f.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  LT(cublasLtMatmulDescSetAttribute(f.desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
  const int k = split > 0 ? s.in / split : s.in;
  // Column-major: A = W [in x out] (ld in) used transposed, B = x [in x rows] (ld in), D [out x rows].
  LT(cublasLtMatrixLayoutCreate(&f.a, CUDA_R_16BF, k, s.out, s.in));
  LT(cublasLtMatrixLayoutCreate(&f.b, CUDA_R_16BF, k, rows, s.in));
  LT(cublasLtMatrixLayoutCreate(&f.d, split > 0 ? CUDA_R_32F : CUDA_R_16BF, s.out, rows, s.out));
  if (split > 1) {
    set_batch(f.a, split, k);
    set_batch(f.b, split, k);
    set_batch(f.d, split, std::int64_t(s.out) * rows);
  }
  cublasLtMatmulHeuristicResult_t r[kCandidates];
  int returned = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt.handle, f.desc, f.a, f.b, f.d, f.d, lt.pref, kCandidates, r, &returned) ==
      CUBLAS_STATUS_SUCCESS)
    for (int i = 0; i < returned; ++i)
      if (r[i].state == CUBLAS_STATUS_SUCCESS) f.algos.push_back(r[i].algo);
  return f;
}

struct Buffers {
  std::vector<__nv_bfloat16*> weights;  // one per layer
  __nv_bfloat16* x = nullptr;           // [rows][in]
  __nv_bfloat16* y = nullptr;           // [rows][out]: the engine form's D, the residual stream
  float* partials = nullptr;            // [8][rows][out]
};

bool enqueue_gemm(Lt& lt, const Shape& s, const Form& f, const cublasLtMatmulAlgo_t& algo, const void* w,
                  const Buffers& b) {
  const float alpha = 1.0f, beta = (f.split == 0 && s.residual) ? 1.0f : 0.0f;
  void* d = f.split > 0 ? static_cast<void*>(b.partials) : static_cast<void*>(b.y);
  return cublasLtMatmul(lt.handle, f.desc, &alpha, w, f.a, b.x, f.b, &beta, d, f.d, d, f.d, &algo, lt.workspace,
                        kWorkspaceBytes, lt.stream) == CUBLAS_STATUS_SUCCESS;
}

void enqueue_consume(Lt& lt, const Shape& s, int rows, const Form& f, const Buffers& b) {
  consume<256><<<rows, 256, 0, lt.stream>>>(b.partials, f.split, b.y, s.out, b.x, s.in, std::size_t(s.out) * rows);
}

// us per layer of a graph of `layers` x (consumer, GEMM) (gemm_too false: the consumers alone);
// median of `rounds` launches; < 0 if the candidate failed.
double time_chain(Lt& lt, const Shape& s, int rows, const Form& f, const cublasLtMatmulAlgo_t* algo, const Buffers& b,
                  int rounds) {
  cudaGraph_t graph = nullptr;
  CK(cudaStreamBeginCapture(lt.stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (auto* w : b.weights) {
    enqueue_consume(lt, s, rows, f, b);
    if (algo) ok = ok && enqueue_gemm(lt, s, f, *algo, w, b);
  }
  CK(cudaStreamEndCapture(lt.stream, &graph));
  if (!ok || cudaGetLastError() != cudaSuccess) {
    cudaGraphDestroy(graph);
    return -1;
  }
  cudaGraphExec_t exec = nullptr;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  const double us = median_graph_us(exec, lt.stream, 2, rounds, static_cast<double>(b.weights.size()));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  return us;
}

std::string algo_text(const cublasLtMatmulAlgo_t& a) {
  std::int32_t id = 0, splitk = 0;
  std::uint32_t tile = 0;
  std::size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
  char text[96];
  std::snprintf(text, sizeof(text), "algo %d tile %u split-k %d", id, tile, splitk);
  return text;
}

// The partials form against the engine form on layer 0's weights: both from the same x and
// residual; the largest difference over the largest magnitude (BF16 rounding of the engine form's
// output: ~2^-8).
double check(Lt& lt, const Shape& s, int rows, const Form& engine, const Form& part, const Buffers& b) {
  if (engine.algos.empty() || part.algos.empty()) return -1;
  const std::size_t n = std::size_t(rows) * s.out;
  std::vector<__nv_bfloat16> y0(n), want(n), got(n);
  CK(cudaStreamSynchronize(lt.stream));
  CK(cudaMemcpy(y0.data(), b.y, n * 2, cudaMemcpyDeviceToHost));
  // lt.stream does not synchronize with the legacy stream: every copy waits for it first.
  if (!enqueue_gemm(lt, s, engine, engine.algos[0], b.weights[0], b)) return -1;
  CK(cudaStreamSynchronize(lt.stream));
  CK(cudaMemcpy(want.data(), b.y, n * 2, cudaMemcpyDeviceToHost));
  if (!s.residual)  // the engine form wrote x W^T alone; compare against the partials summed onto zero
    CK(cudaMemset(b.y, 0, n * 2));
  else
    CK(cudaMemcpy(b.y, y0.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());
  if (!enqueue_gemm(lt, s, part, part.algos[0], b.weights[0], b)) return -1;
  // Only the sum into y is wanted; a scratch x_next keeps the real x intact.
  __nv_bfloat16* scratch = nullptr;
  CK(cudaMalloc(&scratch, std::size_t(rows) * s.in * 2));
  consume<256><<<rows, 256, 0, lt.stream>>>(b.partials, part.split, b.y, s.out, scratch, s.in, n);
  CK(cudaStreamSynchronize(lt.stream));
  CK(cudaFree(scratch));
  CK(cudaMemcpy(got.data(), b.y, n * 2, cudaMemcpyDeviceToHost));
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = __bfloat162float(want[i]), g = __bfloat162float(got[i]);
    worst = std::max(worst, std::fabs(w - g));
    scale = std::max(scale, std::fabs(w));
  }
  return scale > 0 ? worst / scale : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 32;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 32;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  if (rows < 1 || rows > 256 || layers < 2 || rounds < 1) {
    std::printf("usage: split_partials_probe [rows 1..256] [layers >= 2] [rounds >= 1]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; cuBLASLt %zu; rows %d, layers %d, rounds %d\n", prop.name, prop.multiProcessorCount,
              cublasLtGetVersion(), rows, layers, rounds);
  Lt lt;
  LT(cublasLtCreate(&lt.handle));
  LT(cublasLtMatmulPreferenceCreate(&lt.pref));
  std::size_t ws = kWorkspaceBytes;
  LT(cublasLtMatmulPreferenceSetAttribute(lt.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  CK(cudaMalloc(&lt.workspace, kWorkspaceBytes));
  CK(cudaStreamCreateWithFlags(&lt.stream, cudaStreamNonBlocking));

  const Shape shapes[] = {{"qkv", 6144, 4096, false},
                          {"o", 4096, 4096, true},
                          {"gate_up", 28672, 4096, false},
                          {"down", 4096, 14336, true}};
  const int splits[] = {1, 2, 3, 4, 6, 7, 8};
  std::printf("us per layer: consumer + GEMM in the chain; 'GEMM' = that minus the consumer alone\n");
  for (const Shape& s : shapes) {
    Buffers b;
    for (int l = 0; l < layers; ++l) {
      __nv_bfloat16* w = nullptr;
      CK(cudaMalloc(&w, std::size_t(s.out) * s.in * 2));
      fill_bf16<<<1024, 256>>>(w, std::size_t(s.out) * s.in, 100 + l, 0.05f);
      b.weights.push_back(w);
    }
    CK(cudaMalloc(&b.x, std::size_t(rows) * s.in * 2));
    CK(cudaMalloc(&b.y, std::size_t(rows) * s.out * 2));
    CK(cudaMalloc(&b.partials, std::size_t(8) * rows * s.out * 4));
    fill_bf16<<<256, 256>>>(b.x, std::size_t(rows) * s.in, 7, 2.0f);
    fill_bf16<<<256, 256>>>(b.y, std::size_t(rows) * s.out, 9, 2.0f);
    CK(cudaMemset(b.partials, 0, std::size_t(8) * rows * s.out * 4));
    CK(cudaDeviceSynchronize());
    const double weight_mb = double(s.out) * s.in * 2 / 1e6;

    std::vector<Form> forms{make_form(lt, s, rows, 0)};
    for (int sp : splits)
      if (s.in % (sp * 8) == 0) forms.push_back(make_form(lt, s, rows, sp));
    double engine_best = -1;
    for (const Form& f : forms) {
      const double consumer = time_chain(lt, s, rows, f, nullptr, b, rounds);
      double best = -1;
      std::size_t best_i = 0;
      for (std::size_t i = 0; i < f.algos.size(); ++i) {
        const double us = time_chain(lt, s, rows, f, &f.algos[i], b, rounds);
        if (us > 0 && (best < 0 || us < best)) best = us, best_i = i;
      }
      std::string form = f.split == 0 ? "engine form (BF16 D" + std::string(s.residual ? ", beta 1)" : ")")
                                      : "partials s=" + std::to_string(f.split);
      if (best < 0) {
        std::printf("%-8s %-24s no candidate ran (%zu from the heuristic)\n", s.name, form.c_str(), f.algos.size());
        continue;
      }
      if (f.split == 0) engine_best = best;
      const double gemm = best - consumer;
      const double rel = f.split > 0 ? check(lt, s, rows, forms[0], f, b) : 0;
      std::printf("%-8s %-24s %7.2f us (consumer %5.2f, GEMM %6.2f us = %5.0f GB/s)", s.name, form.c_str(), best,
                  consumer, gemm, weight_mb * 1e3 / gemm);
      if (f.split > 0) std::printf("  %+6.2f us vs engine form; max diff %.1e", best - engine_best, rel);
      std::printf("  [#%zu of %zu: %s]\n", best_i + 1, f.algos.size(), algo_text(f.algos[best_i]).c_str());
    }
    for (Form& f : forms) {
      cublasLtMatrixLayoutDestroy(f.a);
      cublasLtMatrixLayoutDestroy(f.b);
      cublasLtMatrixLayoutDestroy(f.d);
      cublasLtMatmulDescDestroy(f.desc);
    }
    for (auto* w : b.weights) CK(cudaFree(w));
    CK(cudaFree(b.x));
    CK(cudaFree(b.y));
    CK(cudaFree(b.partials));
  }
  return 0;
}
