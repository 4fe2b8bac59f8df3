// The serving engine's kernels (backends/cuda/infer/kernels.hpp) against straightforward CPU
// computations on random inputs: paged KV layouts with shuffled block tables, GQA, batches of
// sequences of different lengths, chunked prefill, padding sequences, argmax ties, the skinny GEMM
// with its residual aliased to the output. Outputs are poisoned before each launch, so an element
// the kernel forgot to write fails too.
//   infer_kernels_test           run the checks; exit 0 passed, 1 failed, 77 no GPU (CTest: skipped)
//   infer_kernels_test --bench   also time the kernels on Llama-3.1-8B shapes (CUDA events, median)
//   infer_kernels_test --decode-only [--bench]   the decode attention checks only [and their timings
//                                at 512..576 tokens for the Llama-3.1-8B and Qwen2.5-7B head shapes]
//   infer_kernels_test --prefill-step-bench   the checks, then each kernel of a 16 x 512-token prefill
//                                step of Llama-3.1-8B timed alone
//   infer_kernels_test --decode-profile llama|qwen [STAGES]   no checks: decode attention at batch 32,
//                                512..576 tokens, launched 3 times (for ncu --launch-skip 2); with
//                                STAGES, the pair kernel with that many stages
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bf16_test_util.hpp"
#include "gpuscout/cuda/check.hpp"
#include "gpuscout/infer/weights.hpp"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace {

namespace gi = gpuscout::infer;
using namespace gpuscout::cuda::infer;
using namespace gpuscout::cuda::test;

// BF16 outputs against a reference computed in double. BF16 keeps 8 significant bits (relative
// rounding step 2^-8 = 3.9e-3, half of it per rounding); FP32 accumulation in another order adds
// ~1e-6. So: norm-wise ||got - ref|| / ||ref|| <= 1e-2 and each element within 1e-2 |ref| plus
// 1e-2 of the reference's RMS (elements near zero after cancellation), plus slack[i] when given (a
// bound a kernel's own intermediate rounding adds); NaN never passes.
void check_close(const std::string& name, const std::vector<float>& got, const std::vector<double>& ref,
                 double rtol = 1e-2, const std::vector<double>& slack = {}) {
  double num = 0, den = 0, worst = 0;
  std::size_t bad = 0, first_bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) den += ref[i] * ref[i];
  const double rms = std::sqrt(den / std::max<std::size_t>(ref.size(), 1));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (!(e <= rtol * std::fabs(ref[i]) + rtol * rms + (slack.empty() ? 0.0 : slack[i]))) {
      if (bad++ == 0) first_bad = i;
    }
    if (std::isnan(got[i])) {
      num = INFINITY;
    } else {
      num += e * e;
    }
    worst = std::max(worst, e);
  }
  const double rel = std::sqrt(num / std::max(den, 1e-300));
  char buf[200];
  std::snprintf(buf, sizeof buf, "rel %.2e max|err| %.2e (%zu elements, %zu off", rel, worst, ref.size(), bad);
  std::string detail = buf;
  if (bad) {
    std::snprintf(buf, sizeof buf, ", first #%zu got %g want %g", first_bad, got[first_bad], ref[first_bad]);
    detail += buf;
  }
  report(name, bad == 0 && rel <= rtol, detail + ")");
}

std::vector<float> floats(const std::vector<u16>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = to_f(v[i]);
  return f;
}

// ---------------------------------------------------------------------------------------------
void test_init_weights() {
  const gi::WeightKind kinds[] = {gi::WeightKind::embedding, gi::WeightKind::attn_norm,  gi::WeightKind::wq,
                                  gi::WeightKind::wk,        gi::WeightKind::wv,         gi::WeightKind::wo,
                                  gi::WeightKind::mlp_norm,  gi::WeightKind::w_gate,     gi::WeightKind::w_up,
                                  gi::WeightKind::w_down,    gi::WeightKind::final_norm, gi::WeightKind::lm_head};
  std::size_t total = 0, mismatched = 0;
  for (const auto kind : kinds) {
    const bool norm =
        kind == gi::WeightKind::attn_norm || kind == gi::WeightKind::mlp_norm || kind == gi::WeightKind::final_norm;
    const int in = norm ? 1000 : 333;
    // A shard in the middle of a larger tensor (tensor parallelism): rows and columns offset.
    const std::int64_t row0 = norm ? 0 : 57, rows = norm ? 1 : 41, col0 = norm ? 0 : 100, cols = norm ? in : 117;
    const std::uint32_t layer = 3;
    Dev<u16> d(rows * cols);
    std::vector<u16> poison(d.n, kPoison);
    d.upload(poison);
    launch_init_weights(d.as<bf16>(), 42, kind, layer, in, row0, rows, col0, cols, nullptr);
    const auto got = d.download();
    const auto stream = gi::tensor_stream(42, kind, layer);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto idx = static_cast<std::uint64_t>((row0 + r) * in + col0 + c);
        mismatched += got[r * cols + c] != gi::float_to_bf16_bits(gi::weight_value(stream, kind, idx, in));
        ++total;
      }
    }
  }
  report("init_weights: bit-exact vs weights.hpp (12 kinds, shards)", mismatched == 0,
         std::to_string(mismatched) + " of " + std::to_string(total) + " differ");
}

void test_gather() {
  const int vocab = 300, hidden = 136, rows = 37;
  const auto table = random_bf16(static_cast<std::size_t>(vocab) * hidden);
  std::vector<std::int32_t> tokens(rows);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % vocab);
  tokens[1] = tokens[0];  // repeated ids
  Dev<u16> dt(table), out(static_cast<std::size_t>(rows) * hidden);
  Dev<std::int32_t> dtok(tokens);
  out.upload(std::vector<u16>(out.n, kPoison));
  launch_embedding(dtok.p, rows, dt.as<bf16>(), hidden, out.as<bf16>(), nullptr);
  auto got = out.download();
  bool ok = true;
  for (int r = 0; r < rows; ++r)
    ok &= std::equal(got.begin() + r * hidden, got.begin() + (r + 1) * hidden,
                     table.begin() + static_cast<std::size_t>(tokens[r]) * hidden);
  report("embedding: rows copied exactly (width 136)", ok, "");
  // gather_rows with an odd width (scalar path).
  const int width = 37, count = 5;
  const auto x = random_bf16(static_cast<std::size_t>(rows) * width);
  std::vector<std::int32_t> idx = {36, 0, 17, 17, 2};
  Dev<u16> dx(x), dout(static_cast<std::size_t>(count) * width);
  Dev<std::int32_t> didx(idx);
  dout.upload(std::vector<u16>(dout.n, kPoison));
  launch_gather_rows(dx.as<bf16>(), didx.p, count, width, dout.as<bf16>(), nullptr);
  got = dout.download();
  ok = true;
  for (int i = 0; i < count; ++i)
    ok &= std::equal(got.begin() + i * width, got.begin() + (i + 1) * width, x.begin() + idx[i] * width);
  report("gather_rows: rows copied exactly (width 37)", ok, "");
}

// Widths on the register path (4096, 8192 at its limit, 520 with idle threads), past it (8200) and
// the scalar path (45).
void test_rmsnorm() {
  // 9 rows: the decode blocks of 256 threads; 600: prefill-sized batches, 128 where the row fits.
  for (const auto [width, rows] : std::vector<std::pair<int, int>>{
           {4096, 9}, {8192, 9}, {8200, 9}, {520, 9}, {45, 9}, {4096, 600}, {520, 600}, {8192, 600}}) {
    const auto x = random_bf16(static_cast<std::size_t>(rows) * width, 3.0f);
    std::vector<u16> w(width);
    for (auto& e : w) e = to_b(1.0f + 0.1f * std::uniform_real_distribution<float>(-1, 1)(rng));
    Dev<u16> dx(x), dw(w), out(x.size());
    out.upload(std::vector<u16>(out.n, kPoison));
    const float eps = 1e-5f;
    launch_rmsnorm(dx.as<bf16>(), dw.as<bf16>(), rows, width, eps, out.as<bf16>(), nullptr);
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int c = 0; c < width; ++c) ss += static_cast<double>(to_f(x[r * width + c])) * to_f(x[r * width + c]);
      const double inv = 1.0 / std::sqrt(ss / width + eps);
      for (int c = 0; c < width; ++c) ref[r * width + c] = to_f(x[r * width + c]) * inv * to_f(w[c]);
    }
    check_close("rmsnorm width " + std::to_string(width) + " rows " + std::to_string(rows), floats(out.download()),
                ref);
  }
}

void test_silu_mul() {
  for (const int ffn : {1024, 44, 13}) {
    const int rows = 7;
    const auto gu = random_bf16(static_cast<std::size_t>(rows) * 2 * ffn, 4.0f);
    Dev<u16> dg(gu), out(static_cast<std::size_t>(rows) * ffn);
    out.upload(std::vector<u16>(out.n, kPoison));
    launch_silu_mul(dg.as<bf16>(), rows, ffn, out.as<bf16>(), nullptr);
    std::vector<double> ref(out.n);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < ffn; ++i) {
        const double g = to_f(gu[r * 2 * ffn + i]), u = to_f(gu[r * 2 * ffn + ffn + i]);
        ref[r * ffn + i] = g / (1 + std::exp(-g)) * u;
      }
    check_close("silu_mul ffn " + std::to_string(ffn), floats(out.download()), ref);
  }
}

