#include "gpuscout/infer/reference_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "gpuscout/infer/weights.hpp"

namespace gpuscout::infer {
namespace {

std::vector<std::int32_t> prompt_of(std::uint64_t id, int length, int vocab = 512) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < length; ++i) p.push_back(prompt_token(3, id, static_cast<std::uint64_t>(i), vocab));
  return p;
}

ReferenceOptions small_options() {
  ReferenceOptions o;
  o.kv_block_size = 4;
  o.kv_blocks = 32;
  o.max_running = 4;
  o.max_step_tokens = 256;
  return o;
}

SeqChunk chunk(std::uint64_t id, int slot, int start, std::vector<std::int32_t> tokens,
               std::vector<std::int32_t> blocks, bool samples) {
  SeqChunk c;
  c.seq_id = id;
  c.slot = slot;
  c.start_position = start;
  c.tokens = std::move(tokens);
  c.block_table = std::move(blocks);
  c.samples = samples;
  return c;
}

StepPlan plan_of(std::vector<SeqChunk> chunks) {
  StepPlan p;
  for (auto& c : chunks) (c.is_decode() ? p.decode_tokens : p.prefill_tokens) += static_cast<int>(c.tokens.size());
  p.chunks = std::move(chunks);
  return p;
}

// A plain, unpaged implementation written from the conventions (kernels.hpp), weights computed
// element by element from weights.hpp: an independent check of indexing, layouts and rounding.
// fp8: projection weights are E4M3 codes of value / (bound / 448) times that scale.
std::vector<float> naive_logits(const TransformerConfig& c, std::uint64_t seed, const std::vector<std::int32_t>& tokens,
                                bool fp8 = false) {
  auto w = [&](WeightKind kind, int layer, std::int64_t row, std::int64_t col, int in) {
    if (kind == WeightKind::lm_head && c.tied_embeddings) kind = WeightKind::embedding, layer = 0;
    const float value = weight_value(tensor_stream(seed, kind, static_cast<std::uint32_t>(layer)), kind,
                                     static_cast<std::uint64_t>(row * in + col), in);
    const bool projection = kind == WeightKind::wq || kind == WeightKind::wk || kind == WeightKind::wv ||
                            kind == WeightKind::wo || kind == WeightKind::w_gate || kind == WeightKind::w_up ||
                            kind == WeightKind::w_down;
    if (!(fp8 && projection)) return round_to_bf16(value);
    const float scale = std::sqrt(3.0f / static_cast<float>(in)) / 448.0f;
    return e4m3_bits_to_float(float_to_e4m3_bits(value / scale)) * scale;
  };
  auto norm = [&](const std::vector<float>& x, WeightKind kind, int layer) {
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / c.hidden) + c.norm_eps);
    std::vector<float> out(x.size());
    for (int i = 0; i < c.hidden; ++i) out[i] = round_to_bf16(x[i] * inv * w(kind, layer, 0, i, c.hidden));
    return out;
  };
  auto project = [&](const std::vector<float>& x, WeightKind kind, int layer, int out_features) {
    const int in = static_cast<int>(x.size());
    std::vector<float> y(out_features);
    for (int n = 0; n < out_features; ++n) {
      double s = 0;
      for (int k = 0; k < in; ++k) s += static_cast<double>(x[k]) * w(kind, layer, n, k, in);
      y[n] = static_cast<float>(s);
    }
    return y;
  };
  auto bf16 = [](std::vector<float> v) {
    for (float& x : v) x = round_to_bf16(x);
    return v;
  };
  // QKV bias over the fused [Q | K | V] columns from `offset`; Q and K stay FP32 until rotated.
  auto add_bias = [&](std::vector<float>& x, int layer, int offset, bool round) {
    if (!c.qkv_bias) return;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float sum = x[i] + w(WeightKind::qkv_bias, layer, 0, offset + static_cast<std::int64_t>(i), c.qkv_dim());
      x[i] = round ? round_to_bf16(sum) : sum;
    }
  };
  auto rotate = [&](std::vector<float>& v, int heads, int pos) {
    const int d = c.head_dim, half = d / 2;
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < half; ++i) {
        const float inv_freq =
            static_cast<float>(std::pow(static_cast<double>(static_cast<float>(c.rope_theta)), -2.0 * i / d));
        const float a = static_cast<float>(pos) * inv_freq;
        const float x1 = v[h * d + i], x2 = v[h * d + i + half];
        v[h * d + i] = round_to_bf16(x1 * std::cos(a) - x2 * std::sin(a));
        v[h * d + i + half] = round_to_bf16(x2 * std::cos(a) + x1 * std::sin(a));
      }
    }
  };
  const int n = static_cast<int>(tokens.size());
  std::vector<std::vector<float>> x(n);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < c.hidden; ++i) x[t].push_back(w(WeightKind::embedding, 0, tokens[t], i, c.hidden));
  }
  for (int l = 0; l < c.layers; ++l) {
    std::vector<std::vector<float>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const auto h = norm(x[t], WeightKind::attn_norm, l);
      q[t] = bf16(project(h, WeightKind::wq, l, c.q_dim()));
      k[t] = bf16(project(h, WeightKind::wk, l, c.kv_dim()));
      v[t] = bf16(project(h, WeightKind::wv, l, c.kv_dim()));
      add_bias(q[t], l, 0, false);
      add_bias(k[t], l, c.q_dim(), false);
      add_bias(v[t], l, c.q_dim() + c.kv_dim(), true);
      rotate(q[t], c.heads, t);
      rotate(k[t], c.kv_heads, t);
    }
    for (int t = 0; t < n; ++t) {
      std::vector<float> attn(c.q_dim());
      for (int h = 0; h < c.heads; ++h) {
        const int g = h / (c.heads / c.kv_heads);
        std::vector<float> p(t + 1);
        float mx = -INFINITY, sum = 0;
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < c.head_dim; ++i)
            dot += static_cast<double>(q[t][h * c.head_dim + i]) * k[s][g * c.head_dim + i];
          p[s] = static_cast<float>(dot) * (1.0f / std::sqrt(static_cast<float>(c.head_dim)));
          mx = std::max(mx, p[s]);
        }
        for (float& e : p) sum += (e = std::exp(e - mx));
        for (int i = 0; i < c.head_dim; ++i) {
          double o = 0;
          for (int s = 0; s <= t; ++s) o += static_cast<double>(p[s] / sum) * v[s][g * c.head_dim + i];
          attn[h * c.head_dim + i] = round_to_bf16(static_cast<float>(o));
        }
      }
      const auto o = project(attn, WeightKind::wo, l, c.hidden);
      for (int i = 0; i < c.hidden; ++i) x[t][i] = round_to_bf16(x[t][i] + o[i]);
      const auto h2 = norm(x[t], WeightKind::mlp_norm, l);
      const auto gate = bf16(project(h2, WeightKind::w_gate, l, c.ffn_hidden));
      const auto up = bf16(project(h2, WeightKind::w_up, l, c.ffn_hidden));
      std::vector<float> act(c.ffn_hidden);
      for (int i = 0; i < c.ffn_hidden; ++i) act[i] = round_to_bf16(gate[i] / (1.0f + std::exp(-gate[i])) * up[i]);
      const auto down = project(act, WeightKind::w_down, l, c.hidden);
      for (int i = 0; i < c.hidden; ++i) x[t][i] = round_to_bf16(x[t][i] + down[i]);
    }
  }
  return bf16(project(norm(x[n - 1], WeightKind::final_norm, 0), WeightKind::lm_head, 0, c.vocab));
}

