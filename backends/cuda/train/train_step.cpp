// The CUDA train step; see train_step.hpp. Buffers are exactly train::train_step_memory(shape, attention).
#include "train_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpuscout/cuda/check.hpp"
#include "gpuscout/cuda/timing.hpp"
#include "gpuscout/infer/weights.hpp"
#include "gpuscout/train/train_cost.hpp"
#include "kernels.hpp"
#include "train_attention.hpp"
#include "train_gemm.hpp"
#include "train_kernels.hpp"

namespace gpuscout::cuda::train {

namespace core = gpuscout::train;
using gpuscout::infer::WeightKind;

namespace {

// Every allocation of the step, counted so allocated_bytes() can be checked against the model.
struct Allocator {
  std::int64_t bytes = 0;
  template <typename T>
  DeviceBuffer<T> make(std::int64_t count) {
    bytes += count * static_cast<std::int64_t>(sizeof(T));
    return DeviceBuffer<T>(static_cast<std::size_t>(count));
  }
};

std::vector<float> to_host(const bf16* device, std::int64_t count) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(count));
  GPUSCOUT_CUDA_CHECK(cudaMemcpy(bits.data(), device, bits.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = gpuscout::infer::bf16_bits_to_float(bits[i]);
  return out;
}

constexpr std::int64_t kScaleSlotBytes = 256;  // cuBLASLt refuses a scale pointer aligned less than an allocation
constexpr int kLinears = 4;                    // QKV, O, gate/up, down
constexpr int kScalesPerLinear = 3;            // x, W, dY

struct Fp8Sizes {
  std::int64_t kept_per_layer, weight_scratch, x_scratch, dy_scratch, slots;
};

Fp8Sizes fp8_sizes(const core::TrainShape& s) {
  const auto& m = s.model;
  const std::int64_t rows = s.tokens(), h = m.hidden, ffn = m.ffn_hidden;
  const std::int64_t max_in = std::max<std::int64_t>({h, m.q_dim(), ffn});
  const std::int64_t max_out = std::max<std::int64_t>({m.qkv_dim(), h, 2 * ffn});
  const std::int64_t max_weight = std::max<std::int64_t>({m.qkv_dim() * h, h * m.q_dim(), 2 * ffn * h, h * ffn});
  return {core::layer_matrix_params(m) + rows * (h + m.q_dim() + h + ffn), max_weight, rows * max_in, rows * max_out,
          static_cast<std::int64_t>(s.layers) * kLinears * kScalesPerLinear};
}

}  // namespace

TrainAttention default_train_attention() {
  const char* env = std::getenv("GPUSCOUT_TRAIN_ATTENTION");
  const std::string name = env != nullptr ? env : "";
  if (name.empty() || name == "flash") return TrainAttention::flash;
  if (name == "materialized") return TrainAttention::materialized;
  throw std::invalid_argument("GPUSCOUT_TRAIN_ATTENTION must be flash or materialized, not '" + name + "'");
}

std::int64_t fp8_buffer_bytes(const core::TrainShape& s) {
  const Fp8Sizes z = fp8_sizes(s);
  return s.layers * z.kept_per_layer + z.weight_scratch + z.x_scratch + 2 * z.dy_scratch + z.slots * kScaleSlotBytes;
}

struct TrainStep::Impl {
  // FP8 state of one linear layer: the transposed E4M3 codes of W [in, out] and of its input x
  // [in, rows] written by the forward for the backward, and the scales of x, W and dY.
  struct Fp8Linear {
    std::uint8_t *w_t = nullptr, *x_t = nullptr;
    infer::Fp8Scratch x_scale, w_scale, dy_scale;
  };
  struct Layer {
    DeviceBuffer<bf16> weights;  // attn_norm | wqkv | wo | mlp_norm | w_gate_up | w_down
    bf16 *attn_norm, *wqkv, *wo, *mlp_norm, *w_gate_up, *w_down;
    DeviceBuffer<bf16> grad_wqkv, grad_wo, grad_w_gate_up, grad_w_down;
    DeviceBuffer<float> grad_norms;  // attn_norm | mlp_norm
    // Kept for backward (out is also the next layer's input).
    DeviceBuffer<bf16> n1, qkv, attn, x2, n2, gate_up, act, out;
    DeviceBuffer<bf16> probs;             // materialized: the softmax probabilities [batch, heads, seq, seq]
    DeviceBuffer<float> lse;              // flash: the rows' log-sum-exp [batch, heads, seq] (log2 domain)
    DeviceBuffer<std::uint8_t> fp8_kept;  // FP8 mode: every Fp8Linear's w_t and x_t
    Fp8Linear fp8_qkv, fp8_o, fp8_gate_up, fp8_down;
  };

