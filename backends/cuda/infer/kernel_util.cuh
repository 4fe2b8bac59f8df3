#pragma once
// Small device helpers shared by the engine's kernels: BF16 <-> FP32 in 16-byte vectors,
// warp/block reductions, and programmatic dependent launch (PDL).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "gpuscout/cuda/check.hpp"
#include "kernels.hpp"

namespace gpuscout::cuda::infer {

// SiLU, as the SiLU * up kernel and the ring GEMV's SiLU input compute it (the same rounding).
__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + __expf(-g));
}

// Eight BF16 (one 16-byte vector) to FP32.
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 p = __bfloat1622float2(h[j]);
    f[2 * j] = p.x;
    f[2 * j + 1] = p.y;
  }
}

// One lane's share of a ring piece's dot product: 16-byte chunks lane, lane + 32, ... of W and x
// (BF16), in two FMA chains so FMA latency does not bind. The caller sums the warp's lanes.
__device__ __forceinline__ float ring_piece_dot(const uint4* w4, const uint4* x4, int chunks, int lane) {
  float acc0 = 0.0f, acc1 = 0.0f;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    float wf[8], xf[8];
    unpack8(w4[c], wf);
    unpack8(x4[c], xf);
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      acc0 = fmaf(xf[e], wf[e], acc0);
      acc1 = fmaf(xf[e + 1], wf[e + 1], acc1);
    }
  }
  return acc0 + acc1;
}

__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 v;
  auto* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
  return v;
}

// FP8 codes of f[0..8) * inv (saturating to the format's largest finite value), in memory order.
template <__nv_fp8_interpretation_t kFormat>
__device__ __forceinline__ uint2 pack8_fp8(const float* f, float inv) {
  std::uint32_t packed[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const auto lo = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * h] * inv, f[4 * h + 1] * inv), __NV_SATFINITE, kFormat);
    const auto hi =
        __nv_cvt_float2_to_fp8x2(make_float2(f[4 * h + 2] * inv, f[4 * h + 3] * inv), __NV_SATFINITE, kFormat);
    packed[h] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
  }
  return make_uint2(packed[0], packed[1]);
}

__device__ __forceinline__ void load8(const __nv_bfloat16* p, float* f) {
  unpack8(*reinterpret_cast<const uint4*>(p), f);
}

__device__ __forceinline__ void store8(__nv_bfloat16* p, const float* f) {
  *reinterpret_cast<uint4*>(p) = pack8(f);
}

// Streamed once (weights, KV cache): read-only path, not kept in L1.
__device__ __forceinline__ uint4 ldg_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Tensor cores, PTX mma.sync m16n8k16 BF16 -> FP32 (fragment layouts: PTX ISA, "Matrix fragments
// for mma.m16n8k16"): c += a (16x16, row) * b (16x8, col)
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of kThreads (a multiple of 32); `partial` holds kThreads / 32 floats. Every
// thread gets the total.
template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* partial) {
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  return total;
}

// Shared-memory and tensor-core helpers of the attention kernels: cp.async (16 bytes per thread,
// groups), ldmatrix of four 8x8 BF16 matrices (plain and transposed) and BF16 pair packing.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared; src_bytes 0 zero-fills (rows past a context or a chunk).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// The chunk of one prefill attention block (attention_prefill.cu, attention_prefill_wgmma.cu): blocks
// (head, query tile, sequence) on a grid whose y runs over query tiles of `queries_per_block`, the
// last tile first (it has the most keys), and where each K/V row lives in the paged cache.
struct PrefillChunk {
  int q_len = 0, q0 = 0, kvh = 0;
  int pos0 = 0;    // absolute position of the chunk's query 0 (context_len - q_len)
  int kv_end = 0;  // keys the block's last query sees
  std::int64_t q_row0 = 0;
  const std::int32_t* table = nullptr;
  int kv_heads = 0, block_size = 0, block_shift = -1;  // block_shift: log2 of a power-of-two block size

