// The CPU reference of the training step: one plain loop per operator, FP64 throughout.
#include "gpuscout/train/train_reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpuscout/infer/weights.hpp"

namespace gpuscout::train {
namespace {

using infer::WeightKind;
using Vec = std::vector<double>;

}  // namespace

void check_train_shape(const TrainShape& s) {
  const auto& m = s.model;
  auto positive = [](std::int64_t value, const char* field) {
    if (value < 1) throw std::invalid_argument(fmt::format("train step: {} must be at least 1 (got {})", field, value));
  };
  positive(s.layers, "layers");
  positive(s.micro_batch, "micro_batch");
  positive(s.seq, "seq");
  positive(m.hidden, "hidden");
  positive(m.heads, "heads");
  positive(m.kv_heads, "kv_heads");
  positive(m.head_dim, "head_dim");
  positive(m.ffn_hidden, "ffn_hidden");
  if (m.heads % m.kv_heads != 0 || m.head_dim % 2 != 0) {
    throw std::invalid_argument(fmt::format(
        "train step: heads ({}) must be a multiple of kv_heads ({}) and head_dim ({}) even; {} does not run", m.heads,
        m.kv_heads, m.head_dim, m.name));
  }
}

namespace {

// rows x in_features elements of one deterministic tensor, BF16-rounded.
Vec make_tensor(std::uint64_t seed, WeightKind kind, std::uint32_t layer, std::int64_t rows, int in_features) {
  const std::uint64_t stream = infer::tensor_stream(seed, kind, layer);
  Vec t(static_cast<std::size_t>(rows) * in_features);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = infer::round_to_bf16(infer::weight_value(stream, kind, i, in_features));
  return t;
}

Vec concat(std::initializer_list<Vec> parts) {
  Vec out;
  for (const Vec& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// y[r, n] = x[r, :] . w[n, :] (a Linear layer: w is [out, in]).
void matmul_nt(const Vec& x, std::size_t rows, int in, const Vec& w, int out, Vec& y) {
  y.assign(rows * out, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * in];
    for (int n = 0; n < out; ++n) {
      const double* wn = &w[static_cast<std::size_t>(n) * in];
      double sum = 0;
      for (int k = 0; k < in; ++k) sum += xr[k] * wn[k];
      y[r * out + n] = sum;
    }
  }
}

// dx[r, k] = dy[r, :] . w[:, k]: the input gradient of a Linear layer.
void matmul_nn(const Vec& dy, std::size_t rows, int out, const Vec& w, int in, Vec& dx) {
  dx.assign(rows * in, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    double* dxr = &dx[r * in];
    for (int n = 0; n < out; ++n) {
      const double g = dy[r * out + n];
      const double* wn = &w[static_cast<std::size_t>(n) * in];
      for (int k = 0; k < in; ++k) dxr[k] += g * wn[k];
    }
  }
}

// dw[n, k] = sum over rows of dy[r, n] x[r, k]: the weight gradient of a Linear layer.
void matmul_tn(const Vec& dy, std::size_t rows, int out, const Vec& x, int in, Vec& dw) {
  dw.assign(static_cast<std::size_t>(out) * in, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * in];
    for (int n = 0; n < out; ++n) {
      const double g = dy[r * out + n];
      double* dwn = &dw[static_cast<std::size_t>(n) * in];
      for (int k = 0; k < in; ++k) dwn[k] += g * xr[k];
    }
  }
}

// out = x * inv_rms * g per row, inv_rms = 1 / sqrt(mean(x^2) + eps).
void rmsnorm_forward(const Vec& x, std::size_t rows, int h, const Vec& g, double eps, Vec& out, Vec& inv_rms) {
  out.assign(rows * h, 0.0);
  inv_rms.assign(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    double sum_sq = 0;
    for (int i = 0; i < h; ++i) sum_sq += x[r * h + i] * x[r * h + i];
    inv_rms[r] = 1.0 / std::sqrt(sum_sq / h + eps);
    for (int i = 0; i < h; ++i) out[r * h + i] = x[r * h + i] * inv_rms[r] * g[i];
  }
}

// With xhat = x * inv_rms and v = dn * g: dx += inv_rms * (v - xhat * mean(v * xhat)), dg += dn * xhat.
void rmsnorm_backward(const Vec& x, std::size_t rows, int h, const Vec& g, const Vec& inv_rms, const Vec& dn, Vec& dx,
                      Vec& dg) {
  dg.assign(h, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double rr = inv_rms[r];
    double dot = 0;
    for (int i = 0; i < h; ++i) dot += dn[r * h + i] * g[i] * x[r * h + i] * rr;
    for (int i = 0; i < h; ++i) {
      const double xhat = x[r * h + i] * rr;
      dx[r * h + i] += rr * (dn[r * h + i] * g[i] - xhat * dot / h);
      dg[i] += dn[r * h + i] * xhat;
    }
  }
}

// Rotates pairs (i, i + D/2) of `heads` heads from column col0 by angle position * theta^(-2i/D),
// position = row % seq; direction -1 applies the inverse rotation (the backward pass: R^T = R(-angle)).
void rope(Vec& t, std::size_t rows, int stride, int col0, int heads, int head_dim, int seq, double theta,
          int direction) {
  const int half = head_dim / 2;
  for (std::size_t r = 0; r < rows; ++r) {
    const double position = static_cast<double>(r % static_cast<std::size_t>(seq));
    for (int h = 0; h < heads; ++h) {
      double* v = &t[r * stride + col0 + static_cast<std::size_t>(h) * head_dim];
      for (int i = 0; i < half; ++i) {
        const double angle = position * std::pow(theta, -2.0 * i / head_dim);
        const double c = std::cos(angle), s = direction * std::sin(angle);
        const double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// What the backward pass of one layer needs from its forward pass.
struct LayerCache {
  Vec x, inv_rms1, n1, qkv, probs, attn, x2, inv_rms2, n2, gate_up, act;
};

struct Dims {
  int h, q_dim, kv_dim, qkv_dim, ffn, heads, kv_heads, d, group, batch, seq;
  std::size_t rows;
  double scale;
  explicit Dims(const TrainShape& s)
      : h(s.model.hidden),
        q_dim(s.model.q_dim()),
        kv_dim(s.model.kv_dim()),
        qkv_dim(s.model.qkv_dim()),
        ffn(s.model.ffn_hidden),
        heads(s.model.heads),
        kv_heads(s.model.kv_heads),
        d(s.model.head_dim),
        group(s.model.heads / s.model.kv_heads),
        batch(s.micro_batch),
        seq(s.seq),
        rows(static_cast<std::size_t>(s.tokens())),
        scale(1.0 / std::sqrt(static_cast<double>(s.model.head_dim))) {}
  // Offsets into the fused QKV rows.
  std::size_t q(std::size_t row, int head) const { return row * qkv_dim + static_cast<std::size_t>(head) * d; }
  std::size_t k(std::size_t row, int head) const {
    return row * qkv_dim + q_dim + static_cast<std::size_t>(head / group) * d;
  }
  std::size_t v(std::size_t row, int head) const { return k(row, head) + kv_dim; }
  // probs[b, head, i, j]
  std::size_t p(int b, int head, int i, int j) const {
    return ((static_cast<std::size_t>(b) * heads + head) * seq + i) * static_cast<std::size_t>(seq) + j;
  }
};

// Causal attention within each sequence; probs keeps the softmax for the backward pass.
void attention_forward(const Dims& dm, const Vec& qkv, Vec& probs, Vec& out) {
  probs.assign(static_cast<std::size_t>(dm.batch) * dm.heads * dm.seq * dm.seq, 0.0);
  out.assign(dm.rows * dm.q_dim, 0.0);
  for (int b = 0; b < dm.batch; ++b) {
    for (int h = 0; h < dm.heads; ++h) {
      for (int i = 0; i < dm.seq; ++i) {
        const std::size_t ri = static_cast<std::size_t>(b) * dm.seq + i;
        double max_score = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const std::size_t rj = static_cast<std::size_t>(b) * dm.seq + j;
          double s = 0;
          for (int e = 0; e < dm.d; ++e) s += qkv[dm.q(ri, h) + e] * qkv[dm.k(rj, h) + e];
          probs[dm.p(b, h, i, j)] = s * dm.scale;
          max_score = std::max(max_score, s * dm.scale);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) {
          double& pij = probs[dm.p(b, h, i, j)];
          pij = std::exp(pij - max_score);
          sum += pij;
        }
        for (int j = 0; j <= i; ++j) {
          const double pij = probs[dm.p(b, h, i, j)] /= sum;
          const std::size_t rj = static_cast<std::size_t>(b) * dm.seq + j;
          for (int e = 0; e < dm.d; ++e)
            out[ri * dm.q_dim + static_cast<std::size_t>(h) * dm.d + e] += pij * qkv[dm.v(rj, h) + e];
        }
      }
    }
  }
}

// dS = P * (dP - rowsum(dO * O)); dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO (summed over the
// query heads sharing a KV head).
void attention_backward(const Dims& dm, const Vec& qkv, const Vec& probs, const Vec& out, const Vec& dout, Vec& dqkv) {
  dqkv.assign(dm.rows * dm.qkv_dim, 0.0);
  std::vector<double> dp(static_cast<std::size_t>(dm.seq));
  for (int b = 0; b < dm.batch; ++b) {
    for (int h = 0; h < dm.heads; ++h) {
      for (int i = 0; i < dm.seq; ++i) {
        const std::size_t ri = static_cast<std::size_t>(b) * dm.seq + i;
        const std::size_t oi = ri * dm.q_dim + static_cast<std::size_t>(h) * dm.d;
        double delta = 0;
        for (int e = 0; e < dm.d; ++e) delta += dout[oi + e] * out[oi + e];
        for (int j = 0; j <= i; ++j) {
          const std::size_t rj = static_cast<std::size_t>(b) * dm.seq + j;
          const double pij = probs[dm.p(b, h, i, j)];
          double dpij = 0;
          for (int e = 0; e < dm.d; ++e) dpij += dout[oi + e] * qkv[dm.v(rj, h) + e];
          const double ds = pij * (dpij - delta) * dm.scale;
          for (int e = 0; e < dm.d; ++e) {
            dqkv[dm.q(ri, h) + e] += ds * qkv[dm.k(rj, h) + e];
            dqkv[dm.k(rj, h) + e] += ds * qkv[dm.q(ri, h) + e];
            dqkv[dm.v(rj, h) + e] += pij * dout[oi + e];
          }
        }
      }
    }
  }
}

// One layer forward: returns its output, keeps what backward needs in `c`.
Vec layer_forward(const TrainShape& s, const Dims& dm, const LayerTensors& w, const Vec& x, LayerCache& c) {
  const double eps = s.model.norm_eps;
  c.x = x;
  rmsnorm_forward(x, dm.rows, dm.h, w.attn_norm, eps, c.n1, c.inv_rms1);
  matmul_nt(c.n1, dm.rows, dm.h, w.wqkv, dm.qkv_dim, c.qkv);
  rope(c.qkv, dm.rows, dm.qkv_dim, 0, dm.heads, dm.d, dm.seq, s.model.rope_theta, 1);
  rope(c.qkv, dm.rows, dm.qkv_dim, dm.q_dim, dm.kv_heads, dm.d, dm.seq, s.model.rope_theta, 1);
  attention_forward(dm, c.qkv, c.probs, c.attn);
  matmul_nt(c.attn, dm.rows, dm.q_dim, w.wo, dm.h, c.x2);
  for (std::size_t i = 0; i < c.x2.size(); ++i) c.x2[i] += x[i];
  rmsnorm_forward(c.x2, dm.rows, dm.h, w.mlp_norm, eps, c.n2, c.inv_rms2);
  matmul_nt(c.n2, dm.rows, dm.h, w.w_gate_up, 2 * dm.ffn, c.gate_up);
  c.act.assign(dm.rows * dm.ffn, 0.0);
  for (std::size_t r = 0; r < dm.rows; ++r) {
    for (int i = 0; i < dm.ffn; ++i) {
      const double g = c.gate_up[r * 2 * dm.ffn + i], u = c.gate_up[r * 2 * dm.ffn + dm.ffn + i];
      c.act[r * dm.ffn + i] = g * sigmoid(g) * u;
    }
  }
  Vec y;
  matmul_nt(c.act, dm.rows, dm.ffn, w.w_down, dm.h, y);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += c.x2[i];
  return y;
}

// One layer backward: dy in, dx out; the layer's weight gradients into `g`.
Vec layer_backward(const TrainShape& s, const Dims& dm, const LayerTensors& w, const LayerCache& c, const Vec& dy,
                   LayerTensors& g) {
  (void)s;
  Vec dx2 = dy;
  Vec dact, dgate_up(dm.rows * 2 * dm.ffn), dn2, dattn, dqkv, dn1;
  matmul_nn(dy, dm.rows, dm.h, w.w_down, dm.ffn, dact);
  matmul_tn(dy, dm.rows, dm.h, c.act, dm.ffn, g.w_down);
  for (std::size_t r = 0; r < dm.rows; ++r) {
    for (int i = 0; i < dm.ffn; ++i) {
      const double gt = c.gate_up[r * 2 * dm.ffn + i], u = c.gate_up[r * 2 * dm.ffn + dm.ffn + i];
      const double sg = sigmoid(gt), da = dact[r * dm.ffn + i];
      dgate_up[r * 2 * dm.ffn + i] = da * u * sg * (1.0 + gt * (1.0 - sg));
      dgate_up[r * 2 * dm.ffn + dm.ffn + i] = da * gt * sg;
    }
  }
  matmul_nn(dgate_up, dm.rows, 2 * dm.ffn, w.w_gate_up, dm.h, dn2);
  matmul_tn(dgate_up, dm.rows, 2 * dm.ffn, c.n2, dm.h, g.w_gate_up);
  rmsnorm_backward(c.x2, dm.rows, dm.h, w.mlp_norm, c.inv_rms2, dn2, dx2, g.mlp_norm);
  matmul_nn(dx2, dm.rows, dm.h, w.wo, dm.q_dim, dattn);
  matmul_tn(dx2, dm.rows, dm.h, c.attn, dm.q_dim, g.wo);
  attention_backward(dm, c.qkv, c.probs, c.attn, dattn, dqkv);
  rope(dqkv, dm.rows, dm.qkv_dim, 0, dm.heads, dm.d, dm.seq, s.model.rope_theta, -1);
  rope(dqkv, dm.rows, dm.qkv_dim, dm.q_dim, dm.kv_heads, dm.d, dm.seq, s.model.rope_theta, -1);
  matmul_nn(dqkv, dm.rows, dm.qkv_dim, w.wqkv, dm.h, dn1);
  matmul_tn(dqkv, dm.rows, dm.qkv_dim, c.n1, dm.h, g.wqkv);
  Vec dx = dx2;
  rmsnorm_backward(c.x, dm.rows, dm.h, w.attn_norm, c.inv_rms1, dn1, dx, g.attn_norm);
  return dx;
}

void check_inputs(const TrainShape& s, const TrainInputs& in) {
  check_train_shape(s);
  const std::size_t elements = static_cast<std::size_t>(s.tokens()) * s.model.hidden;
  if (static_cast<int>(in.layers.size()) != s.layers || in.input.size() != elements ||
      in.loss_projection.size() != elements) {
    throw std::invalid_argument(
        fmt::format("train step: inputs hold {} layers and {}/{} input/projection elements; the shape needs {} and {}",
                    in.layers.size(), in.input.size(), in.loss_projection.size(), s.layers, elements));
  }
}

double dot(const Vec& a, const Vec& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

const char* to_string(LayerTensor tensor) {
  switch (tensor) {
    case LayerTensor::attn_norm:
      return "attn_norm";
    case LayerTensor::wqkv:
      return "wqkv";
    case LayerTensor::wo:
      return "wo";
    case LayerTensor::mlp_norm:
      return "mlp_norm";
    case LayerTensor::w_gate_up:
      return "w_gate_up";
    case LayerTensor::w_down:
      return "w_down";
  }
  return "?";
}

std::vector<double>& tensor_of(LayerTensors& layer, LayerTensor tensor) {
  return const_cast<std::vector<double>&>(tensor_of(static_cast<const LayerTensors&>(layer), tensor));
}

const std::vector<double>& tensor_of(const LayerTensors& layer, LayerTensor tensor) {
  switch (tensor) {
    case LayerTensor::attn_norm:
      return layer.attn_norm;
    case LayerTensor::wqkv:
      return layer.wqkv;
    case LayerTensor::wo:
      return layer.wo;
    case LayerTensor::mlp_norm:
      return layer.mlp_norm;
    case LayerTensor::w_gate_up:
      return layer.w_gate_up;
    case LayerTensor::w_down:
      break;
  }
  return layer.w_down;
}

TrainInputs make_train_inputs(const TrainShape& s) {
  check_train_shape(s);
  const auto& m = s.model;
  TrainInputs in;
  for (int l = 0; l < s.layers; ++l) {
    const auto layer = static_cast<std::uint32_t>(l);
    LayerTensors w;
    w.attn_norm = make_tensor(s.seed, WeightKind::attn_norm, layer, 1, m.hidden);
    w.wqkv = concat({make_tensor(s.seed, WeightKind::wq, layer, m.q_dim(), m.hidden),
                     make_tensor(s.seed, WeightKind::wk, layer, m.kv_dim(), m.hidden),
                     make_tensor(s.seed, WeightKind::wv, layer, m.kv_dim(), m.hidden)});
    w.wo = make_tensor(s.seed, WeightKind::wo, layer, m.hidden, m.q_dim());
    w.mlp_norm = make_tensor(s.seed, WeightKind::mlp_norm, layer, 1, m.hidden);
    w.w_gate_up = concat({make_tensor(s.seed, WeightKind::w_gate, layer, m.ffn_hidden, m.hidden),
                          make_tensor(s.seed, WeightKind::w_up, layer, m.ffn_hidden, m.hidden)});
    w.w_down = make_tensor(s.seed, WeightKind::w_down, layer, m.hidden, m.ffn_hidden);
    in.layers.push_back(std::move(w));
  }
  in.input = make_tensor(s.seed, WeightKind::embedding, kInputStreamLayer, s.tokens(), m.hidden);
  in.loss_projection = make_tensor(s.seed, WeightKind::embedding, kProjectionStreamLayer, s.tokens(), m.hidden);
  return in;
}

double reference_loss(const TrainShape& s, const TrainInputs& in) {
  check_inputs(s, in);
  const Dims dm(s);
  Vec x = in.input;
  LayerCache cache;
  for (int l = 0; l < s.layers; ++l) x = layer_forward(s, dm, in.layers[static_cast<std::size_t>(l)], x, cache);
  return dot(x, in.loss_projection);
}

TrainGradients reference_gradients(const TrainShape& s, const TrainInputs& in) {
  check_inputs(s, in);
  const Dims dm(s);
  std::vector<LayerCache> caches(static_cast<std::size_t>(s.layers));
  Vec x = in.input;
  for (int l = 0; l < s.layers; ++l) x = layer_forward(s, dm, in.layers[l], x, caches[l]);
  TrainGradients out;
  out.loss = dot(x, in.loss_projection);
  out.output = x;
  out.layers.resize(static_cast<std::size_t>(s.layers));
  Vec dy = in.loss_projection;  // dL/dy of loss = sum(y * P)
  for (int l = s.layers - 1; l >= 0; --l) dy = layer_backward(s, dm, in.layers[l], caches[l], dy, out.layers[l]);
  out.input = std::move(dy);
  return out;
}

}  // namespace gpuscout::train
