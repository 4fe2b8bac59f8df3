// Experiment (session 8): the fused batch-1 decode kernel (backends/cuda/infer/decode_fused.cu)
// alone, outside the engine, on Llama-3.1-8B shapes (random weights, 576-token context), with the
// knock-out bits of FusedDecodeArgs: how long the kernel itself takes, apart from the rest of a step.
#include "../../backends/cuda/infer/decode_fused.cu"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ci = gpuscout::cuda::infer;

__global__ void fill_random(uint4* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    uint4 v;
    unsigned* w = &v.x;
    for (int j = 0; j < 4; ++j) {
      h = h * 1664525u + 1013904223u;
      // two BF16 values in [-1/64, 1/64): sign, exponent 121 or 120, random mantissa
      const unsigned lo = ((h & 1u) << 15) | ((120u + ((h >> 1) & 1u)) << 7) | ((h >> 2) & 0x7fu);
      const unsigned hi = (((h >> 9) & 1u) << 15) | ((120u + ((h >> 10) & 1u)) << 7) | ((h >> 11) & 0x7fu);
      w[j] = lo | (hi << 16);
    }
    p[i] = v;
  }
}

int main() {
  const int layers = 32, hidden = 4096, ffn = 14336, heads = 32, kv_heads = 8, d = 128, bs = 16, ctx = 576;
  const int q_dim = heads * d, qkv_dim = q_dim + 2 * kv_heads * d;
  const size_t per_layer =
      (size_t)qkv_dim * hidden + (size_t)hidden * q_dim + 2ull * ffn * hidden + (size_t)hidden * ffn;
  const int blocks = (ctx + bs - 1) / bs;
  const size_t kv_per_layer = (size_t)blocks * kv_heads * bs * d;
  ci::bf16 *w, *kv, *norm, *h, *qkv, *attn, *gu;
  cudaMalloc(&w, per_layer * layers * 2);
  cudaMalloc(&kv, kv_per_layer * 2 * layers * 2);
  cudaMalloc(&norm, hidden * 2);
  cudaMalloc(&h, hidden * 2);
  cudaMalloc(&qkv, qkv_dim * 2);
  cudaMalloc(&attn, q_dim * 2);
  cudaMalloc(&gu, 2 * ffn * 2);
  fill_random<<<1024, 256>>>(reinterpret_cast<uint4*>(w), per_layer * layers / 8, 1);
  fill_random<<<1024, 256>>>(reinterpret_cast<uint4*>(kv), kv_per_layer * 2 * layers / 8, 2);
  fill_random<<<1, 256>>>(reinterpret_cast<uint4*>(norm), hidden / 8, 3);
  std::vector<ci::FusedDecodeLayer> table(layers);
  for (int l = 0; l < layers; ++l) {
    ci::bf16* base = w + per_layer * l;
    table[l].attn_norm = norm;
    table[l].mlp_norm = norm;
    table[l].wqkv = base;
    table[l].wo = base + (size_t)qkv_dim * hidden;
    table[l].w_gate_up = table[l].wo + (size_t)hidden * q_dim;
    table[l].w_down = table[l].w_gate_up + 2ull * ffn * hidden;
    table[l].k_cache = kv + kv_per_layer * 2 * l;
    table[l].v_cache = table[l].k_cache + kv_per_layer;
  }
  ci::FusedDecodeLayer* d_table;
  cudaMalloc(&d_table, sizeof(ci::FusedDecodeLayer) * layers);
  cudaMemcpy(d_table, table.data(), sizeof(ci::FusedDecodeLayer) * layers, cudaMemcpyHostToDevice);
  std::vector<std::int32_t> meta(3 + blocks);
  meta[0] = ctx - 1;  // position
  meta[1] = ctx - 1;  // slot (block table is the identity)
  meta[2] = ctx;      // context
  for (int b = 0; b < blocks; ++b) meta[3 + b] = b;
  std::int32_t* d_meta;
  cudaMalloc(&d_meta, meta.size() * 4);
  cudaMemcpy(d_meta, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice);
  ci::AttentionShape shape{heads, kv_heads, d, bs};
  void* ws;
  cudaMalloc(&ws, ci::fused_decode_workspace_bytes(shape));
  ci::FusedDecodeArgs a;
  a.layers = d_table;
  a.num_layers = layers;
  a.hidden = hidden;
  a.ffn = ffn;
  a.shape = shape;
  a.norm_eps = 1e-5f;
  a.rope_theta = 500000.0f;
  a.h = h;
  a.qkv = qkv;
  a.attn = attn;
  a.gate_up = gu;
  a.position = d_meta;
  a.slot = d_meta + 1;
  a.context_len = d_meta + 2;
  a.block_table = d_meta + 3;
  a.workspace = ws;
  printf("fused kernel: %s, grid %d\n", ci::check_fused_decode(hidden, ffn, shape).c_str(),
         ci::fused_decode_grid_blocks(hidden, ffn, shape));
  const double bytes = per_layer * layers * 2.0;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (unsigned ko : {0u, 4u, 1u | 8u, 16u, 1u | 4u | 8u, 1u | 4u | 8u | 16u, 0u}) {
    a.knock_out = ko;
    std::vector<float> ms;
    for (int i = 0; i < 12; ++i) {
      cudaMemcpy(h, norm, hidden * 2, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e0);
      ci::launch_fused_decode(a, nullptr);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float t;
      cudaEventElapsedTime(&t, e0, e1);
      if (i >= 2) ms.push_back(t);
    }
    const cudaError_t err = cudaGetLastError();
    std::sort(ms.begin(), ms.end());
    printf("knock-out %2u: %.3f ms (min %.3f), layer weights at %.0f GB/s %s\n", ko, ms[ms.size() / 2], ms[0],
           bytes / (ms[ms.size() / 2] * 1e-3) / 1e9, err == cudaSuccess ? "" : cudaGetErrorString(err));
  }
  return 0;
}