float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(ReferenceModel, MatchesAPlainImplementationOfTheConventions) {
  for (bool tied : {false, true}) {
    TransformerConfig c = TransformerConfig::tiny();
    c.tied_embeddings = tied;
    ReferenceModel model(c, small_options());
    const auto prompt = prompt_of(1, 9);
    const auto sampled = model.execute(plan_of({chunk(1, 0, 0, prompt, {3, 7, 1}, true)}));
    ASSERT_EQ(model.last_logits().size(), 1u);
    const auto expected = naive_logits(c, 1, prompt);
    EXPECT_LT(max_abs_difference(model.last_logits()[0], expected), 1e-6f) << "tied " << tied;
    const auto best = std::max_element(expected.begin(), expected.end()) - expected.begin();
    EXPECT_EQ(sampled[0], best);
    // Greedy logits of a random model: spread, finite, BF16 values.
    for (float v : model.last_logits()[0]) {
      ASSERT_TRUE(std::isfinite(v));
      EXPECT_EQ(v, round_to_bf16(v));
    }
  }
}

// Qwen2.5's QKV biases: the reference adds them where the plain implementation does, and they matter.
TEST(ReferenceModel, QkvBiasesMatchThePlainImplementation) {
  TransformerConfig c = TransformerConfig::tiny();
  c.qkv_bias = true;
  ReferenceModel model(c, small_options());
  const auto prompt = prompt_of(5, 10);
  model.execute(plan_of({chunk(5, 0, 0, prompt, {3, 7, 1}, true)}));
  ASSERT_EQ(model.last_logits().size(), 1u);
  EXPECT_LT(max_abs_difference(model.last_logits()[0], naive_logits(c, 1, prompt)), 1e-6f);
  c.qkv_bias = false;
  EXPECT_GT(max_abs_difference(model.last_logits()[0], naive_logits(c, 1, prompt)), 1e-2f);
}

