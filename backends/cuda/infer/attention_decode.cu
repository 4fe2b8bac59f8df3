// Decode attention (one query per sequence) over the paged KV cache, flash-decoding style: block
// (split, kv head, sequence) reads the K and V of its split of the context once for the whole GQA
// group of query heads, computes the exact softmax of its split (scores stay in shared memory) and
// writes the unnormalized partial (max, sum, acc); a merge kernel combines the splits. A split is
// kDecodeSplitTokens long, or 2, 4 or 8 times shorter when the batch is too small to fill the GPU
// (batch 1: 8 KV heads x 16 splits of an 8k context would be 128 blocks, each a long chain of
// dependent loads). Grid from max_context (fixed for graph capture): blocks past a sequence's
// context return at once.
#include <algorithm>
#include <cstdint>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"
#include "kernel_variants.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGroup = 8;  // query heads per KV head (Llama 3 70B: 8)
constexpr float kLog2e = 1.4426950408889634f;

// Finer splits stop at kDecodeBlockBudget blocks (about 2 resident blocks per SM on 132 SMs).
// Measured on the H200 (bench/NOTES.md), batch 1 at 8k context: 31.6 us with 512-token splits
// (128 blocks), 22.9 us with budget 256 (256-token splits), 30.6 us at 512 and 46.7 us at 1024,
// where the second wave of blocks and the merge of many splits cost more than they bring.

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Tokens per split for a launch: depends only on host-known sizes, so a captured graph keeps it.
int split_tokens(int num_seqs, int kv_heads, int max_context, int block_budget) {
  int tokens = kDecodeSplitTokens;
  while (tokens > kDecodeSplitTokens / 8 &&
         static_cast<std::int64_t>(num_seqs) * kv_heads * ceil_div(std::max(max_context, 1), tokens / 2) <=
             block_budget) {
    tokens /= 2;
  }
  return tokens;
}

// Partial results: per (sequence, head, split) the max (log2 domain), the sum of exp2(s - max),
// and the D accumulators.
struct Workspace {
  float* max_sum;  // [num_seqs, heads, splits, 2]
  float* acc;      // [num_seqs, heads, splits, D]
};

Workspace workspace_layout(void* base, int num_seqs, int heads, int splits) {
  auto* f = static_cast<float*>(base);
  return Workspace{f, f + static_cast<std::size_t>(num_seqs) * heads * splits * 2};
}