void test_argmax() {
  for (const int vocab : {128256, 32000, 1003}) {  // the unrolled loop and its tail, the tail alone, odd
    const int rows = 6, offset = 5000;
    auto logits = random_bf16(static_cast<std::size_t>(rows) * vocab, 8.0f);
    std::vector<int> want(rows);
    for (int r = 0; r < rows; ++r) {
      u16* row = logits.data() + static_cast<std::size_t>(r) * vocab;
      // Plant ties of the maximum: the lowest index must win, wherever the copies sit.
      const int a = static_cast<int>(rng() % vocab), b = static_cast<int>(rng() % vocab);
      row[a] = row[b] = to_b(9.5f);
      if (r == 1) row[vocab - 1] = row[0] = to_b(9.5f);
      int best = 0;
      for (int i = 1; i < vocab; ++i)
        if (to_f(row[i]) > to_f(row[best])) best = i;
      want[r] = best + offset;
    }
    Dev<u16> dl(logits);
    Dev<std::int32_t> idx(rows);
    Dev<float> val(rows);
    idx.upload(std::vector<std::int32_t>(rows, -7));
    launch_argmax(dl.as<bf16>(), rows, vocab, offset, idx.p, val.p, nullptr);
    const auto gi_ = idx.download();
    const auto gv = val.download();
    bool ok = true;
    for (int r = 0; r < rows; ++r) ok &= gi_[r] == want[r] && gv[r] == 9.5f;
    report("argmax vocab " + std::to_string(vocab) + " (ties: lowest index, offset)", ok,
           "row0 got " + std::to_string(gi_[0]) + " want " + std::to_string(want[0]));
  }
  // Merge over 3 ranks: largest value, lowest id on ties.
  const int ranks = 3, rows = 50;
  std::vector<std::int32_t> cand(ranks * rows);
  std::vector<float> vals(ranks * rows);
  std::vector<std::int32_t> want(rows);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < ranks; ++k) {
      cand[k * rows + r] = k * 1000 + static_cast<int>(rng() % 1000);
      vals[k * rows + r] = static_cast<float>(rng() % 4);  // many ties
    }
    int best = 0;
    for (int k = 1; k < ranks; ++k) {
      const float v = vals[k * rows + r], bv = vals[best * rows + r];
      if (v > bv || (v == bv && cand[k * rows + r] < cand[best * rows + r])) best = k;
    }
    want[r] = cand[best * rows + r];
  }
  Dev<std::int32_t> dc(cand), dout(rows);
  Dev<float> dv(vals);
  launch_argmax_merge(dc.p, dv.p, ranks, rows, dout.p, nullptr);
  report("argmax_merge 3 ranks (ties: lowest id)", dout.download() == want, "");
}

// ---------------------------------------------------------------------------------------------
void test_skinny_gemm() {
  struct Case {
    int rows, n, k;
    bool residual;
  };
  const Case cases[] = {{1, 300, 512, false},
                        {2, 257, 4096, true},
                        {3, 100, 72, true},
                        {4, 64, 1024, false},
                        {5, 77, 520, true},
                        {6, 33, 264, false},
                        {7, 129, 2048, true},
                        {8, 515, 1536, true},
                        {8, 40, 100, true},
                        {1, 9, 13, false},
                        // One row, the ring GEMV's shapes: several pieces per row (a 28 KB row of a
                        // down projection; 8 KB + 16 B), fewer rows than SMs, many rows per block.
                        {1, 4096, 14336, true},
                        {1, 1000, 4104, true},
                        {1, 50, 256, false},
                        {1, 20000, 512, true}};
  const std::pair<SkinnyPath, const char*> paths[] = {{SkinnyPath::automatic, "auto"},
                                                      {SkinnyPath::cuda_core, "cc"},
                                                      {SkinnyPath::tensor_core, "tc"},
                                                      {SkinnyPath::ring, "ring"}};
  for (const auto& [path, path_name] : paths)
    for (const auto& c : cases) {
      const auto x = random_bf16(static_cast<std::size_t>(c.rows) * c.k);
      const float ws = std::sqrt(3.0f / c.k);
      const auto w = random_bf16(static_cast<std::size_t>(c.n) * c.k, ws);
      const auto res = random_bf16(static_cast<std::size_t>(c.rows) * c.n);
      Dev<u16> dx(x), dw(w), dy(static_cast<std::size_t>(c.rows) * c.n);
      // With a residual, y aliases it (in place, as the engine adds the residual stream).
      dy.upload(c.residual ? res : std::vector<u16>(dy.n, kPoison));
      const bf16* residual = c.residual ? dy.as<bf16>() : nullptr;
      if (path == SkinnyPath::automatic) {
        launch_skinny_gemm(dx.as<bf16>(), c.rows, dw.as<bf16>(), c.n, c.k, residual, dy.as<bf16>(), nullptr);
      } else {
        launch_skinny_gemm_path(path, dx.as<bf16>(), c.rows, dw.as<bf16>(), c.n, c.k, residual, dy.as<bf16>(), nullptr);
      }
      std::vector<double> ref(dy.n);
      for (int r = 0; r < c.rows; ++r)
        for (int j = 0; j < c.n; ++j) {
          double acc = c.residual ? to_f(res[r * c.n + j]) : 0.0;
          for (int i = 0; i < c.k; ++i) acc += static_cast<double>(to_f(x[r * c.k + i])) * to_f(w[j * c.k + i]);
          ref[r * c.n + j] = acc;
        }
      char name[128];
      std::snprintf(name, sizeof name, "skinny_gemm %s rows %d n %d k %d%s", path_name, c.rows, c.n, c.k,
                    c.residual ? " +res (aliased)" : "");
      check_close(name, floats(dy.download()), ref);
    }
}

// The ring GEMV with its input made while it stages it (GemmRunner::run_normed and run_silu_mul at one
// row): y = W (x * inv * g) with the normalized input rounded to BF16 as launch_rmsnorm writes it, or
// y = W (silu(gate) * up) rounded as launch_silu_mul writes it. A norm left out (a factor inv ~ 0.58
// here), its weights left out (+-10%), or SiLU or the up half left out miss the 1% bound.
void test_ring_gemv_inputs() {
  struct Case {
    int n, k;
    bool residual, silu;
  };
  for (const Case& c : {Case{6144, 4096, false, false}, Case{28672, 4096, false, false}, Case{300, 520, true, false},
                        Case{50, 13 * 8, false, false}, Case{4096, 14336, true, true}, Case{300, 520, false, true},
                        Case{77, 13 * 8, true, true}}) {
    const auto x = random_bf16(static_cast<std::size_t>(c.silu ? 2 : 1) * c.k, 3.0f);
    std::vector<u16> g(c.k);
    for (auto& e : g) e = to_b(1.0f + 0.1f * std::uniform_real_distribution<float>(-1, 1)(rng));
    const auto w = random_bf16(static_cast<std::size_t>(c.n) * c.k, std::sqrt(3.0f / c.k));
    const auto res = random_bf16(static_cast<std::size_t>(c.n));
    Dev<u16> dx(x), dg(g), dw(w), dy(static_cast<std::size_t>(c.n));
    dy.upload(c.residual ? res : std::vector<u16>(dy.n, kPoison));
    const float eps = 1e-5f;
    RingInput input;
    if (c.silu) {
      input.silu_mul = true;
    } else {
      input.norm_weight = dg.as<bf16>();
      input.norm_eps = eps;
    }
    const bool launched = launch_ring_gemv(dx.as<bf16>(), dw.as<bf16>(), c.n, c.k, c.residual ? dy.as<bf16>() : nullptr,
                                           dy.as<bf16>(), nullptr, input);
    const std::string name = std::string(c.silu ? "ring_gemv + silu_mul" : "ring_gemv + rmsnorm") + " n " +
                             std::to_string(c.n) + " k " + std::to_string(c.k) + (c.residual ? " +res (aliased)" : "");
    if (!launched) {
      report(name, false, "launch_ring_gemv refused the shape");
      continue;
    }
    std::vector<float> in(c.k);
    if (c.silu) {
      for (int i = 0; i < c.k; ++i) {
        const double gate = to_f(x[i]), up = to_f(x[c.k + i]);
        in[i] = to_f(to_b(static_cast<float>(gate / (1.0 + std::exp(-gate)) * up)));
      }
    } else {
      double ss = 0;
      for (int i = 0; i < c.k; ++i) ss += static_cast<double>(to_f(x[i])) * to_f(x[i]);
      const double inv = 1.0 / std::sqrt(ss / c.k + eps);
      for (int i = 0; i < c.k; ++i) in[i] = to_f(to_b(static_cast<float>(to_f(x[i]) * inv * to_f(g[i]))));
    }
    std::vector<double> ref(c.n);
    for (int j = 0; j < c.n; ++j) {
      double acc = c.residual ? to_f(res[j]) : 0.0;
      for (int i = 0; i < c.k; ++i) acc += static_cast<double>(in[i]) * to_f(w[static_cast<std::size_t>(j) * c.k + i]);
      ref[j] = acc;
    }
    check_close(name, floats(dy.download()), ref);
  }
}