TEST(ReferenceModel, Fp8WeightsMatchThePlainImplementationAndStayCloseToBf16) {
  const TransformerConfig c = TransformerConfig::tiny();
  ReferenceOptions fp8 = small_options();
  fp8.fp8_weights = true;
  ReferenceModel model(c, fp8);
  const auto prompt = prompt_of(4, 11);
  model.execute(plan_of({chunk(4, 0, 0, prompt, {3, 7, 1}, true)}));
  ASSERT_EQ(model.last_logits().size(), 1u);
  EXPECT_LT(max_abs_difference(model.last_logits()[0], naive_logits(c, 1, prompt, true)), 1e-6f);
  // Quantization error, not a different model: a few percent of the logits' scale.
  const auto bf16 = naive_logits(c, 1, prompt, false);
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < bf16.size(); ++i) {
    diff2 += std::pow(model.last_logits()[0][i] - bf16[i], 2);
    ref2 += std::pow(bf16[i], 2);
  }
  EXPECT_GT(std::sqrt(diff2 / ref2), 1e-3);
  EXPECT_LT(std::sqrt(diff2 / ref2), 0.1);
}

TEST(ReferenceModel, SameSeedSameLogitsOtherSeedOtherLogits) {
  const auto prompt = prompt_of(2, 12);
  const StepPlan plan = plan_of({chunk(2, 0, 0, prompt, {0, 1, 2}, true)});
  ReferenceModel a(TransformerConfig::tiny(), small_options());
  ReferenceModel b(TransformerConfig::tiny(), small_options());
  ReferenceOptions other = small_options();
  other.weight_seed = 2;
  ReferenceModel c(TransformerConfig::tiny(), other);
  a.execute(plan);
  b.execute(plan);
  c.execute(plan);
  EXPECT_EQ(a.last_logits(), b.last_logits());
  EXPECT_GT(max_abs_difference(a.last_logits()[0], c.last_logits()[0]), 0.1f);
}