  core::TrainShape shape;
  int h, q_dim, kv_dim, qkv_dim, ffn, heads, kv_heads, d, group, batch, seq;
  std::int64_t rows, square;
  float scale;
  Allocator alloc;
  DeviceBuffer<std::uint8_t> workspace;
  std::unique_ptr<Gemm> gemm;
  DeviceBuffer<bf16> input, projection;
  std::vector<Layer> layers;
  DeviceBuffer<float> scores, delta, inv_rms, loss;
  DeviceBuffer<bf16> dscores, dact, dgate_up, dn, dattn, dqkv, dy, dx2;
  bool fp8 = false;
  TrainAttention attention;
  // FP8 scratch: the forward's codes of W and x, the backward's codes of dY and of its transpose.
  DeviceBuffer<std::uint8_t> fp8_w, fp8_x, fp8_dy, fp8_dy_t, fp8_slots;

  Impl(const core::TrainShape& s, TrainPrecision precision, TrainAttention attention);
  void allocate_fp8();
  void generate(cudaStream_t stream);
  // C[m, n] = A B^T (+ residual) of contiguous FP8 codes, A [m, k] (a_type), B [n, k] E4M3.
  void fp8_gemm(int m, int n, int k, const std::uint8_t* a, Operand a_type, const float* a_scale, const std::uint8_t* b,
                const float* b_scale, bf16* c, const bf16* residual, cudaStream_t st) {
    gemm->run({.m = m,
               .n = n,
               .k = k,
               .trans_b = true,
               .a = a,
               .lda = k,
               .b = b,
               .ldb = k,
               .c = c,
               .ldc = n,
               .c_in = residual,
               .beta = residual != nullptr ? 1.0f : 0.0f,
               .a_type = a_type,
               .b_type = Operand::e4m3,
               .a_scale = a_scale,
               .b_scale = b_scale},
              st);
  }
  // y = x W^T (+ residual): W [out, in]. FP8 mode: E4M3 codes of W and x, their transposes kept in f8.
  void linear(const bf16* x, int in, const bf16* w, int out, bf16* y, const bf16* residual, Fp8Linear& f8,
              cudaStream_t st) {
    if (fp8) {
      const int r = static_cast<int>(rows);
      infer::launch_fp8_scale(w, static_cast<std::int64_t>(out) * in, f8.w_scale, gpuscout::infer::kE4m3Max, st);
      launch_quantize_fp8_transpose(w, out, in, f8.w_scale.scale, Fp8Format::e4m3, fp8_w.get(), f8.w_t, st);
      infer::launch_fp8_scale(x, rows * in, f8.x_scale, gpuscout::infer::kE4m3Max, st);
      launch_quantize_fp8_transpose(x, r, in, f8.x_scale.scale, Fp8Format::e4m3, fp8_x.get(), f8.x_t, st);
      fp8_gemm(r, out, in, fp8_x.get(), Operand::e4m3, f8.x_scale.scale, fp8_w.get(), f8.w_scale.scale, y, residual,
               st);
      return;
    }
    gemm->run({.m = int(rows),
               .n = out,
               .k = in,
               .trans_b = true,
               .a = x,
               .lda = in,
               .b = w,
               .ldb = in,
               .c = y,
               .ldc = out,
               .c_in = residual,
               .beta = residual != nullptr ? 1.0f : 0.0f},
              st);
  }
  // dx = dy W (the input gradient of y = x W^T).
  void linear_dgrad(const bf16* dy_, int out, const bf16* w, int in, bf16* dx, cudaStream_t st) {
    gemm->run({.m = int(rows), .n = in, .k = out, .a = dy_, .lda = out, .b = w, .ldb = in, .c = dx, .ldc = in}, st);
  }
  // dW = dy^T x (the weight gradient).
  void linear_wgrad(const bf16* dy_, int out, const bf16* x, int in, bf16* dw, cudaStream_t st) {
    gemm->run({.m = out,
               .n = in,
               .k = int(rows),
               .trans_a = true,
               .a = dy_,
               .lda = out,
               .b = x,
               .ldb = in,
               .c = dw,
               .ldc = in},
              st);
  }
  // dx = dy W and dW = dy^T x for y = x W^T. FP8 mode: E5M2 codes of dy and of its transpose times
  // the E4M3 transposes of W and x the forward kept.
  void linear_backward(const bf16* dy_, int out, const bf16* w, int in, const bf16* x, bf16* dx, bf16* dw,
                       Fp8Linear& f8, cudaStream_t st) {
    if (!fp8) {
      linear_dgrad(dy_, out, w, in, dx, st);
      linear_wgrad(dy_, out, x, in, dw, st);
      return;
    }
    const int r = static_cast<int>(rows);
    infer::launch_fp8_scale(dy_, rows * out, f8.dy_scale, gpuscout::infer::kE5m2Max, st);
    launch_quantize_fp8_transpose(dy_, r, out, f8.dy_scale.scale, Fp8Format::e5m2, fp8_dy.get(), fp8_dy_t.get(), st);
    fp8_gemm(r, in, out, fp8_dy.get(), Operand::e5m2, f8.dy_scale.scale, f8.w_t, f8.w_scale.scale, dx, nullptr, st);
    fp8_gemm(out, in, r, fp8_dy_t.get(), Operand::e5m2, f8.dy_scale.scale, f8.x_t, f8.x_scale.scale, dw, nullptr, st);
  }
  FlashShape flash_shape() const { return {batch, seq, heads, kv_heads, d}; }
  void attention_forward(Layer& L, cudaStream_t st);
  void attention_backward(Layer& L, cudaStream_t st);
};

TrainStep::Impl::Impl(const core::TrainShape& s, TrainPrecision precision, TrainAttention attention_)
    : shape(s), fp8(precision == TrainPrecision::fp8), attention(attention_) {
  core::check_train_shape(s);
  const auto& m = s.model;
  h = m.hidden;
  q_dim = m.q_dim();
  kv_dim = m.kv_dim();
  qkv_dim = m.qkv_dim();
  ffn = m.ffn_hidden;
  heads = m.heads;
  kv_heads = m.kv_heads;
  d = m.head_dim;
  group = heads / kv_heads;
  batch = s.micro_batch;
  seq = s.seq;
  rows = s.tokens();
  square = static_cast<std::int64_t>(seq) * seq;
  scale = 1.0f / std::sqrt(static_cast<float>(d));
  if (rows > 0x7FFFFFFF / 2) throw std::invalid_argument("train step: too many tokens for one step");

  workspace = alloc.make<std::uint8_t>(core::kTrainGemmWorkspaceBytes);
  gemm = std::make_unique<Gemm>(workspace.get(), workspace.size());
  const std::int64_t th = rows * h;
  input = alloc.make<bf16>(th);
  projection = alloc.make<bf16>(th);
  const std::int64_t matrix = core::layer_matrix_params(m);
  for (int l = 0; l < s.layers; ++l) {
    Layer L;
    L.weights = alloc.make<bf16>(matrix + 2 * h);
    L.attn_norm = L.weights.get();
    L.wqkv = L.attn_norm + h;
    L.wo = L.wqkv + static_cast<std::int64_t>(qkv_dim) * h;
    L.mlp_norm = L.wo + static_cast<std::int64_t>(h) * q_dim;
    L.w_gate_up = L.mlp_norm + h;
    L.w_down = L.w_gate_up + 2 * static_cast<std::int64_t>(ffn) * h;
    L.grad_wqkv = alloc.make<bf16>(static_cast<std::int64_t>(qkv_dim) * h);
    L.grad_wo = alloc.make<bf16>(static_cast<std::int64_t>(h) * q_dim);
    L.grad_w_gate_up = alloc.make<bf16>(2 * static_cast<std::int64_t>(ffn) * h);
    L.grad_w_down = alloc.make<bf16>(static_cast<std::int64_t>(h) * ffn);
    L.grad_norms = alloc.make<float>(2 * h);
    L.n1 = alloc.make<bf16>(th);
    L.qkv = alloc.make<bf16>(rows * qkv_dim);
    L.attn = alloc.make<bf16>(rows * q_dim);
    L.x2 = alloc.make<bf16>(th);
    L.n2 = alloc.make<bf16>(th);
    L.gate_up = alloc.make<bf16>(rows * 2 * ffn);
    L.act = alloc.make<bf16>(rows * ffn);
    L.out = alloc.make<bf16>(th);
    if (attention == TrainAttention::flash) {
      L.lse = alloc.make<float>(static_cast<std::int64_t>(batch) * heads * seq);
    } else {
      L.probs = alloc.make<bf16>(static_cast<std::int64_t>(batch) * heads * square);
    }
    layers.push_back(std::move(L));
  }
  if (attention == TrainAttention::materialized) {
    scores = alloc.make<float>(kv_heads * square);
    dscores = alloc.make<bf16>(kv_heads * square);
  }
  delta = alloc.make<float>(static_cast<std::int64_t>(batch) * heads * seq);
  dact = alloc.make<bf16>(rows * ffn);
  dgate_up = alloc.make<bf16>(rows * 2 * ffn);
  dn = alloc.make<bf16>(th);
  dattn = alloc.make<bf16>(rows * q_dim);
  dqkv = alloc.make<bf16>(rows * qkv_dim);
  dy = alloc.make<bf16>(th);
  dx2 = alloc.make<bf16>(th);
  inv_rms = alloc.make<float>(rows);
  loss = alloc.make<float>(1);
  if (fp8) allocate_fp8();
}

void TrainStep::Impl::allocate_fp8() {
  const Fp8Sizes z = fp8_sizes(shape);
  fp8_w = alloc.make<std::uint8_t>(z.weight_scratch);
  fp8_x = alloc.make<std::uint8_t>(z.x_scratch);
  fp8_dy = alloc.make<std::uint8_t>(z.dy_scratch);
  fp8_dy_t = alloc.make<std::uint8_t>(z.dy_scratch);
  fp8_slots = alloc.make<std::uint8_t>(z.slots * kScaleSlotBytes);
  GPUSCOUT_CUDA_CHECK(cudaMemset(fp8_slots.get(), 0, fp8_slots.bytes()));  // Fp8Scratch starts zeroed
  std::uint8_t* slot = fp8_slots.get();
  auto scratch = [&slot] {
    infer::Fp8Scratch f{.amax_bits = reinterpret_cast<unsigned*>(slot + 4),
                        .blocks_done = reinterpret_cast<unsigned*>(slot + 8),
                        .scale = reinterpret_cast<float*>(slot)};
    slot += kScaleSlotBytes;
    return f;
  };
  for (Layer& L : layers) {
    L.fp8_kept = alloc.make<std::uint8_t>(z.kept_per_layer);
    std::uint8_t* at = L.fp8_kept.get();
    auto take = [&at](std::int64_t bytes) { return std::exchange(at, at + bytes); };
    const std::int64_t qkv_w = static_cast<std::int64_t>(qkv_dim) * h, o_w = static_cast<std::int64_t>(h) * q_dim;
    const std::int64_t gate_up_w = 2 * static_cast<std::int64_t>(ffn) * h, down_w = static_cast<std::int64_t>(h) * ffn;
    const std::pair<Fp8Linear*, std::pair<std::int64_t, int>> linears[] = {{&L.fp8_qkv, {qkv_w, h}},
                                                                           {&L.fp8_o, {o_w, q_dim}},
                                                                           {&L.fp8_gate_up, {gate_up_w, h}},
                                                                           {&L.fp8_down, {down_w, ffn}}};
    for (const auto& [f8, size] : linears) {
      f8->w_t = take(size.first);
      f8->x_t = take(rows * size.second);
      f8->x_scale = scratch();
      f8->w_scale = scratch();
      f8->dy_scale = scratch();
    }
  }
}

void TrainStep::Impl::generate(cudaStream_t st) {
  using infer::launch_init_weights;
  const std::uint64_t seed = shape.seed;
  launch_init_weights(input.get(), seed, WeightKind::embedding, core::kInputStreamLayer, h, 0, rows, 0, h, st);
  launch_init_weights(projection.get(), seed, WeightKind::embedding, core::kProjectionStreamLayer, h, 0, rows, 0, h,
                      st);
  for (int l = 0; l < shape.layers; ++l) {
    Layer& L = layers[static_cast<std::size_t>(l)];
    const auto layer = static_cast<std::uint32_t>(l);
    launch_init_weights(L.attn_norm, seed, WeightKind::attn_norm, layer, h, 0, 1, 0, h, st);
    launch_init_weights(L.wqkv, seed, WeightKind::wq, layer, h, 0, q_dim, 0, h, st);
    launch_init_weights(L.wqkv + static_cast<std::int64_t>(q_dim) * h, seed, WeightKind::wk, layer, h, 0, kv_dim, 0, h,
                        st);
    launch_init_weights(L.wqkv + static_cast<std::int64_t>(q_dim + kv_dim) * h, seed, WeightKind::wv, layer, h, 0,
                        kv_dim, 0, h, st);
    launch_init_weights(L.wo, seed, WeightKind::wo, layer, q_dim, 0, h, 0, q_dim, st);
    launch_init_weights(L.mlp_norm, seed, WeightKind::mlp_norm, layer, h, 0, 1, 0, h, st);
    launch_init_weights(L.w_gate_up, seed, WeightKind::w_gate, layer, h, 0, ffn, 0, h, st);
    launch_init_weights(L.w_gate_up + static_cast<std::int64_t>(ffn) * h, seed, WeightKind::w_up, layer, h, 0, ffn, 0,
                        h, st);
    launch_init_weights(L.w_down, seed, WeightKind::w_down, layer, ffn, 0, h, 0, ffn, st);
  }
}

// Per sequence b and per query head j of each KV group: the kv_heads heads g*group + j are one
// strided batch (Q, K, V and the output read in place from the fused [tokens, q | k | v] rows):
// head g's Q starts g*group*D columns after head j's, its K and V g*D columns after KV head 0's.
void TrainStep::Impl::attention_forward(Layer& L, cudaStream_t st) {
  if (attention == TrainAttention::flash) {
    launch_flash_attention_forward(L.qkv.get(), flash_shape(), L.attn.get(), L.lse.get(), st);
    return;
  }
  const std::int64_t q_stride = static_cast<std::int64_t>(group) * d, p_stride = group * square;
  for (int b = 0; b < batch; ++b) {
    const bf16* qkv_b = L.qkv.get() + static_cast<std::int64_t>(b) * seq * qkv_dim;
    const bf16 *k_b = qkv_b + q_dim, *v_b = k_b + kv_dim;
    for (int j = 0; j < group; ++j) {
      const bf16* q_bj = qkv_b + static_cast<std::int64_t>(j) * d;
      bf16* probs_bj = L.probs.get() + (static_cast<std::int64_t>(b) * heads + j) * square;
      // scores = scale Q K^T (FP32), then the causal softmax into the kept probabilities.
      gemm->run({.m = seq,
                 .n = seq,
                 .k = d,
                 .trans_b = true,
                 .a = q_bj,
                 .lda = qkv_dim,
                 .b = k_b,
                 .ldb = qkv_dim,
                 .c = scores.get(),
                 .ldc = seq,
                 .c_fp32 = true,
                 .alpha = scale,
                 .batch = kv_heads,
                 .stride_a = q_stride,
                 .stride_b = d,
                 .stride_c = square},
                st);
      launch_causal_softmax(scores.get(), kv_heads, seq, probs_bj, p_stride, st);
      // O = P V, into the attention output's head columns.
      bf16* out_bj = L.attn.get() + static_cast<std::int64_t>(b) * seq * q_dim + static_cast<std::int64_t>(j) * d;
      gemm->run({.m = seq,
                 .n = d,
                 .k = seq,
                 .a = probs_bj,
                 .lda = seq,
                 .b = v_b,
                 .ldb = qkv_dim,
                 .c = out_bj,
                 .ldc = q_dim,
                 .batch = kv_heads,
                 .stride_a = p_stride,
                 .stride_b = d,
                 .stride_c = q_stride},
                st);
    }
  }
}

// dP = dO V^T; dS = P (dP - rowsum(dO * O)); dV += P^T dO; dQ = scale dS K; dK += scale dS^T Q
// (dV and dK sum over the group's query heads: beta = 1 after the first).
void TrainStep::Impl::attention_backward(Layer& L, cudaStream_t st) {
  const std::int64_t q_stride = static_cast<std::int64_t>(group) * d, p_stride = group * square;
  launch_attention_delta(dattn.get(), L.attn.get(), rows, heads, d, seq, delta.get(), st);
  if (attention == TrainAttention::flash) {
    launch_flash_attention_backward(L.qkv.get(), dattn.get(), L.lse.get(), delta.get(), flash_shape(), dqkv.get(), st);
    return;
  }
  for (int b = 0; b < batch; ++b) {
    const std::int64_t row0 = static_cast<std::int64_t>(b) * seq;
    const bf16* qkv_b = L.qkv.get() + row0 * qkv_dim;
    const bf16 *k_b = qkv_b + q_dim, *v_b = k_b + kv_dim;
    bf16* dqkv_b = dqkv.get() + row0 * qkv_dim;
    bf16 *dk_b = dqkv_b + q_dim, *dv_b = dk_b + kv_dim;
    for (int j = 0; j < group; ++j) {
      const std::int64_t col = static_cast<std::int64_t>(j) * d;
      const bf16* probs_bj = L.probs.get() + (static_cast<std::int64_t>(b) * heads + j) * square;
      const bf16* dout_bj = dattn.get() + row0 * q_dim + col;
      const float accumulate = j > 0 ? 1.0f : 0.0f;
      gemm->run({.m = seq,
                 .n = seq,
                 .k = d,
                 .trans_b = true,
                 .a = dout_bj,
                 .lda = q_dim,
                 .b = v_b,
                 .ldb = qkv_dim,
                 .c = scores.get(),
                 .ldc = seq,
                 .c_fp32 = true,
                 .batch = kv_heads,
                 .stride_a = q_stride,
                 .stride_b = d,
                 .stride_c = square},
                st);  // dP
      launch_causal_softmax_backward(probs_bj, p_stride, scores.get(),
                                     delta.get() + (static_cast<std::int64_t>(b) * heads + j) * seq,
                                     static_cast<std::int64_t>(group) * seq, kv_heads, seq, dscores.get(), st);
      gemm->run({.m = seq,
                 .n = d,
                 .k = seq,
                 .trans_a = true,
                 .a = probs_bj,
                 .lda = seq,
                 .b = dout_bj,
                 .ldb = q_dim,
                 .c = dv_b,
                 .ldc = qkv_dim,
                 .beta = accumulate,
                 .batch = kv_heads,
                 .stride_a = p_stride,
                 .stride_b = q_stride,
                 .stride_c = d},
                st);  // dV
      gemm->run({.m = seq,
                 .n = d,
                 .k = seq,
                 .a = dscores.get(),
                 .lda = seq,
                 .b = k_b,
                 .ldb = qkv_dim,
                 .c = dqkv_b + col,
                 .ldc = qkv_dim,
                 .alpha = scale,
                 .batch = kv_heads,
                 .stride_a = square,
                 .stride_b = d,
                 .stride_c = q_stride},
                st);  // dQ
      gemm->run({.m = seq,
                 .n = d,
                 .k = seq,
                 .trans_a = true,
                 .a = dscores.get(),
                 .lda = seq,
                 .b = qkv_b + col,
                 .ldb = qkv_dim,
                 .c = dk_b,
                 .ldc = qkv_dim,
                 .alpha = scale,
                 .beta = accumulate,
                 .batch = kv_heads,
                 .stride_a = square,
                 .stride_b = q_stride,
                 .stride_c = d},
                st);  // dK
    }
  }
}

TrainStep::TrainStep(const core::TrainShape& shape, TrainPrecision precision, TrainAttention attention)
    : impl_(std::make_unique<Impl>(shape, precision, attention)) {
  impl_->generate(nullptr);
  GPUSCOUT_CUDA_CHECK(cudaDeviceSynchronize());
}

TrainStep::~TrainStep() = default;

void TrainStep::forward(cudaStream_t st) {
  Impl& m = *impl_;
  const float eps = m.shape.model.norm_eps;
  const float theta = static_cast<float>(m.shape.model.rope_theta);
  const int rows = static_cast<int>(m.rows);
  GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(m.loss.get(), 0, sizeof(float), st));
  const bf16* x = m.input.get();
  for (Impl::Layer& L : m.layers) {
    infer::launch_rmsnorm(x, L.attn_norm, rows, m.h, eps, L.n1.get(), st);
    m.linear(L.n1.get(), m.h, L.wqkv, m.qkv_dim, L.qkv.get(), nullptr, L.fp8_qkv, st);
    launch_rope(L.qkv.get(), m.rows, m.qkv_dim, 0, m.heads, m.d, m.seq, theta, 1, st);
    launch_rope(L.qkv.get(), m.rows, m.qkv_dim, m.q_dim, m.kv_heads, m.d, m.seq, theta, 1, st);
    m.attention_forward(L, st);
    m.linear(L.attn.get(), m.q_dim, L.wo, m.h, L.x2.get(), x, L.fp8_o, st);
    infer::launch_rmsnorm(L.x2.get(), L.mlp_norm, rows, m.h, eps, L.n2.get(), st);
    m.linear(L.n2.get(), m.h, L.w_gate_up, 2 * m.ffn, L.gate_up.get(), nullptr, L.fp8_gate_up, st);
    infer::launch_silu_mul(L.gate_up.get(), rows, m.ffn, L.act.get(), st);
    m.linear(L.act.get(), m.ffn, L.w_down, m.h, L.out.get(), L.x2.get(), L.fp8_down, st);
    x = L.out.get();
  }
  launch_dot_loss(x, m.projection.get(), m.rows * m.h, m.loss.get(), st);
}