// The ring GEMV hands its left-over rows out from a counter that the grid's last claim resets: 40
// launches in a row (each counter used more than twice) into poisoned outputs all equal the first,
// bit for bit (two pieces per row, so the order of the partial sums cannot change the result), which
// equals the reference. A counter left unreset hands the next launch none of the rows left over.
void test_ring_gemv_repeats() {
  const int n = 1000, k = 4104;
  const auto x = random_bf16(k);
  const auto w = random_bf16(static_cast<std::size_t>(n) * k, std::sqrt(3.0f / k));
  Dev<u16> dx(x), dw(w), dy(static_cast<std::size_t>(n));
  std::vector<u16> first;
  int differing = 0;
  for (int launch = 0; launch < 40; ++launch) {
    dy.upload(std::vector<u16>(dy.n, kPoison));
    if (!launch_ring_gemv(dx.as<bf16>(), dw.as<bf16>(), n, k, nullptr, dy.as<bf16>(), nullptr)) {
      report("ring_gemv 40 launches", false, "launch_ring_gemv refused the shape");
      return;
    }
    const auto got = dy.download();
    if (launch == 0) first = got;
    differing += got != first ? 1 : 0;
  }
  report("ring_gemv 40 launches equal the first", differing == 0,
         std::to_string(differing) + " of 39 later launches differ");
  std::vector<double> ref(n);
  for (int j = 0; j < n; ++j) {
    double acc = 0.0;
    for (int i = 0; i < k; ++i) acc += static_cast<double>(to_f(x[i])) * to_f(w[static_cast<std::size_t>(j) * k + i]);
    ref[j] = acc;
  }
  check_close("ring_gemv n 1000 k 4104 (first of 40)", floats(first), ref);
}

// ---------------------------------------------------------------------------------------------
// A paged KV cache with shuffled blocks, filled with random K and V for every sequence's context.
// A batch's per-sequence arrays on the device and the AttentionBatch that points at them.
struct DeviceBatch {
  Dev<std::int32_t> q_start, q_len, context_len, tables;
  AttentionBatch view{};
  DeviceBatch(const std::vector<std::int32_t>& starts, const std::vector<std::int32_t>& lengths,
              const std::vector<std::int32_t>& contexts, const std::vector<std::int32_t>& block_tables,
              int max_blocks_per_seq, int max_context, int max_q_len)
      : q_start(starts), q_len(lengths), context_len(contexts), tables(block_tables) {
    view.q_start = q_start.p;
    view.q_len = q_len.p;
    view.context_len = context_len.p;
    view.block_tables = tables.p;
    view.max_blocks_per_seq = max_blocks_per_seq;
    view.num_seqs = static_cast<int>(starts.size());
    view.max_context = max_context;
    view.max_q_len = max_q_len;
  }
};

struct Paged {
  AttentionShape shape;
  int num_blocks = 0;
  std::vector<u16> k, v;             // [num_blocks, kv_heads, block_size, D]
  std::vector<std::int32_t> tables;  // [seqs, max_blocks]
  int max_blocks = 0;
  std::size_t at(int seq, int token, int kvh, int d) const {
    const std::int64_t block = tables[static_cast<std::size_t>(seq) * max_blocks + token / shape.block_size];
    return ((block * shape.kv_heads + kvh) * shape.block_size + token % shape.block_size) * shape.head_dim + d;
  }
};

Paged make_paged(const AttentionShape& shape, const std::vector<int>& contexts) {
  Paged p;
  p.shape = shape;
  int max_ctx = 1;
  for (int c : contexts) max_ctx = std::max(max_ctx, c);
  p.max_blocks = (max_ctx + shape.block_size - 1) / shape.block_size + 1;
  int needed = 0;
  for (int c : contexts) needed += (c + shape.block_size - 1) / shape.block_size;
  p.num_blocks = needed + 5;  // spare blocks stay poisoned: a read of one shows as NaN
  std::vector<int> perm(p.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  p.tables.assign(contexts.size() * p.max_blocks, 0);
  int next = 0;
  for (std::size_t s = 0; s < contexts.size(); ++s)
    for (int b = 0; b < (contexts[s] + shape.block_size - 1) / shape.block_size; ++b)
      p.tables[s * p.max_blocks + b] = perm[next++];
  const std::size_t elems = static_cast<std::size_t>(p.num_blocks) * shape.kv_heads * shape.block_size * shape.head_dim;
  p.k.assign(elems, kPoison);
  p.v.assign(elems, kPoison);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::size_t s = 0; s < contexts.size(); ++s)
    for (int t = 0; t < contexts[s]; ++t)
      for (int h = 0; h < shape.kv_heads; ++h)
        for (int d = 0; d < shape.head_dim; ++d) {
          p.k[p.at(static_cast<int>(s), t, h, d)] = to_b(2.0f * u(rng));  // spread-out scores
          p.v[p.at(static_cast<int>(s), t, h, d)] = to_b(u(rng));
        }
  return p;
}

// out row of query i of sequence s: attention over positions [0, ctx - q_len + i]. `slack` gets, per
// output element, what the kernels' BF16 probabilities may move it: each P rounds by up to 2^-9 of
// itself before P V on tensor cores, so |error| <= 2^-9 sum_t P_t |V_t|; twice that is allowed.
// (A near-zero output after cancellation can miss the RMS-based bound by this alone.)
std::vector<double> attention_ref(const Paged& p, const std::vector<u16>& q, int q_stride, int seq, int row, int pos,
                                  std::vector<double>* slack = nullptr) {
  const auto& sh = p.shape;
  const int D = sh.head_dim, group = sh.heads / sh.kv_heads;
  std::vector<double> o(static_cast<std::size_t>(sh.heads) * D, 0.0);
  for (int h = 0; h < sh.heads; ++h) {
    const int kvh = h / group;
    std::vector<double> s(pos + 1);
    double m = -INFINITY;
    for (int t = 0; t <= pos; ++t) {
      double dot = 0;
      for (int d = 0; d < D; ++d)
        dot += static_cast<double>(to_f(q[static_cast<std::size_t>(row) * q_stride + h * D + d])) *
               to_f(p.k[p.at(seq, t, kvh, d)]);
      s[t] = dot / std::sqrt(static_cast<double>(D));
      m = std::max(m, s[t]);
    }
    double l = 0;
    for (auto& e : s) l += (e = std::exp(e - m));
    for (int d = 0; d < D; ++d) {
      double spread = 0;
      for (int t = 0; t <= pos; ++t) {
        const double v = to_f(p.v[p.at(seq, t, kvh, d)]);
        o[h * D + d] += s[t] / l * v;
        spread += s[t] / l * std::fabs(v);
      }
      if (slack != nullptr) slack->push_back(std::ldexp(spread, -8));
    }
  }
  return o;
}

struct BatchHost {
  std::vector<std::int32_t> q_start, q_len, ctx;
};

// Decode: launch_decode_attention's own choice or one of its kernels, with kernel_param: for the
// streaming kernel its grid (0: its own; a fixed one checks the work split at its extremes, one block
// doing every pair or many blocks merging each pair), for the pair kernel its stages.
enum class DecodeKernel { automatic, streaming, split, pairs };