template <int D, int G>
__global__ void __launch_bounds__(kThreads)
    decode_split_kernel(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache, AttentionBatch batch,
                        AttentionShape shape, Workspace ws, int splits, int split_tokens, float scale_log2) {
  constexpr int kTpt = D / 8;  // threads per token row (one 16-byte vector each)
  constexpr int kTokensPerStep = kThreads / kTpt;
  constexpr int kUnroll = 8;  // rows in flight per thread
  constexpr int kScores = G * kDecodeSplitTokens;
  constexpr int kReduce = kWarps * G * D;
  __shared__ float smem[kScores > kReduce ? kScores : kReduce];
  __shared__ float row_max[G], row_sum[G];
  // Cache row (block * kv_heads + kvh) * block_size + offset of each token of the split, looked up
  // once so that no K or V load waits for a block-table load. 32 bits: < 2^32 rows of >= 64 bytes.
  __shared__ std::uint32_t rows[kDecodeSplitTokens];

  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int ctx = batch.q_len[seq] > 0 ? batch.context_len[seq] : 0;
  const int start = split * split_tokens;
  if (start >= ctx) {  // every block waits (kernel_util.cuh), even one with nothing to do
    pdl_wait();
    pdl_trigger();
    return;
  }
  const int n = min(split_tokens, ctx - start);
  const std::int32_t* table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
  for (int t = threadIdx.x; t < n; t += kThreads) {
    const int token = start + t;
    rows[t] = (static_cast<std::uint32_t>(table[token / shape.block_size]) * shape.kv_heads + kvh) * shape.block_size +
              token % shape.block_size;
  }
  // The step's metadata was copied before its first kernel; Q and the new token's K/V come from
  // the kernel before this one.
  pdl_wait();
  pdl_trigger();
  const int li = threadIdx.x % kTpt;
  const int gid = threadIdx.x / kTpt;
  const int head0 = kvh * G;
  auto load_rows = [&](const bf16* cache, int t0, uint4(&r)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u * kTokensPerStep;
      r[u] = t < n ? ldg_stream(reinterpret_cast<const uint4*>(cache + static_cast<std::int64_t>(rows[t]) * D) + li)
                   : make_uint4(0, 0, 0, 0);
    }
  };

  // Phase 1: scores[g][t] = q_g . k_t * scale * log2(e).
  float qf[G][8];
  {
    const bf16* qrow = q + static_cast<std::int64_t>(batch.q_start[seq]) * q_stride;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      load8(qrow + (head0 + g) * D + li * 8, qf[g]);
#pragma unroll
      for (int j = 0; j < 8; ++j) qf[g][j] *= scale_log2;
    }
  }
  __syncthreads();  // rows[] complete
  // Warp-uniform loop bound: the shuffles below need every lane of the warp.
  // A split that one round of loads covers also requests its V rows at once (one latency instead
  // of two); only for groups up to 4 heads, where the registers keep 2 blocks per SM.
  constexpr bool kEarlyV = G <= 4;
  const bool one_round = n <= kTokensPerStep * kUnroll;
  uint4 vv[kUnroll];
  for (int base = 0; base < n; base += kTokensPerStep * kUnroll) {
    const int t0 = base + gid;
    uint4 kv[kUnroll];
    load_rows(k_cache, t0, kv);
    if (kEarlyV && one_round) load_rows(v_cache, gid, vv);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      unpack8(kv[u], kf);
      float dot[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        dot[g] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot[g] = fmaf(qf[g][j], kf[j], dot[g]);
#pragma unroll
        for (int o = kTpt / 2; o > 0; o /= 2) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
      }
      const int t = t0 + u * kTokensPerStep;
      if (li == 0 && t < n) {
#pragma unroll
        for (int g = 0; g < G; ++g) smem[g * kDecodeSplitTokens + t] = dot[g];
      }
    }
  }
  // Otherwise the first V rows are requested now, so their latency overlaps the softmax below.
  if (!(kEarlyV && one_round)) load_rows(v_cache, gid, vv);
  __syncthreads();

  // Phase 2: warp g turns the scores of head g into exp2(s - max) and their sum.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < G) {
    float* s = smem + warp * kDecodeSplitTokens;
    float m = -INFINITY;
    for (int t = lane; t < n; t += 32) m = fmaxf(m, s[t]);
    m = warp_max(m);
    float l = 0.0f;
    for (int t = lane; t < n; t += 32) {
      const float p = exp2f(s[t] - m);
      s[t] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) {
      row_max[warp] = m;
      row_sum[warp] = l;
    }
  }
  __syncthreads();

  // Phase 3: acc[g][d] = sum_t p[g][t] v_t[d]; group gid takes tokens gid, gid + kTokensPerStep, ...
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.0f;
  for (int base = 0; base < n; base += kTokensPerStep * kUnroll) {
    const int t0 = base + gid;
    if (base > 0) load_rows(v_cache, t0, vv);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u * kTokensPerStep;
      if (t >= n) break;
      float vf[8];
      unpack8(vv[u], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = smem[g * kDecodeSplitTokens + t];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(p, vf[j], acc[g][j]);
      }
    }
  }
  // The groups of one warp share lanes li: fold them, then the warps through shared memory.
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int o = kTpt; o < 32; o *= 2) acc[g][j] += __shfl_xor_sync(0xffffffffu, acc[g][j], o);
  __syncthreads();  // the scores are dead: smem becomes the reduction buffer
  if (lane < kTpt) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int j = 0; j < 8; ++j) smem[(warp * G + g) * D + li * 8 + j] = acc[g][j];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += kThreads) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += smem[w * G * D + e];
    const int g = e / D, d = e - g * D;
    const std::int64_t part = (static_cast<std::int64_t>(seq) * shape.heads + head0 + g) * splits + split;
    ws.acc[part * D + d] = total;
    if (d == 0) {
      ws.max_sum[part * 2] = row_max[g];
      ws.max_sum[part * 2 + 1] = row_sum[g];
    }
  }
}