void TrainStep::backward(cudaStream_t st) {
  Impl& m = *impl_;
  const float eps = m.shape.model.norm_eps;
  const float theta = static_cast<float>(m.shape.model.rope_theta);
  const int rows = static_cast<int>(m.rows);
  // dL/dy = P for loss = sum(y * P); `dy` carries the residual stream's gradient between layers.
  GPUSCOUT_CUDA_CHECK(
      cudaMemcpyAsync(m.dy.get(), m.projection.get(), m.projection.bytes(), cudaMemcpyDeviceToDevice, st));
  for (int l = m.shape.layers - 1; l >= 0; --l) {
    Impl::Layer& L = m.layers[static_cast<std::size_t>(l)];
    const bf16* x = l == 0 ? m.input.get() : m.layers[static_cast<std::size_t>(l) - 1].out.get();
    GPUSCOUT_CUDA_CHECK(cudaMemsetAsync(L.grad_norms.get(), 0, L.grad_norms.bytes(), st));
    // MLP: y = x2 + act W_down^T, act = silu(gate) up, [gate | up] = rmsnorm(x2) W_gate_up^T.
    m.linear_backward(m.dy.get(), m.h, L.w_down, m.ffn, L.act.get(), m.dact.get(), L.grad_w_down.get(), L.fp8_down, st);
    launch_swiglu_backward(L.gate_up.get(), m.dact.get(), m.rows, m.ffn, m.dgate_up.get(), st);
    m.linear_backward(m.dgate_up.get(), 2 * m.ffn, L.w_gate_up, m.h, L.n2.get(), m.dn.get(), L.grad_w_gate_up.get(),
                      L.fp8_gate_up, st);
    launch_rmsnorm_backward(L.x2.get(), L.mlp_norm, m.dn.get(), m.dy.get(), rows, m.h, eps, m.dx2.get(),
                            m.inv_rms.get(), st);
    launch_rmsnorm_weight_grad(L.x2.get(), m.dn.get(), m.inv_rms.get(), rows, m.h, L.grad_norms.get() + m.h, st);
    // Attention: x2 = x + attn W_o^T.
    m.linear_backward(m.dx2.get(), m.h, L.wo, m.q_dim, L.attn.get(), m.dattn.get(), L.grad_wo.get(), L.fp8_o, st);
    m.attention_backward(L, st);
    launch_rope(m.dqkv.get(), m.rows, m.qkv_dim, 0, m.heads, m.d, m.seq, theta, -1, st);
    launch_rope(m.dqkv.get(), m.rows, m.qkv_dim, m.q_dim, m.kv_heads, m.d, m.seq, theta, -1, st);
    m.linear_backward(m.dqkv.get(), m.qkv_dim, L.wqkv, m.h, L.n1.get(), m.dn.get(), L.grad_wqkv.get(), L.fp8_qkv, st);
    launch_rmsnorm_backward(x, L.attn_norm, m.dn.get(), m.dx2.get(), rows, m.h, eps, m.dy.get(), m.inv_rms.get(), st);
    launch_rmsnorm_weight_grad(x, m.dn.get(), m.inv_rms.get(), rows, m.h, L.grad_norms.get(), st);
  }
}