void run_attention_case(const std::string& name, const AttentionShape& shape, const BatchHost& b, bool decode,
                        DecodeKernel kernel = DecodeKernel::automatic, int kernel_param = 0,
                        PrefillAttentionPath prefill_path = PrefillAttentionPath::automatic) {
  const int seqs = static_cast<int>(b.ctx.size());
  const Paged p = make_paged(shape, b.ctx);
  int rows = 0, max_q = 0, max_ctx = 0;
  for (int s = 0; s < seqs; ++s) {
    rows = std::max(rows, b.q_start[s] + b.q_len[s]);
    max_q = std::max(max_q, b.q_len[s]);
    max_ctx = std::max(max_ctx, b.ctx[s]);
  }
  const int D = shape.head_dim;
  // Q inside a fused QKV-like buffer (stride wider than the Q heads), out with its own stride.
  const int q_stride = (shape.heads + 2 * shape.kv_heads) * D, out_stride = shape.heads * D + 8;
  const auto q = random_bf16(static_cast<std::size_t>(rows) * q_stride);
  Dev<u16> dq(q), dk(p.k), dv(p.v), dout(static_cast<std::size_t>(rows) * out_stride);
  dout.upload(std::vector<u16>(dout.n, kPoison));
  // max_context: a loose bound, as with graph capture: extra splits must exit.
  const DeviceBatch device_batch(b.q_start, b.q_len, b.ctx, p.tables, p.max_blocks, max_ctx + 700, max_q);
  const AttentionBatch& batch = device_batch.view;
  if (decode) {
    // Zeroed once, as the engine does: each launch must leave its merge counters at zero, so the
    // second launch (into a re-poisoned output) is the one checked.
    Dev<unsigned char> ws(decode_attention_workspace_bytes(seqs, shape.heads, D, batch.max_context));
    CUDA_CHECK(cudaMemset(ws.p, 0, ws.n));
    for (int launch = 0; launch < 2; ++launch) {
      dout.upload(std::vector<u16>(dout.n, kPoison));
      if (kernel == DecodeKernel::streaming) {
        try {
          launch_decode_attention_grid(kernel_param, dq.as<bf16>(), q_stride, dk.as<bf16>(), dv.as<bf16>(), batch,
                                       shape, ws.p, dout.as<bf16>(), out_stride, nullptr);
        } catch (const std::invalid_argument& e) {  // its shared memory does not fit this GPU
          std::printf("SKIP  %s: %s\n", name.c_str(), e.what());
          return;
        }
      } else if (kernel == DecodeKernel::pairs) {
        try {
          launch_decode_attention_pairs(kernel_param, dq.as<bf16>(), q_stride, dk.as<bf16>(), dv.as<bf16>(), batch,
                                        shape, dout.as<bf16>(), out_stride, nullptr);
        } catch (const std::invalid_argument& e) {  // head size 32, or its shared memory does not fit this GPU
          std::printf("SKIP  %s: %s\n", name.c_str(), e.what());
          return;
        }
      } else if (kernel == DecodeKernel::split) {
        launch_decode_attention_split(dq.as<bf16>(), q_stride, dk.as<bf16>(), dv.as<bf16>(), batch, shape, ws.p,
                                      dout.as<bf16>(), out_stride, nullptr);
      } else {
        launch_decode_attention(dq.as<bf16>(), q_stride, dk.as<bf16>(), dv.as<bf16>(), batch, shape, ws.p,
                                dout.as<bf16>(), out_stride, nullptr);
      }
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  } else if (!launch_prefill_attention_path(prefill_path, dq.as<bf16>(), q_stride, dk.as<bf16>(), dv.as<bf16>(), batch,
                                            shape, dout.as<bf16>(), out_stride, nullptr)) {
    std::printf("SKIP  %s: this kernel does not run on this GPU or head size\n", name.c_str());
    return;
  }
  const auto got = dout.download();
  std::vector<float> g;
  std::vector<double> ref, slack;
  std::vector<bool> row_used(rows, false);
  bool padding_ok = true;
  for (int s = 0; s < seqs; ++s) {
    for (int i = 0; i < b.q_len[s]; ++i) {
      const int row = b.q_start[s] + i;
      row_used[row] = true;
      if (b.ctx[s] == 0) {  // padding with a query row (decode): zeros
        for (int e = 0; e < shape.heads * D; ++e)
          padding_ok &= got[static_cast<std::size_t>(row) * out_stride + e] == 0;
        continue;
      }
      const auto o = attention_ref(p, q, q_stride, s, row, b.ctx[s] - b.q_len[s] + i, &slack);
      ref.insert(ref.end(), o.begin(), o.end());
      for (int e = 0; e < shape.heads * D; ++e) g.push_back(to_f(got[static_cast<std::size_t>(row) * out_stride + e]));
    }
  }
  // Rows of no sequence and the stride padding stay as they were.
  bool untouched = true;
  for (int r = 0; r < rows; ++r)
    for (int e = row_used[r] ? shape.heads * D : 0; e < out_stride; ++e)
      untouched &= got[static_cast<std::size_t>(r) * out_stride + e] == kPoison;
  check_close(name, g, ref, 1e-2, slack);
  report(name + ": padding rows zero, other memory untouched", padding_ok && untouched, "");
}

// The automatic choice and each kernel on its own.
void run_decode_cases(const std::string& name, const AttentionShape& shape, const BatchHost& b) {
  run_attention_case(name, shape, b, true);
  run_attention_case(name + " [streaming]", shape, b, true, DecodeKernel::streaming);
  run_attention_case(name + " [split]", shape, b, true, DecodeKernel::split);
  run_attention_case(name + " [pairs, 3 stages]", shape, b, true, DecodeKernel::pairs, 3);
  run_attention_case(name + " [pairs, 2 stages]", shape, b, true, DecodeKernel::pairs, 2);
}

void test_decode_attention() {
  // Contexts across split boundaries (512), a padding sequence with a row (ctx 0), one with no row.
  BatchHost b;
  b.ctx = {1, 17, 512, 513, 1500, 0, 700, 0};
  b.q_len = {1, 1, 1, 1, 1, 1, 1, 0};
  b.q_start = {3, 0, 1, 2, 5, 4, 6, 7};  // not in sequence order
  for (const int D : {128, 64, 32}) {
    for (const int group : {4, 1, 8, 3}) {
      if (D != 128 && group != 4) continue;
      const AttentionShape shape{2 * group, 2, D, 16};
      run_decode_cases(
          "decode attention D " + std::to_string(D) + " heads " + std::to_string(shape.heads) + " kv 2 block 16", shape,
          b);
    }
  }
  const AttentionShape odd_block{8, 2, 128, 7};  // block size not a power of two
  run_decode_cases("decode attention D 128 heads 8 kv 2 block 7", odd_block, b);
  // Llama-8B heads: 8 sequences, 4 short ones, 4 with a padding row, 8 up to 5000 tokens.
  const AttentionShape llama{32, 8, 128, 16};
  run_decode_cases("decode attention D 128 heads 32 kv 8 (8 sequences)", llama, b);
  BatchHost shortb;
  shortb.ctx = {1, 17, 512, 513};
  shortb.q_len = {1, 1, 1, 1};
  shortb.q_start = {2, 3, 0, 1};
  run_decode_cases("decode attention D 128 heads 32 kv 8 (4 short)", llama, shortb);
  BatchHost mid;
  mid.ctx = {1500, 0, 700, 33};
  mid.q_len = {1, 1, 1, 1};
  mid.q_start = {0, 1, 2, 3};
  run_decode_cases("decode attention D 128 heads 32 kv 8 (1500, padding)", llama, mid);
  BatchHost longer;
  longer.ctx = {5000, 1, 513, 1024, 0, 2047, 300, 4000};
  longer.q_len = {1, 1, 1, 1, 1, 1, 1, 1};
  longer.q_start = {7, 6, 5, 4, 3, 2, 1, 0};
  run_decode_cases("decode attention D 128 heads 32 kv 8 (5000 tokens)", llama, longer);
  // The same batch with every pair in one block (segments end at pair boundaries) and with the
  // largest grid (most pairs merged from several blocks).
  run_attention_case("decode attention D 128 heads 32 kv 8 (5000 tokens, grid 1)", llama, longer, true,
                     DecodeKernel::streaming, 1);
  run_attention_case("decode attention D 128 heads 32 kv 8 (5000 tokens, grid 1024)", llama, longer, true,
                     DecodeKernel::streaming, 1024);
  const AttentionShape group8{64, 8, 128, 16};  // Llama-3.1-70B: 8 query heads per KV head
  run_decode_cases("decode attention D 128 heads 64 kv 8 (5000 tokens)", group8, longer);
  // The engine's batch-32 decode benchmark: contexts 512..576 (uneven tile counts), one padding row.
  BatchHost b32;
  for (int s = 0; s < 32; ++s) {
    b32.ctx.push_back(s == 9 ? 0 : 512 + 2 * s);
    b32.q_len.push_back(1);
    b32.q_start.push_back((s * 7) % 32);
  }
  run_decode_cases("decode attention D 128 heads 32 kv 8 (batch 32, 512..574)", llama, b32);
  // More sequences than threads in a block (the streaming kernel's prefix sum takes 3 per thread).
  BatchHost many;
  for (int s = 0; s < 300; ++s) {
    many.ctx.push_back(s % 37 == 5 ? 0 : 1 + (s * 13) % 90);
    many.q_len.push_back(s % 41 == 7 ? 0 : 1);
    many.q_start.push_back(s);
  }
  run_decode_cases("decode attention D 64 heads 8 kv 2 block 7 (300 sequences)", AttentionShape{8, 2, 64, 7}, many);
}

// The automatic choice, then each prefill kernel on its own (the warpgroup-MMA one only where it runs).
void run_prefill_cases(const std::string& name, const AttentionShape& shape, const BatchHost& b) {
  run_attention_case(name, shape, b, false);
  run_attention_case(name + " [mma.sync]", shape, b, false, DecodeKernel::automatic, 0, PrefillAttentionPath::mma_sync);
  if (prefill_attention_wgmma_supported(shape.head_dim)) {
    // Its K/V by 16-byte cp.async copies, and by tensor copies of whole cache blocks (block sizes 8, 16,
    // 32, 64; the others report SKIP). The cache's unwritten slots are NaN, as the last block's can be.
    run_attention_case(name + " [wgmma cp.async]", shape, b, false, DecodeKernel::automatic, 0,
                       PrefillAttentionPath::wgmma_cp_async);
    run_attention_case(name + " [wgmma tma]", shape, b, false, DecodeKernel::automatic, 0,
                       PrefillAttentionPath::wgmma_tma);
  }
}

void test_prefill_attention() {
  // A full prompt, chunked prefills (q_len < ctx), a single-query chunk, padding, lengths that are
  // not multiples of the 64-row tiles.
  BatchHost b;
  b.ctx = {70, 300, 600, 0, 64, 129};
  b.q_len = {70, 1, 130, 0, 64, 65};
  b.q_start.resize(b.ctx.size());
  int row = 0;
  for (std::size_t s = 0; s < b.ctx.size(); ++s) {
    b.q_start[s] = row;
    row += b.q_len[s] + 3;  // gaps between sequences' rows: must stay untouched
  }
  for (const int D : {128, 64, 32}) {
    const AttentionShape shape{8, 2, D, 16};
    run_prefill_cases("prefill attention D " + std::to_string(D) + " heads 8 kv 2 block 16", shape, b);
  }
  const AttentionShape gqa8{8, 1, 128, 32};
  run_prefill_cases("prefill attention D 128 heads 8 kv 1 block 32", gqa8, b);
  // Chunks of at most 64 queries take the 64-row kernel; longer ones the 128-row one, here with
  // lengths and chunk offsets that are not multiples of 128 (the diagonal crossing 64-key tiles at
  // several offsets), a GQA group of 7 and a block size that is not a power of two.
  BatchHost shortq;
  shortq.ctx = {200, 64, 1000, 1, 0};
  shortq.q_len = {64, 1, 37, 1, 0};
  shortq.q_start = {0, 70, 71, 110, 111};
  for (const int D : {128, 64, 32}) {
    const AttentionShape shape{8, 2, D, 16};
    run_prefill_cases("prefill attention D " + std::to_string(D) + " heads 8 kv 2 block 16 (q_len <= 64)", shape,
                      shortq);
  }
  // Chunks over several query blocks and a K/V ring that wraps many times, with a chunk that starts
  // mid-context.
  BatchHost long_chunks;
  long_chunks.ctx = {1500, 520, 300};
  long_chunks.q_len = {700, 520, 1};
  long_chunks.q_start = {0, 705, 1230};
  run_prefill_cases("prefill attention D 128 heads 8 kv 2 block 16 (chunks of 520-700)", AttentionShape{8, 2, 128, 16},
                    long_chunks);
  BatchHost longq;
  longq.ctx = {1000, 259, 777, 129};
  longq.q_len = {259, 259, 200, 127};
  longq.q_start = {0, 262, 530, 740};
  for (const int D : {128, 64, 32}) {
    const AttentionShape shape{14, 2, D, 12};
    run_prefill_cases("prefill attention D " + std::to_string(D) + " heads 14 kv 2 block 12", shape, longq);
  }
}

// with_bias: a QKV bias (Qwen2.5) added to Q and K before the rotation and to V on its way into
// the cache; the buffer's V columns stay as they were.
// rows > 6: random positions up to 131000 and shuffled slots (every 7th -1); from 1024 rows the
// kernel takes several tokens per block, and 8197 leaves a partial last block. An odd stride_pad
// makes the rows 2-byte aligned only, the kernel's scalar path.
void test_rope_store_kv(bool with_bias, int rows = 6, int head_dim = 128, int stride_pad = 16) {
  const AttentionShape shape{4, 2, head_dim, 16};
  const int D = shape.head_dim, stride = (shape.heads + 2 * shape.kv_heads) * D + stride_pad;
  const std::string label = std::string(with_bias ? "rope_store_kv + QKV bias" : "rope_store_kv") +
                            (rows == 6 ? ""
                                       : " rows " + std::to_string(rows) + " D " + std::to_string(D) +
                                             (stride_pad % 2   ? " odd stride"
                                              : stride_pad % 8 ? " stride % 8 = 2"
                                                               : ""));
  const int num_blocks = std::max(8, (rows + 15) / 16 + 1);
  const float theta = 500000.0f;
  std::vector<std::int32_t> positions = {0, 1, 77, 4095, 8191, 131000};
  std::vector<std::int32_t> slots = {5, 16 * 3 + 2, -1, 16 * 7 + 15, 0, 33};
  if (rows != 6) {
    std::vector<std::int32_t> free_slots(static_cast<std::size_t>(num_blocks) * 16);
    std::iota(free_slots.begin(), free_slots.end(), 0);
    std::shuffle(free_slots.begin(), free_slots.end(), rng);
    std::uniform_int_distribution<int> position(0, 131000);
    positions.assign(rows, 0);
    slots.assign(rows, 0);
    for (int t = 0; t < rows; ++t) {
      positions[t] = position(rng);
      slots[t] = t % 7 == 3 ? -1 : free_slots[t];
    }
  }
  auto qkv = random_bf16(static_cast<std::size_t>(rows) * stride);
  const std::size_t cache_elems = static_cast<std::size_t>(num_blocks) * shape.kv_heads * shape.block_size * D;
  Dev<u16> dqkv(qkv), dk(std::vector<u16>(cache_elems, kPoison)), dv(std::vector<u16>(cache_elems, kPoison));
  Dev<std::int32_t> dpos(positions), dslot(slots);
  const int qkv_width = (shape.heads + 2 * shape.kv_heads) * D;
  const auto bias = with_bias ? random_bf16(qkv_width, 4.0f) : std::vector<u16>(qkv_width, to_b(0.0f));
  Dev<u16> dbias(bias);
  launch_rope_store_kv(dqkv.as<bf16>(), stride, dpos.p, dslot.p, rows, shape, theta, dk.as<bf16>(), dv.as<bf16>(),
                       nullptr, with_bias ? dbias.as<bf16>() : nullptr);
  const auto got = dqkv.download();
  const auto kc = dk.download();
  const auto vc = dv.download();
  std::vector<double> ref;
  std::vector<float> g;
  std::vector<u16> kref(cache_elems, kPoison), vref(cache_elems, kPoison);
  bool exact = true;
  for (int t = 0; t < rows; ++t) {
    const u16* row = qkv.data() + static_cast<std::size_t>(t) * stride;
    for (int h = 0; h < shape.heads + shape.kv_heads; ++h) {
      for (int i = 0; i < D / 2; ++i) {
        // The contract's FP32 angle: FP32 inv_freq times the FP32 position, then exact sin/cos.
        const float inv_freq = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / D));
        const double ang = static_cast<float>(positions[t]) * inv_freq;
        const double a = static_cast<double>(to_f(row[h * D + i])) + to_f(bias[h * D + i]);
        const double b = static_cast<double>(to_f(row[h * D + i + D / 2])) + to_f(bias[h * D + i + D / 2]);
        ref.push_back(a * std::cos(ang) - b * std::sin(ang));
        ref.push_back(b * std::cos(ang) + a * std::sin(ang));
        g.push_back(to_f(got[static_cast<std::size_t>(t) * stride + h * D + i]));
        g.push_back(to_f(got[static_cast<std::size_t>(t) * stride + h * D + i + D / 2]));
      }
    }
    // V and the stride padding unchanged in place.
    for (int e = (shape.heads + shape.kv_heads) * D; e < stride; ++e)
      exact &= got[static_cast<std::size_t>(t) * stride + e] == row[e];
    if (slots[t] < 0) continue;
    const int block = slots[t] / shape.block_size, off = slots[t] % shape.block_size;
    for (int h = 0; h < shape.kv_heads; ++h)
      for (int d = 0; d < D; ++d) {
        const std::size_t c = ((static_cast<std::size_t>(block) * shape.kv_heads + h) * shape.block_size + off) * D + d;
        kref[c] = got[static_cast<std::size_t>(t) * stride + (shape.heads + h) * D + d];  // the rotated K, as stored
        const int v_col = (shape.heads + shape.kv_heads + h) * D + d;
        vref[c] = with_bias ? to_b(to_f(row[v_col]) + to_f(bias[v_col])) : row[v_col];
      }
  }
  // Same FP32 angle on both sides; sincosf is within 2 ulp even at 1.3e5 rad, so BF16 rounding
  // of the outputs dominates (check_close's 1e-2).
  check_close(label + ": Q and K rotated (theta 5e5, pos to 131000)", g, ref);
  report(label + ": K/V at their slots, slot -1 stores nothing, V unchanged", exact && kc == kref && vc == vref, "");
}