  // False when the block has nothing to do (a padding sequence, or a query tile past the chunk).
  // The grid's x then y order starts the heads' longest tiles first (head-major order left a tail
  // of up to one longest block at the end).
  __device__ bool init(const AttentionBatch& batch, const AttentionShape& shape, int queries_per_block) {
    const int seq = blockIdx.z;
    q_len = batch.q_len[seq];
    const int ctx = batch.context_len[seq];
    if (q_len <= 0 || ctx <= 0) return false;
    q0 = (gridDim.y - 1 - blockIdx.y) * queries_per_block;
    if (q0 >= q_len) return false;
    kvh = blockIdx.x / (shape.heads / shape.kv_heads);
    pos0 = ctx - q_len;
    kv_end = pos0 + min(q0 + queries_per_block, q_len);
    q_row0 = batch.q_start[seq];
    table = batch.block_tables + static_cast<std::int64_t>(seq) * batch.max_blocks_per_seq;
    kv_heads = shape.kv_heads;
    block_size = shape.block_size;
    block_shift = (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;  // the engine's 16: a shift
    return true;
  }
  // The cache row (block * kv_heads + kvh) * block_size + offset of key `key` (< kv_end).
  __device__ std::int64_t cache_row(int key) const {
    const int blk = block_shift >= 0 ? key >> block_shift : key / block_size;
    return (static_cast<std::int64_t>(table[blk]) * kv_heads + kvh) * block_size + (key - blk * block_size);
  }
};

// mbarrier and bulk copy (sm_90): a shared-memory buffer is complete when its expected bytes
// landed (the producer's arrive.expect_tx, then cp.async.bulk completing the transaction).
// The kernels that use them launch only on compute capability 9.0+ (their launch functions check,
// sm90_features_on); for older targets (the sm_80 code A100s, Ampere and Ada cards run) each
// compiles to a trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define GPUSCOUT_SM90_ASM(...) __trap()
#else
#define GPUSCOUT_SM90_ASM(...) asm volatile(__VA_ARGS__)
#endif
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  GPUSCOUT_SM90_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_init_fence() {
  GPUSCOUT_SM90_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  GPUSCOUT_SM90_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                    : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  GPUSCOUT_SM90_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait_parity(std::uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}
// A producer/consumer ring's barriers, set up by thread 0 (the block's next barrier publishes
// them): slot i's full[i] (the producer's bulk copy landed) and empty[i] (its consumer released it),
// one arrival each.
__device__ __forceinline__ void init_ring_barriers(std::uint64_t* full, std::uint64_t* empty, int slots) {
  if (threadIdx.x != 0) return;
  for (int i = 0; i < slots; ++i) {
    mbar_init(full + i, 1);
    mbar_init(empty + i, 1);
  }
  mbar_init_fence();
}
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  GPUSCOUT_SM90_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Programmatic dependent launch (Hopper+). A kernel launched with launch_kernel() may start while
// the kernel before it in the stream is still running; it must call pdl_wait() before it reads
// anything an earlier kernel wrote or writes anything an earlier kernel reads (griddepcontrol.wait
// returns once the previous grid has completed and its writes are visible; since that grid waited
// the same way, all earlier work is done too). Work that depends on nothing earlier (loading
// weights, which no step writes) goes before it: that is the overlap PDL buys. pdl_trigger() lets
// the next kernel launch; each kernel calls it right after its wait, so at most one grid waits
// ahead and no launched-but-waiting grid holds SM slots the running one still needs.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization
// when enabled (set_programmatic_launch), a plain launch otherwise. Works under graph capture.
template <typename... KernelArgs, typename... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic_launch() ? 1 : 0;
  GPUSCOUT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Calls f(std::integral_constant<int, v>) for the v in [kLo, kHi] equal to `value` (kHi when above):
// one place turns a runtime count (rows, heads per KV head) into a template argument.
template <int kLo, int kHi, typename F>
void dispatch_int(int value, F&& f) {
  if constexpr (kLo == kHi) {
    f(std::integral_constant<int, kLo>{});
  } else {
    if (value <= kLo) {
      f(std::integral_constant<int, kLo>{});
    } else {
      dispatch_int<kLo + 1, kHi>(value, f);
    }
  }
}

// head_dim 32, 64 or 128 (check_attention_shape refuses others) as a template argument.
template <typename F>
void dispatch_head_dim(int head_dim, F&& f) {
  if (head_dim == 32) {
    f(std::integral_constant<int, 32>{});
  } else if (head_dim == 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 128>{});
  }
}

}  // namespace gpuscout::cuda::infer
