#pragma once
// Batch-1 decode as one persistent kernel per step: every layer of the model (RMSNorm, QKV, RoPE +
// KV store, attention, O + residual, RMSNorm, gate/up, SiLU x up, down + residual) in a single
// launch of one block per SM, the stages separated by grid-wide barriers (a counter in global
// memory) instead of kernel boundaries.
//
// Why: a batch-1 step streams ~15 GB of weights for one token; as ~10 kernels per layer each GEMV
// pays its ramp-up and tail, and the small kernels between GEMVs leave HBM idle (by knock-out the
// GEMVs alone took 4.13 of 4.68 ms on an H200, bench/NOTES.md session 7). Here each block issues
// the loads of its rows of the next matrix before it waits at the barrier (weights depend on
// nothing), so HBM keeps streaming across stage boundaries, and the elementwise work is done by
// every block on its own copy of the stage's input vector (a few KB from L2).
//
// Same math and rounding points as the unfused kernels (kernels.hpp conventions): the normalized,
// rotated and SiLU outputs are rounded to BF16 where those kernels store them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels.hpp"

namespace gpuscout::cuda::infer {

// One layer's tensors (device pointers), as the engine holds them: [out, in] row-major weights.
struct FusedDecodeLayer {
  const bf16* attn_norm = nullptr;
  const bf16* wqkv = nullptr;
  const bf16* wo = nullptr;
  const bf16* mlp_norm = nullptr;
  const bf16* w_gate_up = nullptr;  // [2 * ffn, hidden], gate rows first
  const bf16* w_down = nullptr;
  bf16* k_cache = nullptr;
  bf16* v_cache = nullptr;
};

struct FusedDecodeArgs {
  const FusedDecodeLayer* layers = nullptr;  // device array of num_layers
  int num_layers = 0;
  int hidden = 0;
  int ffn = 0;
  AttentionShape shape;  // heads, kv_heads, head_dim, block_size (one rank: no tensor parallelism)
  float norm_eps = 0;
  float rope_theta = 0;
  bf16* h = nullptr;                          // [hidden]: the embedding in, the last layer's residual stream out
  bf16* qkv = nullptr;                        // [qkv_dim] scratch
  bf16* attn = nullptr;                       // [heads * head_dim] scratch
  bf16* gate_up = nullptr;                    // [2 * ffn] scratch
  const std::int32_t* position = nullptr;     // the token's position (device, one value)
  const std::int32_t* slot = nullptr;         // its KV slot (block * block_size + offset)
  const std::int32_t* context_len = nullptr;  // cached tokens it attends to, itself included
  const std::int32_t* block_table = nullptr;  // the sequence's KV blocks
  void* workspace = nullptr;                  // fused_decode_workspace_bytes(shape), any contents
  // Timing attribution only (engine.hpp KnockOut bits; the tokens are then wrong): 1 the RMSNorms
  // (the input copied as it is), 4 the attention items, 8 SiLU x up (the gate copied), 16 the grid
  // barriers.
  unsigned knock_out = 0;
};

// Empty when the kernel handles the shape, else why not (the engine then keeps the unfused path).
std::string check_fused_decode(int hidden, int ffn, const AttentionShape& shape);
// Blocks of the persistent grid on the current device (one per SM); 0 when one block does not fit an SM.
int fused_decode_grid_blocks(int hidden, int ffn, const AttentionShape& shape);
std::size_t fused_decode_workspace_bytes(const AttentionShape& shape);
// Resets the barrier counters in the workspace and launches the kernel (capturable).
void launch_fused_decode(const FusedDecodeArgs& args, cudaStream_t stream);

}  // namespace gpuscout::cuda::infer