// ---------------------------------------------------------------------------------------------
// Timing: CUDA events around `reps` calls, after warm-up; median of the samples.
float median_ms(const std::function<void(int)>& call, int reps, int samples = 25) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3 * reps; ++i) call(i);
  std::vector<float> t;
  int it = 0;
  for (int s = 0; s < samples; ++s) {
    CUDA_CHECK(cudaEventRecord(a));
    for (int r = 0; r < reps; ++r) call(it++);
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / reps);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void fill_random_device(u16* p, std::size_t n) {
  // Weights generator: random BF16 values without a host round trip.
  launch_init_weights(reinterpret_cast<bf16*>(p), 7, gi::WeightKind::wq, 0, 4096, 0,
                      static_cast<std::int64_t>(n / 4096), 0, 4096, nullptr);
  if (n % 4096)
    launch_init_weights(reinterpret_cast<bf16*>(p + n / 4096 * 4096), 7, gi::WeightKind::wk, 0, 4096, 0, 1, 0,
                        static_cast<std::int64_t>(n % 4096), nullptr);
}

// Enough copies that the rotation touches >= 4x the 50 MB L2 (cold reads, as in a decode step).
int copies_for(std::size_t bytes) {
  return static_cast<int>(std::max<std::size_t>(2, (400u << 20) / std::max<std::size_t>(bytes, 1) + 1));
}

// cuBLASLt's y = x W^T for the same shapes (row-major: Y^T = W^T' X^T in column-major terms), the
// library the engine times the skinny GEMM against.
struct LtGemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;  // the heuristic's first `count`
  Dev<unsigned char> workspace{32u << 20};
  bool ok = false;
  LtGemm(int rows, int n, int k, int count = 1) {
    CUBLAS_CHECK(cublasLtCreate(&handle));
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, n, k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, rows, k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, n, rows, n));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = workspace.n;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    candidates.resize(static_cast<std::size_t>(count));
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, c, pref, count, candidates.data(), &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    candidates.resize(static_cast<std::size_t>(found));
    ok = found > 0;
    if (ok) heuristic = candidates[0];
  }
  void run(const u16* w, const u16* x, u16* y, int candidate = 0) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(handle, op, &alpha, w, a, x, b, &beta, y, c, y, c,
                                &candidates[static_cast<std::size_t>(candidate)].algo, workspace.p, workspace.n,
                                nullptr));
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(handle);
  }
};

