// cuBLASLt products of the train step; see train_gemm.hpp for the layout mapping.
#include "train_gemm.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "gpuscout/cuda/check.hpp"

namespace gpuscout::cuda::train {

namespace {

// The largest power of two (at most 256) dividing every matrix start of a strided batch, in bytes:
// cuBLASLt picks kernels by the alignment it is promised.
std::uint32_t alignment(const void* p, std::int64_t stride_elements, int element_bytes, int batch) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | 256u;
  if (batch > 1) bits |= static_cast<std::uint64_t>(stride_elements * element_bytes);
  return static_cast<std::uint32_t>(bits & (~bits + 1));
}

cudaDataType_t cuda_type(Operand t) {
  return t == Operand::e4m3 ? CUDA_R_8F_E4M3 : t == Operand::e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_16BF;
}

int element_bytes(Operand t) {
  return t == Operand::bf16 ? 2 : 1;
}

// cuBLASLt's A is our B and its B our A (train_gemm.hpp).
void set_scales(cublasLtMatmulDesc_t desc, const GemmArgs& g) {
  lt::set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(g.b_scale));
  lt::set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(g.a_scale));
}

lt::MatrixLayout layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld, int batch,
                        std::int64_t stride) {
  lt::MatrixLayout l = lt::make_layout(type, rows, cols, ld);
  if (batch > 1) {
    lt::set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
    lt::set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  }
  return l;
}

}  // namespace

struct Gemm::Plan {
  lt::MatmulDesc desc;
  lt::MatrixLayout first, second, out;
  cublasLtMatmulAlgo_t algo{};
};

Gemm::Gemm(void* workspace, std::size_t workspace_bytes)
    : lt_(lt::make_handle()), workspace_(workspace), workspace_bytes_(workspace_bytes) {}

Gemm::~Gemm() {
  plans_.clear();  // the plans' descriptors and layouts before the handle
}

Gemm::Plan& Gemm::plan(const GemmArgs& g) {
  const int c_bytes = g.c_fp32 ? 4 : 2;
  const void* c_in = g.c_in != nullptr ? g.c_in : g.c;
  const bool fp8 = g.a_type != Operand::bf16 || g.b_type != Operand::bf16;
  if (fp8 &&
      (g.a_type == Operand::bf16 || g.b_type == Operand::bf16 || g.trans_a || !g.trans_b ||
       (g.a_type == Operand::e5m2 && g.b_type == Operand::e5m2) || g.a_scale == nullptr || g.b_scale == nullptr)) {
    throw std::logic_error(
        "train Gemm: FP8 needs both operands FP8 (not both E5M2), scales, and C = A B^T (trans_b only)");
  }
  const std::uint32_t align_a = alignment(g.a, g.stride_a, element_bytes(g.a_type), g.batch);
  const std::uint32_t align_b = alignment(g.b, g.stride_b, element_bytes(g.b_type), g.batch);
  const std::uint32_t align_c =
      std::min(alignment(g.c, g.stride_c, c_bytes, g.batch), alignment(c_in, g.stride_c, c_bytes, g.batch));
  const Key key{g.m,
                g.n,
                g.k,
                g.trans_a,
                g.trans_b,
                g.lda,
                g.ldb,
                g.ldc,
                g.c_fp32,
                g.beta != 0,
                g.batch,
                g.stride_a,
                g.stride_b,
                g.stride_c,
                align_a,
                align_b,
                align_c,
                static_cast<std::int64_t>(g.a_type),
                static_cast<std::int64_t>(g.b_type),
                0};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;

  auto p = std::make_unique<Plan>();
  p->desc = lt::make_matmul_desc(CUBLAS_COMPUTE_32F, CUDA_R_32F);
  // cuBLASLt's first operand is B (transposed as B is here), its second A.
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt::set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  lt::set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  if (fp8) {
    const std::int8_t fast_accum = 0;  // full FP32 accumulation, as the serving engine's FP8 GEMMs
    lt::set(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum);
  }
  if (fp8) set_scales(p->desc, g);
  const cudaDataType_t type_a = cuda_type(g.a_type), type_b = cuda_type(g.b_type);
  // Column-major shapes as stored: B row-major [K, N] is [N rows, K cols]; [N, K] (trans_b) is [K, N].
  p->first = g.trans_b ? layout(type_b, g.k, g.n, g.ldb, g.batch, g.stride_b)
                       : layout(type_b, g.n, g.k, g.ldb, g.batch, g.stride_b);
  p->second = g.trans_a ? layout(type_a, g.m, g.k, g.lda, g.batch, g.stride_a)
                        : layout(type_a, g.k, g.m, g.lda, g.batch, g.stride_a);
  p->out = layout(g.c_fp32 ? CUDA_R_32F : CUDA_R_16BF, g.n, g.m, g.ldc, g.batch, g.stride_c);

  const lt::Preference pref = lt::make_preference(workspace_bytes_);
  lt::set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b);
  lt::set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a);
  lt::set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  lt::set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_, p->desc, p->first, p->second, p->out, p->out, pref, 1, &result, &returned);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {
    throw std::runtime_error(fmt::format(
        "cuBLASLt has no {} algorithm for the train-step GEMM m={} n={} k={} (trans {}{}, batch {}, {} output)",
        fp8 ? "FP8" : "BF16", g.m, g.n, g.k, g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', g.batch,
        g.c_fp32 ? "FP32" : "BF16"));
  }
  p->algo = result.algo;
  auto& ref = *p;
  plans_.emplace(key, std::move(p));
  return ref;
}

void Gemm::run(const GemmArgs& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return;
  const Plan& p = plan(g);
  const void* c_in = g.c_in != nullptr ? g.c_in : g.c;
  if (g.a_scale != nullptr) set_scales(p.desc, g);  // per call: a plan serves every tensor of its shape
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmul(lt_, p.desc, &g.alpha, g.b, p.first, g.a, p.second, &g.beta, c_in, p.out, g.c,
                                       p.out, &p.algo, workspace_, workspace_bytes_, stream));
}

}  // namespace gpuscout::cuda::train
