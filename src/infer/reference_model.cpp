// The CPU reference of the serving engine: a plain loop per operator, FP32 tensors holding BF16
// values at every point where the CUDA engine stores BF16, double accumulation inside each op.
#include "gpuscout/infer/reference_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpuscout/infer/weights.hpp"

namespace gpuscout::infer {
namespace {

using Tensor = std::vector<float>;  // row-major

// rows x in_features elements of one weight tensor, BF16-rounded (element index row * in + col).
Tensor make_weight(std::uint64_t seed, WeightKind kind, std::uint32_t layer, std::int64_t rows, int in_features) {
  const std::uint64_t stream = tensor_stream(seed, kind, layer);
  Tensor t(static_cast<std::size_t>(rows) * in_features);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = round_to_bf16(weight_value(stream, kind, i, in_features));
  return t;
}

// A projection matrix as the FP8 engine holds it: E4M3 codes times the per-tensor scale.
Tensor make_fp8_weight(std::uint64_t seed, WeightKind kind, std::uint32_t layer, std::int64_t rows, int in_features) {
  const std::uint64_t stream = tensor_stream(seed, kind, layer);
  const float scale = fp8_weight_scale(in_features);
  Tensor t(static_cast<std::size_t>(rows) * in_features);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = e4m3_bits_to_float(fp8_weight_code(stream, kind, i, in_features, scale)) * scale;
  return t;
}

Tensor concat_rows(const Tensor& a, const Tensor& b, const Tensor& c = {}) {
  Tensor out;
  out.reserve(a.size() + b.size() + c.size());
  out.insert(out.end(), a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), c.begin(), c.end());
  return out;
}

struct LayerWeights {
  Tensor attn_norm;  // [hidden]
  Tensor wqkv;       // [q_dim + 2 kv_dim, hidden]: the rows of wq, then wk, then wv (the engine's fused QKV)
  Tensor wo;         // [hidden, q_dim]
  Tensor mlp_norm;   // [hidden]
  Tensor w_gate_up;  // [2 ffn, hidden]: gate rows, then up rows
  Tensor w_down;     // [hidden, ffn]
  Tensor qkv_bias;   // [q_dim + 2 kv_dim] when the model has QKV biases, else empty
};

// out[r] = table[tokens[r]].
void embedding(const Tensor& table, int hidden, const std::vector<std::int32_t>& tokens, Tensor& out) {
  out.assign(tokens.size() * hidden, 0.0f);
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    std::copy_n(table.begin() + static_cast<std::ptrdiff_t>(tokens[r]) * hidden, hidden, out.begin() + r * hidden);
  }
}

// out = bf16(x / sqrt(mean(x^2) + eps) * weight), per row.
void rmsnorm(const Tensor& x, const Tensor& weight, int width, float eps, Tensor& out) {
  const std::size_t rows = x.size() / width;
  out.assign(x.size(), 0.0f);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * width];
    double sum_sq = 0;
    for (int i = 0; i < width; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / width) + eps);
    for (int i = 0; i < width; ++i) out[r * width + i] = round_to_bf16(xr[i] * inv_rms * weight[i]);
  }
}

