#pragma once
// Variants of the engine's kernels that kernels.hpp hides behind one automatic choice, reachable
// here for the kernel tests and timings (tests/gpu/infer_kernels_test.cu), which check each one and
// measured the choices the automatic paths make.
#include <cstddef>

#include "kernels.hpp"

namespace gpuscout::cuda::infer {

enum class SkinnyPath {
  automatic,    // one row: ring (unless GPUSCOUT_RING_GEMV=0); tensor cores for 5-8 rows when k % 32 == 0
                // and the pointers are 16-byte aligned; else cuda_core
  cuda_core,    // a warp per 1-4 rows of W, FP32 FMAs (any k; scalar when k % 8 != 0)
  tensor_core,  // mma.sync with the x rows as n = 8 (falls back to CUDA cores when k % 32 != 0)
  ring,         // one row: W streamed through a shared-memory ring per SM (gemv_ring.cu); else cuda_core
};

// What the ring GEMV makes of its input row while every block stages it, so that the elementwise
// kernel that would have written it (and its kernel boundary) goes away.
struct RingInput {
  const bf16* norm_weight = nullptr;  // RMSNorm(x) * norm_weight (eps norm_eps), as launch_rmsnorm writes it
  float norm_eps = 0.0f;
  bool silu_mul = false;  // x holds [gate | up] (2k values): silu(gate) * up, as launch_silu_mul writes it
};
// The ring GEMV of one row: y[j] = sum_i in[i] w[j, i] (+ residual[j]), `in` being x as `input` says.
// False (nothing launched) when k % 8 != 0, a pointer is not 16-byte aligned, x (and the norm's
// weights) do not fit the shared memory beside the ring, or both transforms are asked for.
bool launch_ring_gemv(const bf16* x, const bf16* w, int n, int k, const bf16* residual, bf16* y, cudaStream_t stream,
                      const RingInput& input = {});
// Whether the automatic skinny path takes the ring GEMV for one row: yes unless GPUSCOUT_RING_GEMV=0
// (A/B runs). On the H200 it beat the warp-per-row kernel at every Llama-3.1-8B shape (bench/NOTES.md,
// session 8); GemmRunner still times it against cuBLASLt per shape.
bool ring_gemv_by_default();

void launch_skinny_gemm_path(SkinnyPath path, const bf16* x, int rows, const bf16* w, int n, int k,
                             const bf16* residual, bf16* y, cudaStream_t stream);

// The two decode attention kernels launch_decode_attention chooses between (attention_decode.cu):
// the tile-streaming one on a grid of `grid_blocks` blocks (0: the SMs times the blocks resident
// per SM, its default; at most 1024), and the split (flash-decoding) one with its merge kernel.
void launch_decode_attention_split(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                   const AttentionBatch& batch, const AttentionShape& shape, void* workspace, bf16* out,
                                   int out_stride, cudaStream_t stream);
void launch_decode_attention_grid(int grid_blocks, const bf16* q, int q_stride, const bf16* k_cache,
                                  const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                  void* workspace, bf16* out, int out_stride, cudaStream_t stream);

// The pair kernel: a block per (sequence, KV head), a warp per quarter of its tokens, each warp
// streaming 16-token tiles through its own ring of `stages` (2 or 3) in shared memory. Head size 64
// or 128 only; throws std::invalid_argument where it cannot run (decode_attention_pairs_supported).
bool decode_attention_pairs_supported(int head_dim, int stages);
void launch_decode_attention_pairs(int stages, const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                   const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                                   cudaStream_t stream);

// A kernel choice's switch for A/B runs: on unless the environment variable `name` is "0".
bool env_switch_on(const char* name);

// What the kernels may ask of `device`, checked before they launch so that a GPU without it gets
// another kernel or a clear error, not a failed launch:
//   - the dynamic shared memory one block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin:
//     227 KB on Hopper, 163 KB on an A100, 99 KB on Ampere/Ada workstation and L-series cards),
//     capped by GPUSCOUT_SMEM_OPTIN_LIMIT (bytes) when set: a test hook that runs a large GPU with a
//     smaller one's limit, so the fallbacks are checked where they cannot otherwise run;
//   - the sm_90 instructions (mbarrier transactions, bulk copies): compute capability 9.0+.
int shared_memory_optin_bytes(int device);
bool sm90_features_on(int device);

// Prefill attention's kernels (launch_prefill_attention chooses): the warpgroup-MMA one
// (attention_prefill_wgmma.cu: head size 128 on compute capability 9.0 only, chunks of more than 64
// queries; unless GPUSCOUT_PREFILL_WGMMA=0) and the mma.sync one (attention_prefill.cu: any GPU and
// head size).
// wgmma: its automatic K/V loads (tensor copies unless GPUSCOUT_PREFILL_TMA=0 or the cache block size is
// not 8, 16, 32 or 64); wgmma_cp_async / wgmma_tma: one of the two.
enum class PrefillAttentionPath { automatic, mma_sync, wgmma, wgmma_cp_async, wgmma_tma };
bool prefill_attention_wgmma_supported(int head_dim, int cc_major, int cc_minor);
bool prefill_attention_wgmma_supported(int head_dim);  // on the current device
bool prefill_attention_wgmma_fits(int device);         // its shared memory (shared_memory_optin_bytes)
bool prefill_attention_wgmma_by_default();
// False, launching nothing, where the path cannot run (wgmma: another GPU or head size).
bool launch_prefill_attention_path(PrefillAttentionPath path, const bf16* q, int q_stride, const bf16* k_cache,
                                   const bf16* v_cache, const AttentionBatch& batch, const AttentionShape& shape,
                                   bf16* out, int out_stride, cudaStream_t stream);
// How the wgmma kernel brings K/V tiles into shared memory: 16-byte cp.async copies by every thread, or
// tensor copies of whole cache blocks by one thread (the tensor-memory accelerator, session 18).
enum class WgmmaLoads { automatic, cp_async, tensor_copies };
bool prefill_attention_tma_by_default();  // unless GPUSCOUT_PREFILL_TMA=0
// False, launching nothing, where the kernel (or the loads asked for) cannot run.
bool launch_prefill_attention_wgmma(const bf16* q, int q_stride, const bf16* k_cache, const bf16* v_cache,
                                    const AttentionBatch& batch, const AttentionShape& shape, bf16* out, int out_stride,
                                    cudaStream_t stream, WgmmaLoads loads = WgmmaLoads::automatic);

// The MLP's gate/up GEMM with SwiGLU fused into its epilogue (gemm_swiglu_wgmma.cu, compute
// capability 9.0 only): out[r, i] = silu(x W_gate^T)[r, i] * (x W_up^T)[r, i] for W_gate_up [2 ffn, in]
// (gate rows, then up rows) and x [rows, in], both row-major BF16; out [rows, ffn]. Needs in % 64 == 0
// and ffn % 128 == 0. The engine uses it for steps of gate_up_swiglu_min_rows or more
// (EngineOptions::fused_swiglu) unless GPUSCOUT_SWIGLU_GEMM=0.
bool gate_up_swiglu_supported(int in, int ffn, int cc_major, int cc_minor);
bool gate_up_swiglu_fits(int device);  // its shared memory (shared_memory_optin_bytes)
bool gate_up_swiglu_by_default();      // unless GPUSCOUT_SWIGLU_GEMM=0
// The fewest rows from which the engine takes it: enough 128 x 128-output tiles for kSwigluMinWaves
// waves over the GPU's `sms` SMs. Below that its tiles' last wave leaves too many SMs idle: it lost
// 3-20% to cuBLASLt + SiLU at 448 tiles (3.4 waves) and won at 896 (bench/NOTES.md, session 21).
constexpr int kSwigluMinWaves = 6;
int gate_up_swiglu_min_rows(int ffn, int sms);
// Its epilogue: in place (SiLU * up from the accumulators while the tensor cores wait) or deferred
// (gate and up staged as BF16, act written under the next tile's main loop). Bases 16-byte aligned.
enum class SwigluEpilogue { in_place, deferred };
SwigluEpilogue swiglu_epilogue_by_default();  // deferred, unless GPUSCOUT_SWIGLU_EPILOGUE=in-place
// False, launching nothing, where the kernel cannot run (another GPU, a shape it does not take).
bool launch_gate_up_swiglu(const bf16* x, int rows, int in, const bf16* w_gate_up, int ffn, bf16* out,
                           cudaStream_t stream, SwigluEpilogue epilogue = SwigluEpilogue::deferred);

}  // namespace gpuscout::cuda::infer
