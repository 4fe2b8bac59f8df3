// Experiment (session 27): does a bulk L2 prefetch of a decode GEMM's weights make that GEMM faster,
// and do the lines survive a K/V-sized stream read in between? In the engine (GPUSCOUT_L2_PREFETCH=2)
// the o projection's 33.6 MB prefetched during decode attention bought 0.9 us of its 11.4 us on an
// H200 and cost attention 0.6 us (bench/NOTES.md, session 27). This separates the parts: the o GEMM
// of Llama-3.1-8B at 32 rows (cuBLASLt's heuristic pick, D[32, 4096] = x W^T), timed alone with CUDA
// events after each preparation, L2 flushed (a 512 MB read) before every preparation:
//   cold          nothing: W comes from HBM
//   read          a kernel reads W with plain loads (W in the L2 as far as it fits)
//   prefetch      bulk prefetches of W (cp.async.bulk.prefetch.L2), then a 40 us wait
//   prefetch_last the same with an evict-last L2 policy on the prefetches
//   stream        a 71 MB stream read (decode attention's K/V at batch 32) at full speed
//   pf+stream     the stream kernel also prefetches W (its blocks' thread 0, first), stream evict-first
//   pf+stream_nh  the same, the stream without a policy
//   pfl+stream    evict-last prefetches, evict-first stream
// and each preparation kernel's own time, so a prefetch's cost to the kernel issuing it shows.
// Build (repository root): nvcc -O3 -std=c++17 -arch=sm_90a bench/probe/l2_prefetch_probe.cu -lcublasLt -o
// l2_prefetch_probe Run: ./l2_prefetch_probe [repeats, default 40]
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.hpp"

namespace {

constexpr int kRows = 32, kN = 4096, kK = 4096;

__device__ std::uint64_t policy_of(int kind) {  // 0 none, 1 evict_first, 2 evict_last
  std::uint64_t p = 0;
  if (kind == 1) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  if (kind == 2) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}

__device__ void prefetch_share(const char* base, std::size_t bytes, int policy_kind) {
  if (bytes == 0 || threadIdx.x != 0) return;
  const std::uint64_t units = bytes / 16, b = blockIdx.x, g = gridDim.x;
  const std::uint64_t begin = units * b / g * 16, end = units * (b + 1) / g * 16;
  const std::uint64_t policy = policy_of(policy_kind);
  for (std::uint64_t at = begin; at < end; at += 65536) {
    const unsigned n = static_cast<unsigned>(end - at < 65536 ? end - at : 65536);
    if (policy_kind == 0) {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + at), "r"(n) : "memory");
    } else {
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(base + at), "r"(n), "l"(policy)
                   : "memory");
    }
  }
}

// Reads n 16-byte words (grid-stride), optionally under an L2 policy; the block's thread 0 first
// issues its share of the prefetch.
__global__ void stream_kernel(const uint4* p, std::size_t n, int load_policy, const char* pf, std::size_t pf_bytes,
                              int pf_policy, unsigned* sink) {
  prefetch_share(pf, pf_bytes, pf_policy);
  const std::uint64_t policy = policy_of(load_policy);
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    uint4 v;
    if (load_policy == 0) {
      asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + i));
    } else {
      asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + i), "l"(policy));
    }
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

__global__ void prefetch_kernel(const char* pf, std::size_t bytes, int pf_policy) {
  prefetch_share(pf, bytes, pf_policy);
}

__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

struct Lt {
  cublasLtHandle_t handle{};
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, d{};
  cublasLtMatmulAlgo_t algo{};
  void* ws = nullptr;
  std::size_t ws_bytes = 32 << 20;
};