// y[r, n] = x[r, :] . w[n, :] in double, for a weight of [out_features, in_features].
double dot(const float* a, const float* b, int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// y = bf16(x W^T).
void linear(const Tensor& x, int in_features, const Tensor& w, int out_features, Tensor& y) {
  const std::size_t rows = x.size() / in_features;
  y.assign(rows * out_features, 0.0f);
  for (std::size_t r = 0; r < rows; ++r) {
    for (int n = 0; n < out_features; ++n) {
      y[r * out_features + n] =
          round_to_bf16(static_cast<float>(dot(&x[r * in_features], &w[std::size_t(n) * in_features], in_features)));
    }
  }
}

// residual = bf16(residual + x W^T): the engine adds the projection into the BF16 residual in the
// GEMM epilogue, FP32 accumulate.
void linear_add_residual(const Tensor& x, int in_features, const Tensor& w, int out_features, Tensor& residual) {
  const std::size_t rows = x.size() / in_features;
  for (std::size_t r = 0; r < rows; ++r) {
    for (int n = 0; n < out_features; ++n) {
      const float projected =
          static_cast<float>(dot(&x[r * in_features], &w[std::size_t(n) * in_features], in_features));
      float& out = residual[r * out_features + n];
      out = round_to_bf16(out + projected);
    }
  }
}

// Adds the QKV bias to every row as the engine's RoPE kernel does: Q and K stay FP32 until their
// rotation rounds them, V (columns from v_col) is rounded to BF16 on its way into the cache.
void add_qkv_bias(Tensor& qkv, int stride, const Tensor& bias, int v_col) {
  const std::size_t rows = qkv.size() / stride;
  for (std::size_t r = 0; r < rows; ++r) {
    float* row = &qkv[r * stride];
    for (int c = 0; c < stride; ++c) row[c] = c < v_col ? row[c] + bias[c] : round_to_bf16(row[c] + bias[c]);
  }
}

// Rotates each head of `heads` starting at column `col0` of every row of `qkv` by the row's
// position: pairs (i, i + D/2), inverse frequency theta^(-2i/D), FP32, stored as BF16.
void rope(Tensor& qkv, int stride, int col0, int heads, int head_dim, const std::vector<int>& positions, double theta) {
  const int half = head_dim / 2;
  // theta^(-2i/D) in double rounded once to FP32, as the GPU kernel does (theta passes through FP32
  // on its way there); the angle is the FP32 product position * inv_freq.
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)), -2.0 * i / head_dim));
  }
  for (std::size_t r = 0; r < positions.size(); ++r) {
    for (int h = 0; h < heads; ++h) {
      float* v = &qkv[r * stride + col0 + static_cast<std::size_t>(h) * head_dim];
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[r]) * inv_freq[i];
        const float c = std::cos(angle);
        const float s = std::sin(angle);
        const float x1 = v[i];
        const float x2 = v[i + half];
        v[i] = round_to_bf16(x1 * c - x2 * s);
        v[i + half] = round_to_bf16(x2 * c + x1 * s);
      }
    }
  }
}

struct CacheShape {
  int kv_heads;
  int block_size;
  int head_dim;
  // Offset of (slot's token, kv head) in a [num_blocks, kv_heads, block_size, D] cache.
  std::size_t offset(int block, int in_block, int kv_head) const {
    return ((static_cast<std::size_t>(block) * kv_heads + kv_head) * block_size + in_block) * head_dim;
  }
};

// Position p of a sequence: block block_table[p / block_size], offset p % block_size.
std::size_t cache_offset(const CacheShape& shape, const std::vector<std::int32_t>& block_table, int position,
                         int kv_head) {
  return shape.offset(block_table[position / shape.block_size], position % shape.block_size, kv_head);
}

// Stores K and V (already BF16) of every row at its position in the sequence's blocks.
void store_kv(const Tensor& qkv, int stride, int k_col, int v_col, const CacheShape& shape, int row0,
              const SeqChunk& chunk, Tensor& k_cache, Tensor& v_cache) {
  for (std::size_t i = 0; i < chunk.tokens.size(); ++i) {
    const std::size_t row = static_cast<std::size_t>(row0) + i;
    const int position = chunk.start_position + static_cast<int>(i);
    for (int g = 0; g < shape.kv_heads; ++g) {
      const std::size_t at = cache_offset(shape, chunk.block_table, position, g);
      const std::size_t col = static_cast<std::size_t>(g) * shape.head_dim;
      std::copy_n(&qkv[row * stride + k_col + col], shape.head_dim, &k_cache[at]);
      std::copy_n(&qkv[row * stride + v_col + col], shape.head_dim, &v_cache[at]);
    }
  }
}