// Decode attention timings for one head shape: the automatic choice and each kernel (all_cases:
// contexts up to 8k and 32k, else the engine benchmark's 512..576 steps only).
// profile_batch > 0: only that batch at 512..576, the automatic choice launched 3 times untimed
// (a target for ncu --launch-skip 2 --launch-count 1).
// profile_pair_stages > 0: the pair kernel with that many stages instead.
void bench_decode_attention(const AttentionShape& shape, const char* name, bool all_cases, int profile_batch = 0,
                            int profile_pair_stages = 0) {
  // Plain launches, as the engine's start-up tuning times them: under programmatic launch the timed
  // launches overlap (the next one's blocks start their loads during the one before wherever the grid
  // leaves room on the SMs), which favours small grids by more than a decode step shows (bench/NOTES.md,
  // session 23).
  const ProgrammaticLaunchPause plain;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("\n## decode attention (%s: %d heads, %d KV heads, D %d, block %d): K+V bytes / time\n", name,
              shape.heads, shape.kv_heads, shape.head_dim, shape.block_size);
  std::printf(
      "(plain launches; contexts lo..hi spread evenly over the batch; us: launch_decode_attention's choice; split: "
      "the split kernel; "
      "stream@Nx: the streaming kernel on N blocks per SM, 2x its default; pairs/N: the pair kernel with N "
      "stages; GB/s at the choice)\n");
  std::printf("%6s %12s %8s %8s %10s %10s %10s %10s %8s %8s %8s %8s\n", "batch", "context", "us", "split", "stream@1x",
              "stream@2x", "stream@3x", "stream@4x", "pairs/3", "pairs/2", "GB/s", "MB read");
  struct DecodeCase {
    int batch, lo, hi;
  };
  std::vector<DecodeCase> cases;
  for (const int batch_size : {1, 8, 32}) {
    if (profile_batch > 0 && batch_size != profile_batch) continue;
    cases.push_back({batch_size, 512, 576});  // the engine benchmark's decode steps
    if (!all_cases) continue;
    for (const int ctx : {512, 1024, 2048, 4096, 8192}) cases.push_back({batch_size, ctx, ctx});
  }
  if (all_cases) cases.push_back({1, 32768, 32768});
  for (const DecodeCase& c : cases) {
    const int batch_size = c.batch;
    std::vector<std::int32_t> qs(batch_size), ql(batch_size, 1), cl(batch_size);
    std::iota(qs.begin(), qs.end(), 0);
    long long tokens = 0;
    for (int s = 0; s < batch_size; ++s) {
      cl[s] = batch_size > 1 ? c.lo + (c.hi - c.lo) * s / (batch_size - 1) : c.hi;
      tokens += cl[s];
    }
    const int blocks_per_seq = (c.hi + shape.block_size - 1) / shape.block_size;
    const std::size_t block_elems = static_cast<std::size_t>(shape.kv_heads) * shape.block_size * shape.head_dim;
    const std::size_t bytes = static_cast<std::size_t>(tokens) * shape.kv_heads * shape.head_dim * 2 * 2;
    const int sets = copies_for(bytes);
    const int num_blocks = batch_size * blocks_per_seq * sets;
    Dev<u16> k(static_cast<std::size_t>(num_blocks) * block_elems), v(k.n);
    fill_random_device(k.p, k.n);
    fill_random_device(v.p, v.n);
    // Each rotation set: its own shuffled blocks.
    std::vector<int> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int32_t> tables(perm.begin(), perm.end());
    const int q_stride = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
    Dev<u16> q(static_cast<std::size_t>(batch_size) * q_stride), out(static_cast<std::size_t>(batch_size) * 4096);
    fill_random_device(q.p, q.n);
    const int max_context = std::max(c.hi, 2048);  // the engine's context class for 512..576
    Dev<unsigned char> ws(decode_attention_workspace_bytes(batch_size, shape.heads, shape.head_dim, max_context));
    CUDA_CHECK(cudaMemset(ws.p, 0, ws.n));
    const DeviceBatch device_batch(qs, ql, cl, tables, blocks_per_seq, max_context, 1);
    const AttentionBatch& b = device_batch.view;
    if (profile_batch > 0) {
      for (int i = 0; i < 3; ++i) {
        if (profile_pair_stages > 0) {
          launch_decode_attention_pairs(profile_pair_stages, q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), b,
                                        shape, out.as<bf16>(), 4096, nullptr);
        } else {
          launch_decode_attention(q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), b, shape, ws.p, out.as<bf16>(),
                                  4096, nullptr);
        }
      }
      CUDA_CHECK(cudaDeviceSynchronize());
      continue;
    }
    char context[32];
    std::snprintf(context, sizeof context, c.lo == c.hi ? "%d" : "%d..%d", c.lo, c.hi);
    std::printf("%6d %12s", batch_size, context);
    float default_ms = 0;
    // per_sm -1: the automatic choice, 0: the split kernel, 1-4: the streaming kernel's grid, 5 and 6:
    // the pair kernel with 3 and 2 stages (0 us where it does not run).
    for (const int per_sm : {-1, 0, 1, 2, 3, 4, 5, 6}) {
      const int pair_stages = per_sm == 5 ? 3 : 2;
      if (per_sm >= 5 && !decode_attention_pairs_supported(shape.head_dim, pair_stages)) {
        std::printf(" %8.2f", 0.0);
        continue;
      }
      const float ms = median_ms(
          [&](int i) {
            AttentionBatch bi = b;
            bi.block_tables = device_batch.tables.p + static_cast<std::size_t>(i % sets) * batch_size * blocks_per_seq;
            if (per_sm < 0) {
              launch_decode_attention(q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), bi, shape, ws.p,
                                      out.as<bf16>(), 4096, nullptr);
            } else if (per_sm >= 5) {
              launch_decode_attention_pairs(pair_stages, q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), bi, shape,
                                            out.as<bf16>(), 4096, nullptr);
            } else if (per_sm == 0) {
              launch_decode_attention_split(q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), bi, shape, ws.p,
                                            out.as<bf16>(), 4096, nullptr);
            } else {
              launch_decode_attention_grid(per_sm * prop.multiProcessorCount, q.as<bf16>(), q_stride, k.as<bf16>(),
                                           v.as<bf16>(), bi, shape, ws.p, out.as<bf16>(), 4096, nullptr);
            }
          },
          10);
      if (per_sm < 0) default_ms = ms;
      std::printf(per_sm <= 0 || per_sm >= 5 ? " %8.2f" : " %10.2f", ms * 1e3);
    }
    std::printf(" %8.1f %8.1f\n", bytes / default_ms / 1e6, bytes / 1e6);
  }
}

// Llama-3.1-8B's prefill attention (32 heads, 8 KV heads, D 128, block 16, causal) at each (q_len,
// context), on each path: the median of `reps` launches after 3 warm-ups.
void bench_prefill_attention(const std::vector<std::pair<int, int>>& sizes,
                             const std::vector<PrefillAttentionPath>& paths, int reps) {
  const AttentionShape shape{32, 8, 128, 16};
  std::printf("\n## prefill attention (32 heads, 8 KV heads, D 128, block 16, causal): 4 D pairs heads / time\n");
  std::printf("%8s %8s %10s %10s %10s\n", "q_len", "context", "kernel", "ms", "TFLOP/s");
  for (const auto& qc : sizes) {
    const int q_len = qc.first, ctx = qc.second;
    const int blocks = ctx / shape.block_size;
    const std::size_t block_elems = static_cast<std::size_t>(shape.kv_heads) * shape.block_size * shape.head_dim;
    Dev<u16> k(static_cast<std::size_t>(blocks) * block_elems), v(k.n);
    fill_random_device(k.p, k.n);
    fill_random_device(v.p, v.n);
    std::vector<std::int32_t> table(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    const DeviceBatch device_batch({0}, {q_len}, {ctx}, table, blocks, ctx, q_len);
    const AttentionBatch& b = device_batch.view;
    const int q_stride = (shape.heads + 2 * shape.kv_heads) * shape.head_dim;
    Dev<u16> q(static_cast<std::size_t>(q_len) * q_stride), out(static_cast<std::size_t>(q_len) * 4096);
    fill_random_device(q.p, q.n);
    // Attended pairs: query i (position ctx - q_len + i) sees ctx - q_len + i + 1 keys.
    const double pairs = static_cast<double>(q_len) * (ctx - q_len) + static_cast<double>(q_len) * (q_len + 1) / 2;
    const double flops = 4.0 * shape.head_dim * pairs * shape.heads;
    for (const PrefillAttentionPath path : paths) {
      const char* label = path == PrefillAttentionPath::mma_sync         ? "mma.sync"
                          : path == PrefillAttentionPath::wgmma_cp_async ? "wgmma"
                                                                         : "wgmma tma";
      if (path != PrefillAttentionPath::mma_sync && !prefill_attention_wgmma_supported(shape.head_dim)) continue;
      const float ms = median_ms(
          [&](int) {
            launch_prefill_attention_path(path, q.as<bf16>(), q_stride, k.as<bf16>(), v.as<bf16>(), b, shape,
                                          out.as<bf16>(), 4096, nullptr);
          },
          3, reps);
      std::printf("%8d %8d %10s %10.3f %10.1f\n", q_len, ctx, label, ms, flops / ms / 1e9);
    }
  }
}

void bench() {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("\n# bench on %s (%d SMs); CUDA events, median of 25 samples after warm-up\n", prop.name,
              prop.multiProcessorCount);
  // Copy bandwidth: D2D cudaMemcpy of 1 GiB, bytes read + written.
  {
    const std::size_t bytes = 1ull << 30;
    Dev<unsigned char> a(bytes), b(bytes);
    CUDA_CHECK(cudaMemset(a.p, 1, bytes));
    const float ms = median_ms([&](int) { CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); }, 5);
    std::printf("copy D2D 1 GiB: %.1f GB/s (read + write)\n", 2.0 * bytes / ms / 1e6);
  }
  std::printf("\n## skinny_gemm (y = x W^T, BF16): W bytes / time; copy = D2D cudaMemcpy of the W bytes (r+w)\n");
  std::printf("(path tc: tensor cores, the automatic choice for 5-8 rows when k %% 32 == 0; cc: CUDA cores)\n");
  std::printf("%-10s %6s %6s %4s %4s %10s %10s %10s %8s %12s %10s\n", "shape", "n", "k", "rows", "path", "us", "GB/s",
              "copy GB/s", "vs copy", "cublasLt us", "vs Lt");
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"qkv", 6144, 4096},
                          {"o", 4096, 4096},
                          {"gate_up", 28672, 4096},
                          {"down", 4096, 14336},
                          {"lm_head", 128256, 4096}};
  for (const auto& s : shapes) {
    const std::size_t welems = static_cast<std::size_t>(s.n) * s.k, wbytes = welems * 2;
    const int copies = copies_for(wbytes);
    Dev<u16> w(welems * copies), x(static_cast<std::size_t>(8) * s.k), y(static_cast<std::size_t>(8) * s.n);
    fill_random_device(w.p, w.n);
    fill_random_device(x.p, x.n);
    // The copy reference: the same bytes, read and written, rotating over the same buffer.
    Dev<u16> dst(welems);
    const float copy_ms = median_ms(
        [&](int i) {
          CUDA_CHECK(cudaMemcpyAsync(dst.p, w.p + (i % copies) * welems, wbytes / 2, cudaMemcpyDeviceToDevice));
        },
        10);
    const double copy_gbps = wbytes / copy_ms / 1e6;  // wbytes/2 read + wbytes/2 written
    for (const int rows : {1, 2, 4, 8}) {
      LtGemm lt(rows, s.n, s.k);
      float lt_ms = NAN;
      if (lt.ok) lt_ms = median_ms([&](int i) { lt.run(w.p + (i % copies) * welems, x.p, y.p); }, 10);
      for (const auto& choice : {std::pair{SkinnyPath::tensor_core, "tc"}, std::pair{SkinnyPath::cuda_core, "cc"}}) {
        const SkinnyPath path = choice.first;
        const char* path_name = choice.second;
        const float ms = median_ms(
            [&](int i) {
              launch_skinny_gemm_path(path, x.as<bf16>(), rows, w.as<bf16>() + (i % copies) * welems, s.n, s.k, nullptr,
                                      y.as<bf16>(), nullptr);
            },
            10);
        const double gbps = wbytes / ms / 1e6;
        std::printf("%-10s %6d %6d %4d %4s %10.2f %10.1f %10.1f %8.3f %12.2f %10.3f\n", s.name, s.n, s.k, rows,
                    path_name, ms * 1e3, gbps, copy_gbps, gbps / copy_gbps, lt_ms * 1e3, lt_ms / ms);
      }
    }
  }

  bench_decode_attention({32, 8, 128, 16}, "Llama-3.1-8B", true);
  bench_decode_attention({28, 4, 128, 16}, "Qwen2.5-7B", false);

  bench_prefill_attention(
      {{8192, 8192}, {4096, 4096}, {2048, 8192}, {16384, 16384}, {32768, 32768}, {512, 512}, {1024, 1024}},
      {PrefillAttentionPath::mma_sync, PrefillAttentionPath::wgmma_cp_async, PrefillAttentionPath::wgmma_tma}, 21);
  // The BF16 GEMM rate the prefill target refers to (a projection of an 8k-token prefill).
  {
    const int m = 8192, n = 4096, k = 4096;
    Dev<u16> a(static_cast<std::size_t>(m) * k), w(static_cast<std::size_t>(n) * k), y(static_cast<std::size_t>(m) * n);
    fill_random_device(a.p, a.n);
    fill_random_device(w.p, w.n);
    LtGemm lt(m, n, k);
    if (lt.ok) {
      const float ms = median_ms([&](int) { lt.run(w.p, a.p, y.p); }, 3, 21);
      std::printf("cuBLASLt BF16 GEMM %dx%dx%d (y = x W^T): %.1f TFLOP/s\n", m, n, k, 2.0 * m * n * k / ms / 1e9);
    }
  }
}

