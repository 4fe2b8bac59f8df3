// The small-m decode GEMM (backends/cuda/infer/gemm_small_m.hpp) against a CPU reference of the
// same BF16 inputs, and the GemmRunner that offers it. Random inputs drawn fresh for every shape;
// outputs poisoned (NaN) before each launch and a guard row past the output checked untouched, so
// an element the kernel forgot to write, or one it wrote out of bounds, fails too.
//   infer_gemm_test                 run the checks; exit 0 passed, 1 failed, 77 no GPU (CTest: skipped)
//   infer_gemm_test --kernel-only   only the direct kernel checks (small enough for compute-sanitizer)
//   infer_gemm_test --bench         also time it on the Llama-3.1-8B shapes against cuBLASLt
//   infer_gemm_test --swiglu [--bench]  only the gate/up GEMM with its SwiGLU epilogue (and its timing)
//   infer_gemm_test --profile       only the gate_up shape at 32 rows, each variant and cuBLASLt (for ncu)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bf16_test_util.hpp"
#include "engine_gemm.hpp"
#include "gemm_small_m.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/infer/weights.hpp"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace {

namespace gi = gpuscout::infer;
using namespace gpuscout::cuda::infer;
using namespace gpuscout::cuda::test;

// y = x W^T (+ residual) in double, and per element sum_k |x w| (+ |residual|), the scale of the
// FP32 accumulation error.
struct Reference {
  std::vector<double> y, magnitude;
  std::vector<double> product;  // x W^T alone
};
Reference reference(const std::vector<u16>& x, const std::vector<u16>& w, int rows, int n, int k) {
  Reference ref;
  ref.y.resize(static_cast<std::size_t>(rows) * n);
  ref.magnitude.resize(ref.y.size());
  std::vector<float> xf(x.size()), wf(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) xf[i] = to_f(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) wf[i] = to_f(w[i]);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < n; ++c) {
      const float* xr = &xf[static_cast<std::size_t>(r) * k];
      const float* wr = &wf[static_cast<std::size_t>(c) * k];
      double s = 0, m = 0;
      for (int i = 0; i < k; ++i) {
        const double p = static_cast<double>(xr[i]) * wr[i];
        s += p;
        m += std::fabs(p);
      }
      const std::size_t o = static_cast<std::size_t>(r) * n + c;
      ref.y[o] = s;
      ref.product.push_back(s);
      ref.magnitude[o] = m;
    }
  }
  return ref;
}
Reference plus_residual(Reference ref, const std::vector<u16>& residual) {
  for (std::size_t o = 0; o < ref.y.size(); ++o) {
    const double res = to_f(residual[o]);
    ref.y[o] += res;
    ref.magnitude[o] += std::fabs(res);
  }
  return ref;
}

// BF16 output: rounding to nearest costs up to half a step, 2^-9 relative (2^-8 allowed); FP32
// accumulation in another order (and the residual added in FP32) adds at most ~k 2^-24 of sum |x w|,
// far under the 2^-14 of it allowed. Any lost or doubled k step, row or split is off by ~|x w| per
// missing product, far over both. NaN never passes. `product_rounded`: the product itself may be
// rounded to BF16 before the residual is added (cuBLASLt's epilogue, seen on the H200: up to 1.5x
// the single-rounding bound), another 2^-8 of |x W^T|.
struct Verdict {
  std::size_t bad = 0, first_bad = 0;
  double worst_ratio = 0;  // max |err| / tolerance
};
Verdict compare(const std::vector<u16>& got, const Reference& ref, bool product_rounded = false) {
  Verdict v;
  for (std::size_t i = 0; i < ref.y.size(); ++i) {
    const double g = to_f(got[i]);
    const double tol = std::ldexp(std::fabs(ref.y[i]), -8) + std::ldexp(ref.magnitude[i], -14) +
                       (product_rounded ? std::ldexp(std::fabs(ref.product[i]), -8) : 0.0);
    const double e = std::fabs(g - ref.y[i]);
    if (!(e <= tol)) {
      if (v.bad++ == 0) v.first_bad = i;
    }
    if (!std::isnan(e)) v.worst_ratio = std::max(v.worst_ratio, e / tol);
  }
  return v;
}

std::string describe(const Verdict& v, const std::vector<u16>& got, const Reference& ref) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "max err/tol %.2f, %zu of %zu off", v.worst_ratio, v.bad, ref.y.size());
  std::string s = buf;
  if (v.bad) {
    std::snprintf(buf, sizeof buf, ", first #%zu got %g want %g", v.first_bad, to_f(got[v.first_bad]),
                  ref.y[v.first_bad]);
    s += buf;
  }
  return s;
}

struct Shape {
  int n, k;
  std::vector<int> splits;
};