// Causal attention of the chunk's queries over cache positions [0, position]: softmax in FP32 of
// q.k / sqrt(D), output = softmax . V rounded to BF16. Query head h reads KV head h / (heads / kv_heads).
void attention(const Tensor& qkv, int stride, int heads, const CacheShape& shape, int row0, const SeqChunk& chunk,
               const Tensor& k_cache, const Tensor& v_cache, Tensor& out) {
  const int d = shape.head_dim;
  const int group = heads / shape.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int out_stride = heads * d;
  std::vector<float> scores;
  std::vector<double> acc(d);
  for (std::size_t i = 0; i < chunk.tokens.size(); ++i) {
    const std::size_t row = static_cast<std::size_t>(row0) + i;
    const int position = chunk.start_position + static_cast<int>(i);
    for (int h = 0; h < heads; ++h) {
      const int g = h / group;
      const float* q = &qkv[row * stride + static_cast<std::size_t>(h) * d];
      scores.assign(position + 1, 0.0f);
      float max_score = -INFINITY;
      for (int p = 0; p <= position; ++p) {
        scores[p] = static_cast<float>(dot(q, &k_cache[cache_offset(shape, chunk.block_table, p, g)], d)) * scale;
        max_score = std::max(max_score, scores[p]);
      }
      float sum = 0;
      for (float& s : scores) {
        s = std::exp(s - max_score);
        sum += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int p = 0; p <= position; ++p) {
        const float weight = scores[p] / sum;
        const float* v = &v_cache[cache_offset(shape, chunk.block_table, p, g)];
        for (int j = 0; j < d; ++j) acc[j] += static_cast<double>(weight) * v[j];
      }
      for (int j = 0; j < d; ++j)
        out[row * out_stride + static_cast<std::size_t>(h) * d + j] = round_to_bf16(static_cast<float>(acc[j]));
    }
  }
}

// out[r, i] = bf16(silu(gate_up[r, i]) * gate_up[r, ffn + i]), in FP32.
void silu_mul(const Tensor& gate_up, int ffn, Tensor& out) {
  const std::size_t rows = gate_up.size() / (2 * static_cast<std::size_t>(ffn));
  out.assign(rows * ffn, 0.0f);
  for (std::size_t r = 0; r < rows; ++r) {
    for (int i = 0; i < ffn; ++i) {
      const float g = gate_up[r * 2 * ffn + i];
      const float u = gate_up[r * 2 * ffn + ffn + i];
      out[r * ffn + i] = round_to_bf16(g / (1.0f + std::exp(-g)) * u);
    }
  }
}

// The index of the largest value, the lowest on ties.
std::int32_t argmax(const float* values, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

}  // namespace

struct ReferenceModel::Impl {
  TransformerConfig config;
  ReferenceOptions options;
  Tensor embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Tensor final_norm;
  Tensor lm_head;                        // [vocab, hidden]; the embedding when tied
  std::vector<Tensor> k_cache, v_cache;  // per layer
  std::vector<std::vector<float>> last_logits;

  CacheShape cache_shape() const { return {config.kv_heads, options.kv_block_size, config.head_dim}; }
  void check(const StepPlan& plan) const;
};