Lt make_lt() {
  Lt lt;
  LT(cublasLtCreate(&lt.handle));
  LT(cublasLtMatmulDescCreate(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  LT(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
  // Column-major operands: A = W ([kN, kK] row-major, i.e. [kK, kN], used transposed), B = x^T [kK, kRows],
  // D = y^T [kN, kRows]: y = x W^T, the engine's layout.
  LT(cublasLtMatrixLayoutCreate(&lt.a, CUDA_R_16BF, kK, kN, kK));
  LT(cublasLtMatrixLayoutCreate(&lt.b, CUDA_R_16BF, kK, kRows, kK));
  LT(cublasLtMatrixLayoutCreate(&lt.d, CUDA_R_16BF, kN, kRows, kN));
  CK(cudaMalloc(&lt.ws, lt.ws_bytes));
  cublasLtMatmulPreference_t pref{};
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt.ws_bytes,
                                          sizeof(lt.ws_bytes)));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  LT(cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.desc, lt.a, lt.b, lt.d, lt.d, pref, 1, &r, &found));
  if (found == 0) {
    std::puts("no cuBLASLt algorithm");
    std::exit(1);
  }
  lt.algo = r.algo;
  cublasLtMatmulPreferenceDestroy(pref);
  return lt;
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 40;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s | L2 %d MB | SMs %d\n", prop.name, prop.l2CacheSize >> 20, prop.multiProcessorCount);
  const std::size_t w_bytes = std::size_t{kN} * kK * 2, kv_bytes = 71u << 20, flush_bytes = 512u << 20;
  char *w = nullptr, *x = nullptr, *y = nullptr, *kv = nullptr, *flush = nullptr;
  unsigned* sink = nullptr;
  CK(cudaMalloc(&w, w_bytes));
  CK(cudaMalloc(&x, std::size_t{kRows} * kK * 2));
  CK(cudaMalloc(&y, std::size_t{kRows} * kN * 2));
  CK(cudaMalloc(&kv, kv_bytes));
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(w, 0x11, w_bytes));
  CK(cudaMemset(x, 0x11, std::size_t{kRows} * kK * 2));
  CK(cudaMemset(kv, 0x22, kv_bytes));
  CK(cudaMemset(flush, 0x33, flush_bytes));
  Lt lt = make_lt();
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t st{};
  CK(cudaStreamCreate(&st));
  auto gemm = [&] {
    LT(cublasLtMatmul(lt.handle, lt.desc, &alpha, w, lt.a, x, lt.b, &beta, y, lt.d, y, lt.d, &lt.algo, lt.ws,
                      lt.ws_bytes, st));
  };
  const int sms = prop.multiProcessorCount;
  auto flush_l2 = [&] {
    stream_kernel<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(flush), flush_bytes / 16, 0, nullptr, 0, 0,
                                           sink);
  };
  // Cycles for ~40 us at the SM clock (kHz; CUDA 13 has it as an attribute only).
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long wait_cycles = static_cast<long long>(clock_khz) * 40 / 1000;
  struct Case {
    const char* name;
    int prep;  // 0 none, 1 read W, 2 prefetch + wait, 3 stream K/V (+ prefetch)
    int pf_policy, load_policy;
    bool prefetch;
  };
  const Case cases[] = {{"cold", 0, 0, 0, false},           {"read", 1, 0, 0, false},
                        {"prefetch", 2, 0, 0, true},        {"prefetch_last", 2, 2, 0, true},
                        {"stream", 3, 0, 1, false},         {"pf+stream", 3, 0, 1, true},
                        {"pf+stream_nh", 3, 0, 0, true},    {"pfl+stream", 3, 2, 1, true},
                        {"stream 264 blk", 4, 0, 1, false}, {"pf+stream 264 blk", 4, 0, 1, true}};
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));
  for (int i = 0; i < 5; ++i) gemm();
  CK(cudaStreamSynchronize(st));
  for (const Case& c : cases) {
    std::vector<float> gemm_us, prep_us;
    for (int r = 0; r < repeats; ++r) {
      flush_l2();
      CK(cudaEventRecord(e0, st));
      if (c.prep == 1) {
        stream_kernel<<<sms * 4, 512, 0, st>>>(reinterpret_cast<const uint4*>(w), w_bytes / 16, 0, nullptr, 0, 0, sink);
      } else if (c.prep == 2) {
        prefetch_kernel<<<sms * 2, 32, 0, st>>>(w, w_bytes, c.pf_policy);
        spin_kernel<<<1, 1, 0, st>>>(wait_cycles);
      } else if (c.prep >= 3) {
        // 4: a grid like decode attention's (2 blocks of 128 threads per SM), which streams slower.
        const int blocks = c.prep == 3 ? sms * 4 : sms * 2, threads = c.prep == 3 ? 512 : 128;
        stream_kernel<<<blocks, threads, 0, st>>>(reinterpret_cast<const uint4*>(kv), kv_bytes / 16, c.load_policy,
                                                  c.prefetch ? w : nullptr, c.prefetch ? w_bytes : 0, c.pf_policy,
                                                  sink);
      }
      CK(cudaEventRecord(e1, st));
      gemm();
      CK(cudaEventRecord(e2, st));
      CK(cudaEventSynchronize(e2));
      float a = 0, b = 0;
      CK(cudaEventElapsedTime(&a, e0, e1));
      CK(cudaEventElapsedTime(&b, e1, e2));
      prep_us.push_back(a * 1e3f);
      gemm_us.push_back(b * 1e3f);
    }
    CK(cudaGetLastError());
    std::printf("%-18s o GEMM %7.2f us (%5.2f TB/s of W) | preparation %7.2f us\n", c.name, median(gemm_us),
                w_bytes / (median(gemm_us) * 1e-6) / 1e12, median(prep_us));
  }
  return 0;
}