float TrainStep::loss() const {
  float value = 0;
  GPUSCOUT_CUDA_CHECK(cudaMemcpy(&value, impl_->loss.get(), sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

std::vector<float> TrainStep::output() const {
  const Impl& m = *impl_;
  return to_host(m.layers.back().out.get(), m.rows * m.h);
}

std::vector<float> TrainStep::input_gradient() const {
  return to_host(impl_->dy.get(), impl_->rows * impl_->h);
}

std::vector<float> TrainStep::layer_gradient(int layer, core::LayerTensor tensor) const {
  const Impl& m = *impl_;
  const Impl::Layer& L = m.layers.at(static_cast<std::size_t>(layer));
  switch (tensor) {
    case core::LayerTensor::attn_norm:
    case core::LayerTensor::mlp_norm: {
      std::vector<float> out(static_cast<std::size_t>(m.h));
      const float* src = L.grad_norms.get() + (tensor == core::LayerTensor::mlp_norm ? m.h : 0);
      GPUSCOUT_CUDA_CHECK(cudaMemcpy(out.data(), src, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
      return out;
    }
    case core::LayerTensor::wqkv:
      return to_host(L.grad_wqkv.get(), static_cast<std::int64_t>(L.grad_wqkv.size()));
    case core::LayerTensor::wo:
      return to_host(L.grad_wo.get(), static_cast<std::int64_t>(L.grad_wo.size()));
    case core::LayerTensor::w_gate_up:
      return to_host(L.grad_w_gate_up.get(), static_cast<std::int64_t>(L.grad_w_gate_up.size()));
    case core::LayerTensor::w_down:
      break;
  }
  return to_host(L.grad_w_down.get(), static_cast<std::int64_t>(L.grad_w_down.size()));
}

std::int64_t TrainStep::allocated_bytes() const {
  return impl_->alloc.bytes;
}

TrainAttention TrainStep::attention() const {
  return impl_->attention;
}

}  // namespace gpuscout::cuda::train