ReferenceModel::ReferenceModel(TransformerConfig config, ReferenceOptions options) : impl_(std::make_shared<Impl>()) {
  auto positive = [](int value, const char* field) {
    if (value < 1)
      throw std::invalid_argument(fmt::format("ReferenceModel: {} must be at least 1 (got {})", field, value));
  };
  positive(config.layers, "layers");
  positive(config.hidden, "hidden");
  positive(config.heads, "heads");
  positive(config.kv_heads, "kv_heads");
  positive(config.head_dim, "head_dim");
  positive(config.ffn_hidden, "ffn_hidden");
  positive(config.vocab, "vocab");
  positive(options.kv_block_size, "kv_block_size");
  positive(options.kv_blocks, "kv_blocks");
  positive(options.max_running, "max_running");
  positive(options.max_step_tokens, "max_step_tokens");
  if (config.heads % config.kv_heads != 0 || config.head_dim % 2 != 0) {
    throw std::invalid_argument(
        fmt::format("ReferenceModel: heads ({}) must be a multiple of kv_heads ({}) and head_dim "
                    "({}) even",
                    config.heads, config.kv_heads, config.head_dim));
  }
  Impl& m = *impl_;
  m.config = std::move(config);
  m.options = options;
  const TransformerConfig& c = m.config;
  const std::uint64_t seed = options.weight_seed;
  m.embedding = make_weight(seed, WeightKind::embedding, 0, c.vocab, c.hidden);
  // Projection matrices (not the embedding, norms or LM head): BF16, or FP8 values as the FP8
  // engine stores them.
  auto projection = [&](WeightKind kind, std::uint32_t layer, std::int64_t rows, int in_features) {
    return options.fp8_weights ? make_fp8_weight(seed, kind, layer, rows, in_features)
                               : make_weight(seed, kind, layer, rows, in_features);
  };
  for (int l = 0; l < c.layers; ++l) {
    const auto layer = static_cast<std::uint32_t>(l);
    LayerWeights w;
    w.attn_norm = make_weight(seed, WeightKind::attn_norm, layer, 1, c.hidden);
    w.wqkv = concat_rows(projection(WeightKind::wq, layer, c.q_dim(), c.hidden),
                         projection(WeightKind::wk, layer, c.kv_dim(), c.hidden),
                         projection(WeightKind::wv, layer, c.kv_dim(), c.hidden));
    if (c.qkv_bias) w.qkv_bias = make_weight(seed, WeightKind::qkv_bias, layer, 1, c.qkv_dim());
    w.wo = projection(WeightKind::wo, layer, c.hidden, c.q_dim());
    w.mlp_norm = make_weight(seed, WeightKind::mlp_norm, layer, 1, c.hidden);
    w.w_gate_up = concat_rows(projection(WeightKind::w_gate, layer, c.ffn_hidden, c.hidden),
                              projection(WeightKind::w_up, layer, c.ffn_hidden, c.hidden));
    w.w_down = projection(WeightKind::w_down, layer, c.hidden, c.ffn_hidden);
    m.layers.push_back(std::move(w));
  }
  m.final_norm = make_weight(seed, WeightKind::final_norm, 0, 1, c.hidden);
  m.lm_head = c.tied_embeddings ? m.embedding : make_weight(seed, WeightKind::lm_head, 0, c.vocab, c.hidden);
  const std::size_t cache_elements =
      static_cast<std::size_t>(options.kv_blocks) * c.kv_heads * options.kv_block_size * c.head_dim;
  m.k_cache.assign(c.layers, Tensor(cache_elements, 0.0f));
  m.v_cache.assign(c.layers, Tensor(cache_elements, 0.0f));
}

int ReferenceModel::kv_block_size() const {
  return impl_->options.kv_block_size;
}
int ReferenceModel::kv_blocks() const {
  return impl_->options.kv_blocks;
}
int ReferenceModel::max_running() const {
  return impl_->options.max_running;
}
int ReferenceModel::max_step_tokens() const {
  return impl_->options.max_step_tokens;
}
const std::vector<std::vector<float>>& ReferenceModel::last_logits() const {
  return impl_->last_logits;
}
const TransformerConfig& ReferenceModel::config() const {
  return impl_->config;
}

const std::vector<float>& ReferenceModel::k_cache(int layer) const {
  return impl_->k_cache.at(static_cast<std::size_t>(layer));
}
const std::vector<float>& ReferenceModel::v_cache(int layer) const {
  return impl_->v_cache.at(static_cast<std::size_t>(layer));
}

void ReferenceModel::Impl::check(const StepPlan& plan) const {
  auto fail = [](const SeqChunk& chunk, const std::string& what) {
    throw std::invalid_argument(fmt::format("ReferenceModel: chunk of sequence {}: {}", chunk.seq_id, what));
  };
  int tokens = 0;
  for (const SeqChunk& chunk : plan.chunks) {
    if (chunk.tokens.empty()) fail(chunk, "no tokens");
    if (chunk.start_position < 0) fail(chunk, fmt::format("start_position {} is negative", chunk.start_position));
    if (chunk.slot < 0 || chunk.slot >= options.max_running) {
      fail(chunk, fmt::format("slot {} outside [0, {})", chunk.slot, options.max_running));
    }
    for (std::int32_t t : chunk.tokens) {
      if (t < 0 || t >= config.vocab)
        fail(chunk, fmt::format("token {} outside the vocabulary of {}", t, config.vocab));
    }
    const std::size_t end = static_cast<std::size_t>(chunk.start_position) + chunk.tokens.size();
    const std::size_t blocks = (end + options.kv_block_size - 1) / options.kv_block_size;
    if (chunk.block_table.size() < blocks) {
      fail(chunk, fmt::format("{} blocks cover fewer than its {} positions", chunk.block_table.size(), end));
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      if (chunk.block_table[b] < 0 || chunk.block_table[b] >= options.kv_blocks) {
        fail(chunk, fmt::format("block {} outside the cache's {}", chunk.block_table[b], options.kv_blocks));
      }
    }
    tokens += static_cast<int>(chunk.tokens.size());
  }
  if (tokens > options.max_step_tokens) {
    throw std::invalid_argument(fmt::format("ReferenceModel: the step has {} tokens, more than max_step_tokens {}",
                                            tokens, options.max_step_tokens));
  }
}