// Greedy tokens and the logits of every sampling step of one sequence, fed in prefill chunks of
// `chunk_sizes` then decoded for `decodes` steps, optionally next to another sequence in every step.
struct Trace {
  std::vector<std::int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

Trace run_sequence(const std::vector<std::int32_t>& prompt, const std::vector<int>& chunk_sizes, int decodes,
                   bool with_neighbour, std::vector<std::int32_t> blocks = {4, 9, 2, 11, 6, 0, 13}) {
  ReferenceModel model(TransformerConfig::tiny(), small_options());
  const auto other_prompt = prompt_of(99, 30);
  const std::vector<std::int32_t> other_blocks = {20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  std::vector<std::int32_t> sequence = prompt;
  std::vector<std::int32_t> other = other_prompt;
  Trace trace;
  int position = 0, other_position = 0;
  auto table = [](const std::vector<std::int32_t>& all, int end) {
    return std::vector<std::int32_t>(all.begin(), all.begin() + (end + 3) / 4);
  };
  auto step = [&](std::vector<std::int32_t> tokens, bool samples) {
    std::vector<SeqChunk> chunks;
    const int n = static_cast<int>(tokens.size());
    if (with_neighbour) {  // the neighbour goes first: the sequence's rows are not the first of the batch
      const int m = other_position < 30 ? 30 : 1;
      std::vector<std::int32_t> t(other.begin() + other_position, other.begin() + other_position + m);
      chunks.push_back(chunk(99, 1, other_position, t, table(other_blocks, other_position + m), true));
    }
    chunks.push_back(chunk(7, 0, position, tokens, table(blocks, position + n), samples));
    const auto sampled = model.execute(plan_of(chunks));
    if (with_neighbour) {
      other_position += static_cast<int>(chunks[0].tokens.size());
      other.push_back(sampled[0]);
    }
    position += n;
    if (samples) {
      trace.tokens.push_back(sampled.back());
      trace.logits.push_back(model.last_logits().back());
      sequence.push_back(sampled.back());
    }
  };
  int done = 0;
  for (std::size_t i = 0; i < chunk_sizes.size(); ++i) {
    const int n = chunk_sizes[i];
    step(std::vector<std::int32_t>(sequence.begin() + done, sequence.begin() + done + n), i + 1 == chunk_sizes.size());
    done += n;
  }
  for (int d = 0; d < decodes; ++d) step({sequence.back()}, true);
  return trace;
}

TEST(ReferenceModel, BatchingAndChunkingInvariance) {
  const auto prompt = prompt_of(7, 21);
  const Trace alone = run_sequence(prompt, {21}, 6, false);
  ASSERT_EQ(alone.tokens.size(), 7u);
  const Trace chunked = run_sequence(prompt, {5, 8, 1, 7}, 6, false);
  const Trace batched = run_sequence(prompt, {21}, 6, true);
  const Trace both = run_sequence(prompt, {10, 11}, 6, true);
  const Trace other_blocks = run_sequence(prompt, {21}, 6, false, {1, 2, 3, 4, 5, 7, 8});
  for (const Trace* t : {&chunked, &batched, &both, &other_blocks}) {
    EXPECT_EQ(t->tokens, alone.tokens);
    EXPECT_EQ(t->logits, alone.logits);  // bitwise: every row is computed on its own
  }
  // Decoding is a one-token prefill: the same as feeding the produced tokens as a longer prompt.
  std::vector<std::int32_t> longer = prompt;
  longer.insert(longer.end(), alone.tokens.begin(), alone.tokens.end() - 1);
  const Trace as_prompt = run_sequence(longer, {static_cast<int>(longer.size())}, 0, false);
  EXPECT_EQ(as_prompt.tokens.back(), alone.tokens.back());
  EXPECT_EQ(as_prompt.logits.back(), alone.logits.back());
}

TEST(ReferenceModel, WritesKvAtThePlannedSlotsOnly) {
  const ReferenceOptions options = small_options();
  ReferenceModel model(TransformerConfig::tiny(), options);
  // 6 tokens at block size 4: positions 0..3 in block 5, positions 4..5 in block 2 (offsets 0, 1).
  model.execute(plan_of({chunk(1, 0, 0, prompt_of(1, 6), {5, 2}, true)}));
  const TransformerConfig& c = model.config();
  std::set<std::pair<int, int>> expected = {{5, 0}, {5, 1}, {5, 2}, {5, 3}, {2, 0}, {2, 1}};
  // A decode at position 6 with a 3-entry table writes block 2 offset 2 only.
  model.execute(plan_of({chunk(1, 0, 6, {17}, {5, 2, 8}, true)}));
  expected.insert({2, 2});
  for (int layer = 0; layer < c.layers; ++layer) {
    for (const std::vector<float>* cache : {&model.k_cache(layer), &model.v_cache(layer)}) {
      ASSERT_EQ(cache->size(),
                static_cast<std::size_t>(options.kv_blocks) * c.kv_heads * options.kv_block_size * c.head_dim);
      for (int block = 0; block < options.kv_blocks; ++block) {
        for (int g = 0; g < c.kv_heads; ++g) {
          for (int offset = 0; offset < options.kv_block_size; ++offset) {
            const std::size_t at =
                ((static_cast<std::size_t>(block) * c.kv_heads + g) * options.kv_block_size + offset) * c.head_dim;
            int nonzero = 0;
            for (int d = 0; d < c.head_dim; ++d) {
              const float v = (*cache)[at + d];
              nonzero += v != 0.0f;
              EXPECT_EQ(v, round_to_bf16(v));
            }
            EXPECT_EQ(nonzero > 0, expected.count({block, offset}) > 0)
                << "layer " << layer << " block " << block << " head " << g << " offset " << offset;
          }
        }
      }
    }
  }
  // K at position 0, head 0 is the RoPE-free (angle 0) projection: the same wherever it is stored.
  ReferenceModel elsewhere(TransformerConfig::tiny(), options);
  elsewhere.execute(plan_of({chunk(1, 0, 0, prompt_of(1, 6), {0, 1}, true)}));
  for (int d = 0; d < c.head_dim; ++d) {
    EXPECT_EQ(model.k_cache(1)[static_cast<std::size_t>(5) * c.kv_heads * 4 * c.head_dim + d], elsewhere.k_cache(1)[d]);
  }
}

TEST(ReferenceModel, RejectsMalformedPlans) {
  ReferenceModel model(TransformerConfig::tiny(), small_options());
  EXPECT_THROW(model.execute(plan_of({chunk(1, 0, 0, {1, 2, 3, 4, 5}, {0}, true)})), std::invalid_argument);  // 5 > 4
  EXPECT_THROW(model.execute(plan_of({chunk(1, 0, 0, {1}, {32}, true)})), std::invalid_argument);   // block id
  EXPECT_THROW(model.execute(plan_of({chunk(1, 0, 0, {512}, {0}, true)})), std::invalid_argument);  // token id
  EXPECT_THROW(model.execute(plan_of({chunk(1, 4, 0, {1}, {0}, true)})), std::invalid_argument);    // slot
  EXPECT_TRUE(model.execute(StepPlan{}).empty());
  EXPECT_THROW(ReferenceModel(TransformerConfig{}, small_options()), std::invalid_argument);
}

TEST(ReferenceModel, ReportsItsLimits) {
  const ReferenceModel model(TransformerConfig::tiny(), small_options());
  EXPECT_EQ(model.name(), "cpu-reference");
  EXPECT_EQ(model.kv_block_size(), 4);
  EXPECT_EQ(model.kv_blocks(), 32);
  EXPECT_EQ(model.max_running(), 4);
  EXPECT_EQ(model.max_step_tokens(), 256);
  EXPECT_EQ(model.config().hidden, 128);
}

}  // namespace
}  // namespace gpuscout::infer
