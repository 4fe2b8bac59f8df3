#pragma once
// Tensor-memory-accelerator copies (sm_90: cp.async.bulk.tensor) and the proxy fence they need, shared
// by the sm_90a kernels (prefill attention, the SwiGLU GEMM) and the decode attention's tensor-copy
// variant (sm_90). Layouts are PTX's ("cp.async.bulk.tensor", tensor-map swizzle modes).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpuscout/cuda/check.hpp"
#include "kernel_util.cuh"

namespace gpuscout::cuda::infer {

// Orders this thread's generic-proxy shared-memory accesses (cp.async, plain stores) before later
// async-proxy ones (wgmma reads, tensor copies writing the same bytes).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A 2-D box of a tensor map (inner, outer: its first element's coordinates) into shared memory by the
// tensor-memory accelerator, swizzled on the way as the map says; completes on `bar`'s transaction count.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int inner, int outer,
                                            std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(smem_addr(bar))
      : "memory");
}

// A 2-D tensor map over BF16 rows (`inner` values each, row-major, `outer` rows) with boxes of box_inner
// x box_outer values, swizzled by 128 bytes as wgmma reads them. The driver's cuTensorMapEncodeTiled is
// found through the runtime (no -lcuda); throws, naming `what`, where it is missing or refuses.
inline CUtensorMap bf16_tensor_map(const void* base, std::uint64_t inner, std::uint64_t outer, std::uint32_t box_inner,
                                   std::uint32_t box_outer, const char* what) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    GPUSCOUT_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw std::runtime_error("the CUDA driver has no cuTensorMapEncodeTiled (needed for tensor copies)");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {inner * 2};  // bytes from one row to the next
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error(std::string("cuTensorMapEncodeTiled failed for ") + what + " (error " +
                             std::to_string(static_cast<int>(r)) + ")");
  }
  return map;
}

}  // namespace gpuscout::cuda::infer