// One 16 x 512 prefill step of Llama-3.1-8B (the serve benchmark's static batch prefills 16 prompts
// of 512 tokens per step), kernel by kernel on random data: where the step's time goes without the
// knock-out's side effect (a kernel left out leaves zeros behind, and GEMMs on zeros draw less
// power, so on a power-capped GPU they run faster).
void bench_prefill_step() {
  constexpr int kSeqs = 16, kLen = 512, kRows = kSeqs * kLen, kHidden = 4096, kFfn = 14336, kLayers = 32;
  const AttentionShape shape{32, 8, 128, 16};
  const int D = shape.head_dim, qkv_width = (shape.heads + 2 * shape.kv_heads) * D, q_dim = shape.heads * D;
  std::printf("\n## one prefill step of %d x %d tokens, Llama-3.1-8B shapes, per layer (x %d layers)\n", kSeqs, kLen,
              kLayers);
  const std::size_t copy_bytes = 1ull << 30;
  Dev<unsigned char> ca(copy_bytes), cb(copy_bytes);
  CUDA_CHECK(cudaMemset(ca.p, 1, copy_bytes));
  const float copy_ms =
      median_ms([&](int) { CUDA_CHECK(cudaMemcpyAsync(cb.p, ca.p, copy_bytes, cudaMemcpyDeviceToDevice)); }, 5);
  const double copy_gbps = 2.0 * copy_bytes / copy_ms / 1e6;
  std::printf("copy D2D 1 GiB: %.1f GB/s (read + write)\n", copy_gbps);
  std::printf("%-24s %10s %10s %10s %10s\n", "kernel", "us", "GB/s", "vs copy", "TFLOP/s");
  double layer_ms = 0;
  auto line = [&](const char* name, float ms, double bytes, double flops, int per_layer) {
    layer_ms += per_layer * ms;
    std::printf("%-24s %10.1f %10.1f %10.3f %10.1f\n", name, ms * 1e3, bytes / ms / 1e6, bytes / ms / 1e6 / copy_gbps,
                flops / ms / 1e9);
  };
  Dev<u16> x(static_cast<std::size_t>(kRows) * kHidden), norm_w(kHidden), xn(x.n);
  Dev<u16> gu(static_cast<std::size_t>(kRows) * 2 * kFfn), act(static_cast<std::size_t>(kRows) * kFfn);
  Dev<u16> qkv(static_cast<std::size_t>(kRows) * qkv_width), attn(static_cast<std::size_t>(kRows) * q_dim);
  for (Dev<u16>* d : {&x, &norm_w, &gu, &qkv}) fill_random_device(d->p, d->n);
  line("rmsnorm (x2)",
       median_ms(
           [&](int) { launch_rmsnorm(x.as<bf16>(), norm_w.as<bf16>(), kRows, kHidden, 1e-5f, xn.as<bf16>(), nullptr); },
           5),
       2.0 * kRows * kHidden * 2, 0, 2);
  line("silu_mul", median_ms([&](int) { launch_silu_mul(gu.as<bf16>(), kRows, kFfn, act.as<bf16>(), nullptr); }, 5),
       3.0 * kRows * kFfn * 2, 0, 1);
  // Each prompt's tokens in consecutive cache blocks; position = token index within its prompt.
  const int blocks_per_seq = kLen / shape.block_size;
  std::vector<std::int32_t> positions(kRows), slots(kRows), table(static_cast<std::size_t>(kSeqs) * blocks_per_seq);
  for (int t = 0; t < kRows; ++t) positions[t] = t % kLen, slots[t] = t;
  std::iota(table.begin(), table.end(), 0);
  const std::size_t cache_elems = static_cast<std::size_t>(kRows) * shape.kv_heads * D;
  Dev<std::int32_t> dpos(positions), dslot(slots);
  Dev<u16> kc(cache_elems), vc(cache_elems);
  const double rope_bytes = static_cast<double>(kRows) * D * 2 *
                            (2.0 * (shape.heads + shape.kv_heads) + shape.kv_heads + 2.0 * shape.kv_heads);
  line("rope_store_kv",
       median_ms(
           [&](int) {
             launch_rope_store_kv(qkv.as<bf16>(), qkv_width, dpos.p, dslot.p, kRows, shape, 500000.0f, kc.as<bf16>(),
                                  vc.as<bf16>(), nullptr, nullptr);
           },
           5),
       rope_bytes, 0, 1);
  std::vector<std::int32_t> q_start(kSeqs), q_len(kSeqs, kLen), ctx(kSeqs, kLen);
  for (int s = 0; s < kSeqs; ++s) q_start[s] = s * kLen;
  const DeviceBatch device_batch(q_start, q_len, ctx, table, blocks_per_seq, kLen, kLen);
  const AttentionBatch& b = device_batch.view;
  const double attention_flops = 4.0 * D * shape.heads * kSeqs * (static_cast<double>(kLen) * (kLen + 1) / 2);
  for (const auto path :
       {PrefillAttentionPath::automatic, PrefillAttentionPath::wgmma_cp_async, PrefillAttentionPath::mma_sync}) {
    line(path == PrefillAttentionPath::automatic        ? "prefill attention"
         : path == PrefillAttentionPath::wgmma_cp_async ? "prefill attention (wgmma cp.async)"
                                                        : "prefill attention (mma.sync)",
         median_ms(
             [&](int) {
               launch_prefill_attention_path(path, qkv.as<bf16>(), qkv_width, kc.as<bf16>(), vc.as<bf16>(), b, shape,
                                             attn.as<bf16>(), q_dim, nullptr);
             },
             5),
         0, attention_flops, path == PrefillAttentionPath::automatic ? 1 : 0);  // the sum: the engine's kernel
  }
  struct Proj {
    const char* name;
    int n, k;
  };
  for (const Proj& p : {Proj{"gemm qkv", qkv_width, kHidden}, Proj{"gemm o", kHidden, q_dim},
                        Proj{"gemm gate_up", 2 * kFfn, kHidden}, Proj{"gemm down", kHidden, kFfn}}) {
    Dev<u16> a(static_cast<std::size_t>(kRows) * p.k), w(static_cast<std::size_t>(p.n) * p.k),
        y(static_cast<std::size_t>(kRows) * p.n);
    fill_random_device(a.p, a.n);
    fill_random_device(w.p, w.n);
    LtGemm lt(kRows, p.n, p.k, 16);
    if (!lt.ok) continue;
    // The engine runs the heuristic's first algorithm at prefill sizes; the others for comparison.
    std::vector<float> times;
    for (int c = 0; c < static_cast<int>(lt.candidates.size()); ++c) {
      times.push_back(median_ms([&](int) { lt.run(w.p, a.p, y.p, c); }, 3, 9));
    }
    line(p.name, times[0], 0, 2.0 * kRows * p.n * p.k, 1);
    const auto best = std::min_element(times.begin(), times.end()) - times.begin();
    std::printf("  %zu candidates: best #%td %.1f us (%.1f TFLOP/s); all:", times.size(), best, times[best] * 1e3,
                2.0 * kRows * p.n * p.k / times[best] / 1e9);
    for (float t : times) std::printf(" %.0f", t * 1e3);
    std::printf("\n");
  }
  std::printf(
      "sum per layer %.3f ms, x %d layers = %.1f ms (the step also runs the embedding gather and the LM head "
      "on %d rows)\n",
      layer_ms, kLayers, layer_ms * kLayers, kSeqs);
}