std::vector<std::int32_t> ReferenceModel::execute(const StepPlan& plan) {
  Impl& m = *impl_;
  m.check(plan);
  const TransformerConfig& c = m.config;
  const CacheShape shape = m.cache_shape();

  // Every chunk's tokens as the rows of one batch.
  std::vector<std::int32_t> tokens;
  std::vector<int> positions;
  std::vector<int> row0;  // first row of each chunk
  for (const SeqChunk& chunk : plan.chunks) {
    row0.push_back(static_cast<int>(tokens.size()));
    for (std::size_t i = 0; i < chunk.tokens.size(); ++i) {
      tokens.push_back(chunk.tokens[i]);
      positions.push_back(chunk.start_position + static_cast<int>(i));
    }
  }

  const int qkv_dim = c.qkv_dim();
  const int k_col = c.q_dim();
  const int v_col = c.q_dim() + c.kv_dim();
  Tensor residual, normed, qkv, attn(tokens.size() * static_cast<std::size_t>(c.q_dim())), gate_up, act;
  embedding(m.embedding, c.hidden, tokens, residual);
  for (int l = 0; l < c.layers; ++l) {
    const LayerWeights& w = m.layers[static_cast<std::size_t>(l)];
    rmsnorm(residual, w.attn_norm, c.hidden, c.norm_eps, normed);
    linear(normed, c.hidden, w.wqkv, qkv_dim, qkv);
    if (c.qkv_bias) add_qkv_bias(qkv, qkv_dim, w.qkv_bias, v_col);
    rope(qkv, qkv_dim, 0, c.heads, c.head_dim, positions, c.rope_theta);
    rope(qkv, qkv_dim, k_col, c.kv_heads, c.head_dim, positions, c.rope_theta);
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
      store_kv(qkv, qkv_dim, k_col, v_col, shape, row0[i], plan.chunks[i], m.k_cache[l], m.v_cache[l]);
    }
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
      attention(qkv, qkv_dim, c.heads, shape, row0[i], plan.chunks[i], m.k_cache[l], m.v_cache[l], attn);
    }
    linear_add_residual(attn, c.q_dim(), w.wo, c.hidden, residual);
    rmsnorm(residual, w.mlp_norm, c.hidden, c.norm_eps, normed);
    linear(normed, c.hidden, w.w_gate_up, 2 * c.ffn_hidden, gate_up);
    silu_mul(gate_up, c.ffn_hidden, act);
    linear_add_residual(act, c.ffn_hidden, w.w_down, c.hidden, residual);
  }

  // The LM head over the last token of each sampling chunk.
  Tensor last;
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    if (!plan.chunks[i].samples) continue;
    const std::size_t row = static_cast<std::size_t>(row0[i]) + plan.chunks[i].tokens.size() - 1;
    last.insert(last.end(), residual.begin() + row * c.hidden, residual.begin() + (row + 1) * c.hidden);
  }
  Tensor logits;
  rmsnorm(last, m.final_norm, c.hidden, c.norm_eps, normed);
  linear(normed, c.hidden, m.lm_head, c.vocab, logits);
  std::vector<std::int32_t> sampled;
  m.last_logits.clear();
  for (std::size_t r = 0; r < last.size() / c.hidden; ++r) {
    const float* row = &logits[r * c.vocab];
    sampled.push_back(argmax(row, c.vocab));
    m.last_logits.emplace_back(row, row + c.vocab);
  }
  return sampled;
}

}  // namespace gpuscout::infer