// Every row count, shape and split, with the residual off and on (aliased to the output, as the
// engine calls it), results bit-identical across repeats (deterministic split-k).
void test_small_m_kernel(bool quick) {
  // k = 4160 is 130 steps of 32, not a multiple of the 4-step groups nor of any split; k = 96 is
  // less than one group; n = 200, 130, 72 leave a partial tile of 128 output columns.
  const std::vector<Shape> shapes = {
      {200, 256, {1, 2, 3}}, {384, 1024, {1, 4, 8}}, {130, 4160, {1, 3, 16}}, {72, 96, {1, 2}}, {1000, 512, {2}}};
  std::vector<int> row_counts = {1, 8, 9, 16, 17, 32, 33, 64};
  if (quick) row_counts = {1, 9, 33, 64};
  const int max_tiles = 64;
  Dev<unsigned> counters(max_tiles);
  CUDA_CHECK(cudaMemset(counters.p, 0, max_tiles * sizeof(unsigned)));
  Dev<float> partials(static_cast<std::size_t>(16) * 64 * 1000);
  SmallMWorkspace ws{counters.p, max_tiles, partials.p, partials.n};
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  for (const Shape& s : shapes) {
    const auto w = random_bf16(static_cast<std::size_t>(s.n) * s.k);
    Dev<u16> dw(w);
    for (int rows : row_counts) {
      const auto x = random_bf16(static_cast<std::size_t>(rows) * s.k);
      const auto residual = random_bf16(static_cast<std::size_t>(rows) * s.n, 4.0f);
      Dev<u16> dx(x);
      // One guard row past the output: must come back still poisoned.
      const std::size_t out_elems = static_cast<std::size_t>(rows) * s.n;
      Dev<u16> dy(out_elems + s.n);
      const Reference plain = reference(x, w, rows, s.n, s.k);
      const Reference with_res = plus_residual(plain, residual);
      for (int variant = 0; variant < kSmallMVariants; ++variant) {
        for (int split : s.splits) {
          for (bool accumulate : {false, true}) {
            std::vector<u16> init(out_elems + s.n, kPoison);
            if (accumulate) std::copy(residual.begin(), residual.end(), init.begin());
            std::vector<u16> first;
            bool deterministic = true, guard_ok = true, launched = true;
            for (int rep = 0; rep < 2; ++rep) {
              dy.upload(init);
              launched = launch_small_m_gemm(dx.as<bf16>(), rows, dw.as<bf16>(), s.n, s.k, split,
                                             accumulate ? dy.as<bf16>() : nullptr, dy.as<bf16>(), ws, stream, variant);
              CUDA_CHECK(cudaGetLastError());
              CUDA_CHECK(cudaStreamSynchronize(stream));
              auto got = dy.download();
              for (std::size_t i = out_elems; i < got.size(); ++i) guard_ok = guard_ok && got[i] == kPoison;
              got.resize(out_elems);
              if (rep == 0) {
                first = got;
              } else {
                deterministic = got == first;
              }
            }
            const Verdict v = compare(first, accumulate ? with_res : plain);
            char name[160];
            std::snprintf(name, sizeof name, "small_m v%d rows %2d n %4d k %4d split %2d->%-2d%s", variant, rows, s.n,
                          s.k, split, small_m_gemm_effective_split(s.k, split), accumulate ? " +residual" : "");
            std::string detail = launched ? describe(v, first, accumulate ? with_res : plain) : "refused the launch";
            if (!deterministic) detail += "; repeats differ";
            if (!guard_ok) detail += "; wrote past the output";
            report(name, launched && v.bad == 0 && deterministic && guard_ok, detail);
          }
        }
      }
    }
  }
  const auto left = counters.download();
  report("small_m split-k counters back at zero",
         std::all_of(left.begin(), left.end(), [](unsigned c) { return c == 0; }), "");

  // The checker itself: one output element off by a single BF16 step of a large value must fail.
  {
    const int rows = 16, n = 200, k = 256;
    const auto w = random_bf16(static_cast<std::size_t>(n) * k), x = random_bf16(static_cast<std::size_t>(rows) * k);
    Dev<u16> dw(w), dx(x), dy(static_cast<std::size_t>(rows) * n);
    launch_small_m_gemm(dx.as<bf16>(), rows, dw.as<bf16>(), n, k, 1, nullptr, dy.as<bf16>(), ws, stream);
    CUDA_CHECK(cudaGetLastError());
    auto got = dy.download();
    const Reference ref = reference(x, w, rows, n, k);
    std::size_t big = 0;
    for (std::size_t i = 0; i < ref.y.size(); ++i)
      if (std::fabs(ref.y[i]) > std::fabs(ref.y[big])) big = i;
    const bool clean = compare(got, ref).bad == 0;
    got[big] = to_b(to_f(got[big]) * (1.0f + 1.0f / 32));  // 4 BF16 steps
    const bool caught = compare(got, ref).bad == 1;
    report("checker: passes the kernel, catches one element 4 BF16 steps off", clean && caught, "");
  }

  // Refusals: the launch says no, launches nothing.
  {
    Dev<u16> buf(static_cast<std::size_t>(128) * 1024 + 8);
    const bf16* b = buf.as<bf16>();
    SmallMWorkspace none;
    struct Case {
      const char* what;
      const bf16* x;
      int rows, n, k, split;
      const SmallMWorkspace* ws;
    };
    const Case cases[] = {{"rows 65", b, 65, 64, 256, 1, &ws},
                          {"rows 0", b, 0, 64, 256, 1, &ws},
                          {"k 100", b, 16, 64, 100, 1, &ws},
                          {"x not 16-byte aligned", b + 1, 16, 64, 256, 1, &ws},
                          {"split 4 without a workspace", b, 16, 64, 1024, 4, &none},
                          {"split 16 with partials too small", b, 64, 1024, 4096, 16, &ws}};
    for (const Case& c : cases) {
      const char* why = check_small_m_gemm(c.x, c.rows, b, c.n, c.k, c.split, *c.ws);
      const bool launched =
          launch_small_m_gemm(c.x, c.rows, b, c.n, c.k, c.split, nullptr, buf.as<bf16>(), *c.ws, stream);
      report(std::string("small_m refuses ") + c.what, why != nullptr && !launched, why ? why : "accepted");
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// GemmRunner: tune at 1..64 rows on a decode-sized shape, then run() with and without the residual;
// whichever kernel tune chose must be right, and so must the second one after swap_choice() (the
// engine's in-step resolution of near ties runs it), and swapping twice restores the first.
void test_runner() {
  const int n = 4096, k = 4096, layers = 3;
  std::vector<std::vector<u16>> w;
  std::vector<Dev<u16>*> dw;
  std::vector<const void*> ptrs;
  for (int l = 0; l < layers; ++l) {
    w.push_back(random_bf16(static_cast<std::size_t>(n) * k));
    dw.push_back(new Dev<u16>(w.back()));
    ptrs.push_back(dw.back()->p);
  }
  const std::size_t ws_bytes = 32ull << 20;
  Dev<char> workspace(ws_bytes);
  GemmRunner runner(workspace.p, ws_bytes);
  runner.set_config_search(true);  // so that its configurations are checked below
  runner.set_lt_ties(true);        // so that above 8 rows cuBLASLt's runner-up is swapped in and checked
  const int cls = runner.add_class("o", n, k, ptrs);
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  Dev<u16> scratch_x(random_bf16(static_cast<std::size_t>(64) * k));
  Dev<u16> scratch_y(static_cast<std::size_t>(64) * n);
  for (int rows : {1, 8, 9, 32, 33, 64}) {
    std::string line;
    {
      const ProgrammaticLaunchPause plain;
      line = runner.tune(cls, rows, scratch_x.as<bf16>(), scratch_y.as<bf16>(), stream);
    }
    const auto x = random_bf16(static_cast<std::size_t>(rows) * k);
    const auto residual = random_bf16(static_cast<std::size_t>(rows) * n, 4.0f);
    Dev<u16> dx(x), dy(static_cast<std::size_t>(rows) * n);
    const int layer = rows % layers;
    const Reference plain = reference(x, w[layer], rows, n, k);
    const std::string tuned = runner.choice_name(cls, rows);
    const bool second = std::isfinite(runner.tie_margin(cls, rows));
    // Up to 8 rows the skinny kernel is always timed against cuBLASLt, above it cuBLASLt's runner-up:
    // there is a second kernel.
    report("runner rows " + std::to_string(rows) + " has a second kernel", second, line);
    for (int pass = 0; pass < (second ? 2 : 1); ++pass) {
      if (pass == 1) runner.swap_choice(cls, rows);
      const std::string chosen = runner.choice_name(cls, rows);
      if (pass == 1) {
        report("runner rows " + std::to_string(rows) + " swapped", chosen != tuned, tuned + " -> " + chosen);
        // Above kSkinnyMaxRows (where our kernel is the other one), a searched pick's second kernel is
        // the best of cuBLASLt's heuristic candidates, which come first ("cublaslt#N", N from 1; the
        // tune line says "..., searched, ...; H heuristic + ...").
        const std::size_t heuristic_at = line.find(" heuristic + ");
        if (rows > kSkinnyMaxRows && line.find(", searched,") != std::string::npos &&
            heuristic_at != std::string::npos) {
          const int heuristic = std::atoi(line.c_str() + line.rfind(' ', heuristic_at - 1) + 1);
          const std::size_t hash = chosen.find('#');
          const int second_index = hash == std::string::npos ? 0 : std::atoi(chosen.c_str() + hash + 1);
          report("runner rows " + std::to_string(rows) + " searched pick against the heuristic's best",
                 second_index >= 1 && second_index <= heuristic,
                 chosen + " of " + std::to_string(heuristic) + " heuristic candidates");
        }
      }
      for (bool accumulate : {false, true}) {
        dy.upload(accumulate ? residual : std::vector<u16>(dy.n, kPoison));
        runner.run(cls, rows, dx.as<bf16>(), ptrs[layer], dy.as<bf16>(), accumulate, stream);
        CUDA_CHECK(cudaGetLastError());
        const auto got = dy.download();
        const Reference ref = accumulate ? plus_residual(plain, residual) : plain;
        // Only cuBLASLt gets the second rounding: our kernels add the residual in FP32.
        const Verdict v = compare(got, ref, chosen.rfind("cublaslt", 0) == 0 && accumulate);
        char name[160];
        std::snprintf(name, sizeof name, "runner rows %2d %s%s", rows, chosen.c_str(), accumulate ? " +residual" : "");
        report(name, v.bad == 0, describe(v, got, ref));
      }
    }
    // Every cuBLASLt candidate tune() had (the heuristic's and the configuration search's): any of
    // them may be the pick on another GPU or library version.
    if (rows == 8 || rows == 32) {
      const int count = runner.cublaslt_candidate_count(cls, rows);
      int wrong = 0;
      std::string first_wrong;
      for (int i = 0; i < count; ++i) {
        dy.upload(std::vector<u16>(dy.n, kPoison));
        runner.run_cublaslt_candidate(cls, rows, i, dx.as<bf16>(), ptrs[layer], dy.as<bf16>(), false, stream);
        CUDA_CHECK(cudaGetLastError());
        const auto got = dy.download();
        const Verdict v = compare(got, plain, false);
        if (v.bad != 0 && wrong++ == 0) first_wrong = "#" + std::to_string(i + 1) + ": " + describe(v, got, plain);
      }
      report("runner rows " + std::to_string(rows) + " every cuBLASLt candidate", wrong == 0,
             std::to_string(count) + " candidates, " + std::to_string(wrong) + " wrong" +
                 (first_wrong.empty() ? "" : " (" + first_wrong + ")"));
    }
    if (second) {
      runner.swap_choice(cls, rows);
      report("runner rows " + std::to_string(rows) + " swapped back", runner.choice_name(cls, rows) == tuned, tuned);
    } else {
      bool threw = false;
      try {
        runner.swap_choice(cls, rows);
      } catch (const std::logic_error&) {
        threw = true;
      }
      report("runner rows " + std::to_string(rows) + " refuses a swap without a second kernel", threw, tuned);
    }
    std::printf("  tune: %s\n", line.c_str());
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  for (auto* d : dw) delete d;
}

// ---------------------------------------------------------------------------------------------
__global__ void fill_random_kernel(bf16* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = seed + i * 0x9E3779B97F4A7C15ull;  // splitmix64
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    p[i] = __float2bfloat16_rn(static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

double copy_rate_gbs() {
  const std::size_t bytes = 1ull << 30;
  Dev<char> a(bytes), b(bytes);
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  float best = std::numeric_limits<float>::max();
  for (int i = 0; i < 6; ++i) {
    CUDA_CHECK(cudaEventRecord(e0));
    CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice));
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i > 0) best = std::min(best, ms);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return 2.0 * bytes / (best * 1e-3) / 1e9;
}

// Per shape and row count: the small-m kernel (best split, best of rounds, each round one call on
// each of several weight copies so W comes from HBM, not the 50 MB L2), cuBLASLt's best heuristic
// candidate as GemmRunner::tune times it (same rotation), the W bytes at the copy rate, and what
// tune chose. Plain launches (no PDL overlap between the timed calls), as the engine tunes.
struct BenchShape {
  const char* name;
  int out, in;
};

void bench() {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy_gbs = copy_rate_gbs();
  std::printf("\n# bench on %s (%d SMs, L2 %d MB): D2D copy %.0f GB/s (cudaMemcpyAsync 1 GiB, read+write, best of 5)\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, copy_gbs);
  std::printf(
      "# times are per call, best of rounds rotating through W copies (>= 400 MB in all); GB/s counts W bytes\n");
  for (int v = 0; v < kSmallMVariants; ++v) {
    std::printf("# variant %d = %s: blocks per SM at 8/16/32/64 rows %d/%d/%d/%d\n", v, small_m_variant_name(v),
                small_m_gemm_blocks_per_sm(8, v), small_m_gemm_blocks_per_sm(16, v), small_m_gemm_blocks_per_sm(32, v),
                small_m_gemm_blocks_per_sm(64, v));
  }
  std::printf("%-8s %5s %4s | %9s %3s %5s %7s | %9s %7s | %9s | %6s %6s | %-34s | %s\n", "shape", "out", "rows",
              "small_us", "var", "split", "GB/s", "lt_us", "GB/s", "copy_us", "sm/cp", "lt/cp",
              "best us per variant 0/1/2/3/4", "tune chose (skinny us at 8 rows)");
  const BenchShape shapes[] = {{"qkv", 6144, 4096},
                               {"o", 4096, 4096},
                               {"gate_up", 28672, 4096},
                               {"down", 4096, 14336},
                               {"lm_head", 128256, 4096}};
  const ProgrammaticLaunchPause plain;
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const std::size_t ws_bytes = 32ull << 20;  // the engine's GemmRunner workspace
  Dev<char> workspace(ws_bytes);
  for (const BenchShape& s : shapes) {
    const std::size_t w_elems = static_cast<std::size_t>(s.out) * s.in;
    const double w_bytes = 2.0 * static_cast<double>(w_elems);
    const int copies = static_cast<int>(std::min<double>(8, std::max<double>(2, std::ceil(400e6 / w_bytes))));
    Dev<u16> w(w_elems * copies), x(static_cast<std::size_t>(64) * s.in), y(static_cast<std::size_t>(64) * s.out);
    fill_random_kernel<<<4096, 256, 0, stream>>>(w.as<bf16>(), w.n, 1);
    fill_random_kernel<<<256, 256, 0, stream>>>(x.as<bf16>(), x.n, 2);
    CUDA_CHECK(cudaGetLastError());
    std::vector<const void*> ptrs;
    for (int c = 0; c < copies; ++c) ptrs.push_back(w.as<bf16>() + w_elems * c);
    GemmRunner runner(workspace.p, ws_bytes);
    const int cls = runner.add_class(s.name, s.out, s.in, ptrs);
    // The runner's counters and partials, for the direct timing below (same launches tune makes).
    SmallMWorkspace ws{reinterpret_cast<unsigned*>(workspace.p + ws_bytes - GemmRunner::kSmallMCounterBytes),
                       static_cast<int>(GemmRunner::kSmallMCounterBytes / sizeof(unsigned)), workspace.as<float>(),
                       (ws_bytes - GemmRunner::kSmallMCounterBytes) / sizeof(float)};
    for (int rows : {8, 16, 32, 64}) {
      const std::string line = runner.tune(cls, rows, x.as<bf16>(), y.as<bf16>(), stream);
      const GemmRunner::TuneTimes t = runner.last_tune_times();
      double best = std::numeric_limits<double>::max();
      int best_split = 0, best_variant = 0;
      std::string per_variant;
      for (int variant = 0; variant < kSmallMVariants; ++variant) {
        double best_v = std::numeric_limits<double>::max();
        for (int split : kSmallMSplits) {
          if (check_small_m_gemm(x.as<bf16>(), rows, w.as<bf16>(), s.out, s.in, split, ws) != nullptr) continue;
          for (int c = 0; c < 2; ++c)
            launch_small_m_gemm(x.as<bf16>(), rows, static_cast<const bf16*>(ptrs[c]), s.out, s.in, split, nullptr,
                                y.as<bf16>(), ws, stream, variant);
          for (int round = 0; round < 5; ++round) {
            CUDA_CHECK(cudaEventRecord(e0, stream));
            for (int c = 0; c < copies; ++c)
              launch_small_m_gemm(x.as<bf16>(), rows, static_cast<const bf16*>(ptrs[c]), s.out, s.in, split, nullptr,
                                  y.as<bf16>(), ws, stream, variant);
            CUDA_CHECK(cudaEventRecord(e1, stream));
            CUDA_CHECK(cudaEventSynchronize(e1));
            CUDA_CHECK(cudaGetLastError());
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            const double us = ms * 1e3 / copies;
            best_v = std::min(best_v, us);
            if (us < best) {
              best = us;
              best_split = split;
              best_variant = variant;
            }
          }
        }
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.1f", variant ? "/" : "", best_v);
        per_variant += buf;
      }
      const double copy_us = w_bytes / (copy_gbs * 1e9) * 1e6;
      char chose[96];
      if (t.skinny_us > 0) {
        std::snprintf(chose, sizeof chose, "%s (skinny %.1f)", t.chosen.c_str(), t.skinny_us);
      } else if (t.small_m_us > 0) {
        std::snprintf(chose, sizeof chose, "%s (small_m %.1f v%d split %d)", t.chosen.c_str(), t.small_m_us,
                      t.small_m_variant, small_m_gemm_effective_split(s.in, t.small_m_split));
      } else {
        std::snprintf(chose, sizeof chose, "%s", t.chosen.c_str());
      }
      std::printf("%-8s %5d %4d | %9.1f %3d %5d %7.0f | %9.1f %7.0f | %9.1f | %6.2f %6.2f | %-34s | %s\n", s.name,
                  s.out, rows, best, best_variant, small_m_gemm_effective_split(s.in, best_split),
                  w_bytes / (best * 1e-6) / 1e9, t.cublaslt_us, w_bytes / (t.cublaslt_us * 1e-6) / 1e9, copy_us,
                  copy_us / best, copy_us / t.cublaslt_us, per_variant.c_str(), chose);
      std::fflush(stdout);
    }
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// `--mid-rows`: cuBLASLt's heuristic first candidate against the best of its candidates at the row
// counts of steps with prompt chunks (decode rows + a chunk: 96, 288, 544, ...), which run untuned
// (GemmRunner tunes the decode buckets only), and at the round counts next to them.
void bench_mid_rows() {
  const BenchShape shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  const int row_counts[] = {64, 96, 128, 160, 192, 256, 288, 320, 384, 512, 544, 768, 1024, 1056, 2048, 2080, 4096};
  const ProgrammaticLaunchPause plain;
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  const std::size_t ws_bytes = 32ull << 20;  // the engine's GemmRunner workspace
  Dev<char> workspace(ws_bytes);
  std::printf("\n# mid rows: cuBLASLt per call (us), heuristic's first candidate vs best of its candidates\n");
  std::printf("%-8s %5s | %9s %9s %6s | %5s | %8s\n", "shape", "rows", "first_us", "best_us", "gain", "pick",
              "TFLOP/s");
  for (const BenchShape& s : shapes) {
    const std::size_t w_elems = static_cast<std::size_t>(s.out) * s.in;
    const int max_rows = row_counts[std::size(row_counts) - 1];
    Dev<u16> w(w_elems * 2), x(static_cast<std::size_t>(max_rows) * s.in),
        y(static_cast<std::size_t>(max_rows) * s.out);
    fill_random_kernel<<<4096, 256, 0, stream>>>(w.as<bf16>(), w.n, 1);
    fill_random_kernel<<<1024, 256, 0, stream>>>(x.as<bf16>(), x.n, 2);
    CUDA_CHECK(cudaGetLastError());
    GemmRunner runner(workspace.p, ws_bytes);
    const int cls = runner.add_class(s.name, s.out, s.in, {w.as<bf16>(), w.as<bf16>() + w_elems});
    for (int rows : row_counts) {
      (void)runner.tune(cls, rows, x.as<bf16>(), y.as<bf16>(), stream);
      const GemmRunner::TuneTimes t = runner.last_tune_times();
      std::printf("%-8s %5d | %9.1f %9.1f %5.1f%% | %2d/%-2d | %8.0f\n", s.name, rows, t.cublaslt_first_us,
                  t.cublaslt_us, 100.0 * (t.cublaslt_first_us / t.cublaslt_us - 1.0), t.cublaslt_best + 1,
                  t.cublaslt_candidates + t.searched_candidates,
                  2.0 * rows * s.out * s.in / (t.cublaslt_us * 1e-6) / 1e12);
      std::fflush(stdout);
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// For Nsight Compute (`--profile`): the gate_up shape at 32 rows, each variant at split 1 twice,
// then cuBLASLt's first heuristic candidate twice; inputs uploaded (no other kernels to filter).
void profile() {
  const int rows = 32, n = 28672, k = 4096;
  const std::size_t w_elems = static_cast<std::size_t>(n) * k;
  const auto chunk = random_bf16(std::size_t{1} << 22);
  Dev<u16> w(w_elems), x(random_bf16(static_cast<std::size_t>(rows) * k)), y(static_cast<std::size_t>(rows) * n);
  for (std::size_t at = 0; at < w_elems; at += chunk.size()) {
    CUDA_CHECK(
        cudaMemcpy(w.p + at, chunk.data(), std::min(chunk.size(), w_elems - at) * sizeof(u16), cudaMemcpyHostToDevice));
  }
  SmallMWorkspace none;
  for (int variant = 0; variant < kSmallMVariants; ++variant) {
    for (int rep = 0; rep < 2; ++rep)
      launch_small_m_gemm(x.as<bf16>(), rows, w.as<bf16>(), n, k, 1, nullptr, y.as<bf16>(), none, nullptr, variant);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("profiled variant %d (%s)\n", variant, small_m_variant_name(variant));
  }
  const std::size_t ws_bytes = 32ull << 20;
  Dev<char> workspace(ws_bytes);
  GemmRunner runner(workspace.p, ws_bytes);
  const int cls = runner.add_class("gate_up", n, k, {w.p});
  for (int rep = 0; rep < 2; ++rep) runner.run(cls, rows, x.as<bf16>(), w.p, y.as<bf16>(), false, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("profiled cuBLASLt's first candidate\n");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The gate/up GEMM with its SwiGLU epilogue (gemm_swiglu_wgmma.cu, compute capability 9.0 only):
// against a double-precision CPU reference on small shapes (row tails, several k steps and output
// tiles), and at the 8B shape against what the engine runs without it (cuBLASLt, then SiLU * up).
double silu_ref(double g) {
  return g / (1.0 + std::exp(-g));
}

void test_swiglu_gemm(const cudaDeviceProp& prop) {
  if (!gate_up_swiglu_supported(64, 128, prop.major, prop.minor)) {
    std::printf("gate/up SwiGLU GEMM: needs compute capability 9.0, this GPU is %d.%d: skipped\n", prop.major,
                prop.minor);
    return;
  }
  struct Shape {
    int rows, in, ffn;
  };
  for (const Shape sh : {Shape{1, 64, 128}, Shape{5, 256, 384}, Shape{128, 128, 128}, Shape{200, 512, 128},
                         Shape{257, 192, 256}, Shape{1100, 64, 128}, Shape{700, 1024, 384}}) {
    for (const SwigluEpilogue epilogue : {SwigluEpilogue::in_place, SwigluEpilogue::deferred}) {
      const auto x = random_bf16(static_cast<std::size_t>(sh.rows) * sh.in);
      const auto w = random_bf16(static_cast<std::size_t>(2) * sh.ffn * sh.in);
      const Reference gu = reference(x, w, sh.rows, 2 * sh.ffn, sh.in);
      Dev<u16> dx(x), dw(w), dout(static_cast<std::size_t>(sh.rows + 1) * sh.ffn);
      dout.upload(std::vector<u16>(dout.n, kPoison));
      const bool launched = launch_gate_up_swiglu(dx.as<bf16>(), sh.rows, sh.in, dw.as<bf16>(), sh.ffn, dout.as<bf16>(),
                                                  nullptr, epilogue);
      const auto out = dout.download();
      double worst = 0;
      bool ok = launched;
      for (int r = 0; r < sh.rows; ++r) {
        for (int i = 0; i < sh.ffn; ++i) {
          const std::size_t gi = static_cast<std::size_t>(r) * 2 * sh.ffn + i, ui = gi + sh.ffn;
          const double g = gu.y[gi], u = gu.y[ui];
          const double want = silu_ref(g) * u;
          // BF16 output rounding; FP32 accumulation error carried through SiLU (slope <= 1.1) and the
          // product; and (the deferred epilogue, as the unfused path) gate and up rounded to BF16 first: half
          // an ulp (<= 2^-8 relative) of each through silu'(g) = s(g) (1 + g (1 - s(g))), s the sigmoid.
          const double sig = 1.0 / (1.0 + std::exp(-g));
          const double rounded_inputs = std::ldexp(std::fabs(sig * (1 + g * (1 - sig)) * g * u) + std::fabs(want), -8);
          const double bound =
              std::ldexp(std::fabs(want), -7) + rounded_inputs +
              1e-5 * (1.1 * gu.magnitude[gi] * std::fabs(u) + std::fabs(silu_ref(g)) * gu.magnitude[ui]) + 1e-6;
          const double got = to_f(out[static_cast<std::size_t>(r) * sh.ffn + i]);
          const double err = std::fabs(got - want);
          if (!(err <= bound)) ok = false;
          worst = std::max(worst, std::isfinite(err) ? err / bound : 1e9);
        }
      }
      bool guard = true;  // the row past the output stays poisoned
      for (int i = 0; i < sh.ffn; ++i) guard = guard && out[static_cast<std::size_t>(sh.rows) * sh.ffn + i] == kPoison;
      char detail[128];
      std::snprintf(detail, sizeof detail, "worst error %.2f of its bound%s", worst,
                    guard ? "" : ", guard row written");
      report(std::string("swiglu gemm ") + (epilogue == SwigluEpilogue::deferred ? "deferred " : "in-place ") +
                 std::to_string(sh.rows) + " x " + std::to_string(sh.in) + " -> " + std::to_string(sh.ffn),
             ok && guard, detail);
    }
  }
  // Shapes it does not take are refused, launching nothing.
  Dev<u16> none(1);
  report("swiglu gemm refuses ffn 64 and k 96",
         !launch_gate_up_swiglu(none.as<bf16>(), 1, 64, none.as<bf16>(), 64, none.as<bf16>(), nullptr) &&
             !launch_gate_up_swiglu(none.as<bf16>(), 1, 96, none.as<bf16>(), 128, none.as<bf16>(), nullptr),
         "");
}

void fill_random(bf16* p, std::size_t n, std::uint64_t seed) {
  fill_random_kernel<<<1024, 256>>>(p, n, seed);
  CUDA_CHECK(cudaGetLastError());
}

// The unfused path the engine runs without the kernel: cuBLASLt's gate/up product, then SiLU * up.
struct UnfusedSwiglu {
  GemmRunner& runner;
  int cls;
  const bf16* w;
  bf16* gu;
  int ffn;
  void operator()(const bf16* x, int rows, bf16* out, cudaStream_t stream) const {
    runner.run(cls, rows, x, w, gu, false, stream);
    launch_silu_mul(gu, rows, ffn, out, stream);
  }
};

// At the engine's 8B shape, 1000 rows (a row tail): the fused output against the unfused path's,
// which rounds gate and up to BF16 before SiLU (so they differ by a few BF16 steps, not more).
void test_swiglu_gemm_large(const cudaDeviceProp& prop) {
  if (!gate_up_swiglu_supported(64, 128, prop.major, prop.minor)) return;
  const int rows = 1000, in = 4096, ffn = 14336;
  Dev<u16> x(static_cast<std::size_t>(rows) * in), w(static_cast<std::size_t>(2) * ffn * in);
  Dev<u16> gu(static_cast<std::size_t>(rows) * 2 * ffn), fused(static_cast<std::size_t>(rows) * ffn), unfused(fused.n);
  fill_random(x.as<bf16>(), x.n, 1);
  fill_random(w.as<bf16>(), w.n, 2);
  const std::size_t ws_bytes = 32ull << 20;
  Dev<char> workspace(ws_bytes);
  GemmRunner runner(workspace.p, ws_bytes);
  const int cls = runner.add_class("gate_up", 2 * ffn, in, {w.p});
  const UnfusedSwiglu plain{runner, cls, w.as<bf16>(), gu.as<bf16>(), ffn};
  plain(x.as<bf16>(), rows, unfused.as<bf16>(), nullptr);
  const auto b = unfused.download();
  for (const SwigluEpilogue epilogue : {SwigluEpilogue::in_place, SwigluEpilogue::deferred}) {
    fused.upload(std::vector<u16>(fused.n, kPoison));
    const bool launched =
        launch_gate_up_swiglu(x.as<bf16>(), rows, in, w.as<bf16>(), ffn, fused.as<bf16>(), nullptr, epilogue);
    const auto a = fused.download();
    double diff2 = 0, ref2 = 0, worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double fa = to_f(a[i]), fb = to_f(b[i]);
      diff2 += (fa - fb) * (fa - fb);
      ref2 += fb * fb;
      worst = std::max(worst, std::isfinite(fa) ? std::fabs(fa - fb) : 1e30);
    }
    const double rel_l2 = std::sqrt(diff2 / ref2), rms = std::sqrt(ref2 / static_cast<double>(a.size()));
    char detail[160];
    std::snprintf(detail, sizeof detail, "relative L2 %.2e, worst |diff| %.3g (rms %.3g)", rel_l2, worst, rms);
    report(std::string("swiglu gemm ") + (epilogue == SwigluEpilogue::deferred ? "deferred " : "in-place ") +
               "1000 x 4096 -> 14336 against cuBLASLt + SiLU",
           launched && rel_l2 < 1e-2 && worst < 0.1 * rms, detail);
  }
}

// Times the fused kernel against the unfused path and against cuBLASLt's product alone, at prefill
// row counts on the 8B and 70B (TP2) MLP shapes: median of 20 calls after 3, CUDA events.
void bench_swiglu() {
  struct Shape {
    const char* name;
    int in, ffn;
  };
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const std::size_t ws_bytes = 32ull << 20;
  Dev<char> workspace(ws_bytes);
  auto median_ms = [&](auto&& call) {
    for (int i = 0; i < 3; ++i) call();
    std::vector<float> ms(20);
    for (auto& m : ms) {
      CUDA_CHECK(cudaEventRecord(e0));
      call();
      CUDA_CHECK(cudaEventRecord(e1));
      CUDA_CHECK(cudaEventSynchronize(e1));
      CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
    }
    std::sort(ms.begin(), ms.end());
    return 0.5 * (ms[9] + ms[10]);
  };
  std::printf(
      "swiglu bench: shape rows | in-place ms TFLOP/s | deferred ms TFLOP/s | cuBLASLt+SiLU ms TFLOP/s | cuBLASLt "
      "alone ms | in-place/unfused deferred/unfused\n");
  for (const Shape sh : {Shape{"8b", 4096, 14336}, Shape{"8b-tp2", 4096, 7168}, Shape{"70b-tp2", 8192, 14336}}) {
    const int max_rows = 16384;
    Dev<u16> x(static_cast<std::size_t>(max_rows) * sh.in), w(static_cast<std::size_t>(2) * sh.ffn * sh.in);
    Dev<u16> gu(static_cast<std::size_t>(max_rows) * 2 * sh.ffn), out(static_cast<std::size_t>(max_rows) * sh.ffn);
    fill_random(x.as<bf16>(), x.n, 3);
    fill_random(w.as<bf16>(), w.n, 4);
    GemmRunner runner(workspace.p, ws_bytes);
    const int cls = runner.add_class("gate_up", 2 * sh.ffn, sh.in, {w.p});
    const UnfusedSwiglu plain{runner, cls, w.as<bf16>(), gu.as<bf16>(), sh.ffn};
    for (int rows : {256, 512, 1024, 2048, 4096, 8192, 16384}) {
      const double flop = 2.0 * rows * 2.0 * sh.ffn * sh.in;
      const double fused = median_ms([&] {
        launch_gate_up_swiglu(x.as<bf16>(), rows, sh.in, w.as<bf16>(), sh.ffn, out.as<bf16>(), nullptr,
                              SwigluEpilogue::in_place);
      });
      const double deferred = median_ms([&] {
        launch_gate_up_swiglu(x.as<bf16>(), rows, sh.in, w.as<bf16>(), sh.ffn, out.as<bf16>(), nullptr,
                              SwigluEpilogue::deferred);
      });
      const double unfused = median_ms([&] { plain(x.as<bf16>(), rows, out.as<bf16>(), nullptr); });
      const double product =
          median_ms([&] { runner.run(cls, rows, x.as<bf16>(), w.as<bf16>(), gu.as<bf16>(), false, nullptr); });
      std::printf("swiglu bench: %-7s %5d | %8.4f %6.1f | %8.4f %6.1f | %8.4f %6.1f | %8.4f | %.3f %.3f\n", sh.name,
                  rows, fused, flop / fused / 1e9, deferred, flop / deferred / 1e9, unfused, flop / unfused / 1e9,
                  product, fused / unfused, deferred / unfused);
    }
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run stopped by a timeout keeps what it printed
  try {
    cudaDeviceProp prop{};
    if (!start_gpu_test(prop)) return 77;
    if (argc > 1 && std::strcmp(argv[1], "--mid-rows") == 0) {
      bench_mid_rows();
      return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--swiglu") == 0) {
      test_swiglu_gemm(prop);
      test_swiglu_gemm_large(prop);
      std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
      if (argc > 2 && std::strcmp(argv[2], "--bench") == 0) bench_swiglu();
      return failures ? 1 : 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) {
      const ProgrammaticLaunchPause plain;
      profile();
      return 0;
    }
    const bool kernel_only = argc > 1 && std::strcmp(argv[1], "--kernel-only") == 0;
    test_small_m_kernel(kernel_only);
    if (!kernel_only) test_runner();
    test_swiglu_gemm(prop);
    if (!kernel_only) test_swiglu_gemm_large(prop);
    std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
    if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) bench();
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