// ---------------------------------------------------------------------------------------------
// FP8 (compute capability 8.9+): weight codes, dynamic per-tensor quantization, the FP8 decode GEMM.

std::vector<std::uint8_t> random_e4m3_codes(std::size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> v(n);
  for (auto& c : v) {
    do c = static_cast<std::uint8_t>(byte(rng));
    while ((c & 0x7F) == 0x7F);  // no NaN codes
  }
  return v;
}

void test_fp8_weight_codes() {
  const gi::WeightKind kinds[] = {gi::WeightKind::wq, gi::WeightKind::wo, gi::WeightKind::w_down};
  std::size_t total = 0, mismatched = 0;
  for (const auto kind : kinds) {
    const int in = 333;
    const float scale = gi::fp8_weight_scale(in);
    const std::int64_t row0 = 57, rows = 41, col0 = 100, cols = 117;  // a shard inside the tensor
    Dev<std::uint8_t> d(std::vector<std::uint8_t>(rows * cols, 0x7F));
    launch_init_weights_fp8(d.p, 42, kind, 3, in, row0, rows, col0, cols, scale, nullptr);
    const auto got = d.download();
    const auto stream = gi::tensor_stream(42, kind, 3);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c, ++total) {
        const auto idx = static_cast<std::uint64_t>((row0 + r) * in + col0 + c);
        mismatched += got[r * cols + c] != gi::fp8_weight_code(stream, kind, idx, in, scale);
      }
  }
  report("init_weights_fp8: bit-exact vs weights.hpp (3 kinds, shards)", mismatched == 0,
         std::to_string(mismatched) + " of " + std::to_string(total) + " differ");
}

// The GPU's scale must be max|x| / 448 and its codes CUDA's own conversion (round to nearest even,
// saturating), which weights.hpp's host encoder must reproduce bit for bit. Run several times on
// different data: the scratch words must have reset themselves.
void test_fp8_quantize() {
  Dev<unsigned> words(std::vector<unsigned>{0, 0});
  Dev<float> scale(1);
  const Fp8Scratch scratch{words.p, words.p + 1, scale.p};
  // Each size twice in a row at |x| <= 3 (the slots must be left reset), a decode step's size too.
  for (const std::size_t count : {std::size_t{1} << 20, std::size_t{1000003}, std::size_t{32 * 4096}, std::size_t{5}}) {
    for (const float range : {3.0f, 0.01f, 3.0f}) {
      const auto x = random_bf16(count, range);
      Dev<u16> dx(x);
      Dev<std::uint8_t> out(std::vector<std::uint8_t>(count + 8, 0x7F));
      launch_quantize_fp8(dx.as<bf16>(), static_cast<std::int64_t>(count), scratch, out.p, nullptr);
      const float got_scale = scale.download()[0];
      const auto codes = out.download();
      float amax = 0;
      for (u16 v : x) amax = std::max(amax, std::fabs(to_f(v)));
      const float want_scale = amax / gi::kE4m3Max;
      const float inv = 1.0f / got_scale;
      std::size_t bad = 0;
      for (std::size_t i = 0; i < count; ++i) bad += codes[i] != gi::float_to_e4m3_bits(to_f(x[i]) * inv);
      const auto left = words.download();
      char name[128], detail[160];
      std::snprintf(name, sizeof name, "quantize_fp8 %zu elements, |x| <= %g", count, range);
      std::snprintf(detail, sizeof detail, "scale %.6g (want %.6g), %zu codes differ, scratch left %u/%u, tail %#x",
                    got_scale, want_scale, bad, left[0], left[1], codes[count]);
      report(name, got_scale == want_scale && bad == 0 && left[0] == 0 && left[1] == 0 && codes[count] == 0x7F, detail);
    }
  }
}

void test_skinny_gemm_fp8() {
  struct Case {
    int rows, n, k;
    bool residual;
  };
  // k % 64 == 0: tensor cores; otherwise the scalar path.
  const Case cases[] = {{1, 300, 512, false}, {2, 257, 4096, true}, {4, 64, 1024, false}, {5, 77, 576, true},
                        {8, 515, 1536, true}, {8, 40, 100, true},   {3, 9, 13, false}};
  for (const auto& c : cases) {
    const float w_scale = gi::fp8_weight_scale(c.k);
    const auto x = random_bf16(static_cast<std::size_t>(c.rows) * c.k);
    const auto w = random_e4m3_codes(static_cast<std::size_t>(c.n) * c.k);
    const auto res = random_bf16(static_cast<std::size_t>(c.rows) * c.n);
    Dev<u16> dx(x), dy(static_cast<std::size_t>(c.rows) * c.n);
    Dev<std::uint8_t> dw(w);
    dy.upload(c.residual ? res : std::vector<u16>(dy.n, kPoison));
    launch_skinny_gemm_fp8(dx.as<bf16>(), c.rows, dw.p, w_scale, c.n, c.k, c.residual ? dy.as<bf16>() : nullptr,
                           dy.as<bf16>(), nullptr);
    std::vector<double> ref(dy.n);
    for (int r = 0; r < c.rows; ++r)
      for (int j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int i = 0; i < c.k; ++i)
          acc += static_cast<double>(to_f(x[r * c.k + i])) * gi::e4m3_bits_to_float(w[j * c.k + i]);
        ref[r * c.n + j] = acc * w_scale + (c.residual ? to_f(res[r * c.n + j]) : 0.0);
      }
    char name[128];
    std::snprintf(name, sizeof name, "skinny_gemm_fp8 rows %d n %d k %d%s", c.rows, c.n, c.k,
                  c.residual ? " +res (aliased)" : "");
    check_close(name, floats(dy.download()), ref);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cudaDeviceProp prop{};
    if (!start_gpu_test(prop)) return 77;
    if (argc > 2 && std::strcmp(argv[1], "--decode-profile") == 0) {
      // Launches only (no checks): batch 32 at 512..576 for the named head shape.
      const bool qwen = std::strcmp(argv[2], "qwen") == 0;
      bench_decode_attention(qwen ? AttentionShape{28, 4, 128, 16} : AttentionShape{32, 8, 128, 16},
                             qwen ? "Qwen2.5-7B" : "Llama-3.1-8B", false, 32, argc > 3 ? std::atoi(argv[3]) : 0);
      return 0;
    }
    if (argc > 2 && std::strcmp(argv[1], "--prefill-profile") == 0) {
      // Launches only (no checks): the tensor-copy kernel at q_len = context = N, 3 warm-ups and 3
      // timed launches, for Nsight Compute (--kernel-name regex:prefill_wgmma --launch-skip 3).
      const int n = std::atoi(argv[2]);
      if (n < 1 || n % 16 != 0) throw std::invalid_argument("--prefill-profile N: N a positive multiple of 16");
      bench_prefill_attention({{n, n}}, {PrefillAttentionPath::wgmma_tma}, 3);
      return 0;
    }
    // --decode-only: just the decode attention cases (small enough for compute-sanitizer).
    const bool decode_only = argc > 1 && std::strcmp(argv[1], "--decode-only") == 0;
    if (!decode_only) {
      test_init_weights();
      test_gather();
      test_rmsnorm();
      test_silu_mul();
      test_argmax();
      test_rope_store_kv(false);
      test_rope_store_kv(true);
      test_rope_store_kv(false, 8197, 64);
      test_rope_store_kv(true, 8197, 32);
      test_rope_store_kv(true, 1100, 128, 1);
      test_rope_store_kv(true, 1100, 128, 2);  // even stride, not a multiple of 8: the BF16-pair path
      test_skinny_gemm();
      test_ring_gemv_inputs();
      test_ring_gemv_repeats();
    }
    test_decode_attention();
    if (!decode_only) {
      test_prefill_attention();
      if (prop.major * 10 + prop.minor >= 89) {
        test_fp8_weight_codes();
        test_fp8_quantize();
        test_skinny_gemm_fp8();
      } else {
        std::printf("FP8 kernels: skipped (compute capability %d.%d, FP8 needs 8.9)\n", prop.major, prop.minor);
      }
    }
    std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
    if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) bench();
    if (argc > 1 && std::strcmp(argv[1], "--prefill-step-bench") == 0) bench_prefill_step();
    if (decode_only && argc > 2 && std::strcmp(argv[2], "--bench") == 0) {
      bench_decode_attention({32, 8, 128, 16}, "Llama-3.1-8B", false);
      bench_decode_attention({28, 4, 128, 16}, "Qwen2.5-7B", false);
    }
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