// One block per (head, sequence), one thread per output element d. The splits' maxima are reduced
// by all threads at once, and the accumulators are read 8 splits at a time, so a long context
// (up to 512 splits of 64 tokens) does not become a chain of dependent loads.
__global__ void decode_merge_kernel(AttentionBatch batch, AttentionShape shape, Workspace ws, int splits,
                                    int split_tokens, bf16* out, int out_stride) {
  __shared__ float partial[128 / 32];
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, seq = blockIdx.y, d = threadIdx.x;
  const int D = shape.head_dim;
  if (batch.q_len[seq] <= 0) return;  // no query row
  bf16* dst = out + static_cast<std::int64_t>(batch.q_start[seq]) * out_stride + h * D + d;
  const int ctx = batch.context_len[seq];
  if (ctx <= 0) {  // padding: a deterministic row
    *dst = __float2bfloat16_rn(0.0f);
    return;
  }
  const int used = (ctx + split_tokens - 1) / split_tokens;
  const std::int64_t part0 = (static_cast<std::int64_t>(seq) * shape.heads + h) * splits;
  float m = -INFINITY;
  for (int s = d; s < used; s += D) m = fmaxf(m, ws.max_sum[(part0 + s) * 2]);
  m = warp_max(m);
  if (d % 32 == 0) partial[d / 32] = m;
  __syncthreads();
  m = partial[0];
  for (int w = 1; w < D / 32; ++w) m = fmaxf(m, partial[w]);
  float l = 0.0f, o = 0.0f;
#pragma unroll 8
  for (int s = 0; s < used; ++s) {
    const float w = exp2f(ws.max_sum[(part0 + s) * 2] - m);
    l += w * ws.max_sum[(part0 + s) * 2 + 1];
    o += w * ws.acc[(part0 + s) * D + d];
  }
  *dst = __float2bfloat16_rn(o / l);
}

}  // namespace

const char* check_attention_shape(const AttentionShape& shape) {
  if (shape.head_dim != 32 && shape.head_dim != 64 && shape.head_dim != 128) {
    return "head_dim not supported: 32, 64 or 128";
  }
  if (shape.heads <= 0 || shape.kv_heads <= 0 || shape.heads % shape.kv_heads != 0) {
    return "heads must be a positive multiple of kv_heads";
  }
  if (shape.heads / shape.kv_heads > kMaxGroup) return "more than 8 query heads per KV head not supported";
  if (shape.block_size <= 0) return "block_size must be positive";
  return "";
}

std::size_t decode_attention_workspace_bytes_budget(int num_seqs, int heads, int head_dim, int max_context,
                                                    int block_budget) {
  // Partials: one per (sequence, head, split). With 512-token splits that is num_seqs * heads *
  // splits; finer splits are only used while the blocks (num_seqs * kv_heads * splits) stay within
  // the budget, i.e. at most budget * (heads per KV head) partials. The larger bound, so the size
  // needs no kv_heads and serves any smaller batch or context too.
  const std::size_t coarse =
      static_cast<std::size_t>(num_seqs) * heads * ceil_div(std::max(max_context, 1), kDecodeSplitTokens);
  const std::size_t fine = static_cast<std::size_t>(block_budget) * std::min(heads, kMaxGroup);
  return std::max(coarse, fine) * (head_dim + 2) * sizeof(float);
}

std::size_t decode_attention_workspace_bytes(int num_seqs, int heads, int head_dim, int max_context) {
  return decode_attention_workspace_bytes_budget(num_seqs, heads, head_dim, max_context, kDecodeBlockBudget);
}

void launch_decode_attention_budget(int block_budget, const bf16* q, int q_stride, const bf16* k_cache,
                                    const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                    void* workspace, bf16* out, int out_stride, cudaStream_t stream) {
  if (batch.num_seqs <= 0) return;
  const int tokens = split_tokens(batch.num_seqs, shape.kv_heads, batch.max_context, block_budget);
  const int splits = ceil_div(std::max(batch.max_context, 1), tokens);
  const Workspace ws = workspace_layout(workspace, batch.num_seqs, shape.heads, splits);
  const float scale_log2 = kLog2e / sqrtf(static_cast<float>(shape.head_dim));
  const dim3 grid(splits, shape.kv_heads, batch.num_seqs);
  dispatch_head_dim(shape.head_dim, [&](auto d) {
    dispatch_int<1, kMaxGroup>(shape.heads / shape.kv_heads, [&](auto g) {
      launch_kernel(decode_split_kernel<decltype(d)::value, decltype(g)::value>, grid, kThreads, 0, stream, q, q_stride,
                    k_cache, v_cache, batch, shape, ws, splits, tokens, scale_log2);
    });
  });
  launch_kernel(decode_merge_kernel, dim3(shape.heads, batch.num_seqs), shape.head_dim, 0, stream, batch, shape, ws,
                splits, tokens, out, out_stride);
}

void launch_decode_attention(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                             const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                             int out_stride, cudaStream_t stream) {
  launch_decode_attention_budget(kDecodeBlockBudget, q, q_stride, k_cache, v_cache, batch, shape, workspace, out,
                                 out_stride, stream);
}

}  // namespace gpuscout::cuda::infer
