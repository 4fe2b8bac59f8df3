#pragma once
// Owning wrappers for cuBLASLt's objects (handle, matmul descriptor, matrix layout, preference),
// shared by the GEMM benchmark, the serving engine and the train step: each destroys its object
// without throwing, moves, and converts to the raw handle cuBLASLt's calls take.
#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "gpuscout/cuda/check.hpp"

namespace gpuscout::cuda::lt {

template <typename Raw, cublasStatus_t (*Destroy)(Raw)>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Raw raw) : raw_(raw) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, nullptr);
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  operator Raw() const { return raw_; }  // NOLINT(google-explicit-constructor): cuBLASLt call sites
  Raw get() const { return raw_; }

 private:
  void reset() {
    if (raw_ != nullptr) (void)Destroy(raw_);
    raw_ = nullptr;
  }
  Raw raw_ = nullptr;
};

using Handle = Owned<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

inline Handle make_handle() {
  cublasLtHandle_t h = nullptr;
  GPUSCOUT_CUBLAS_CHECK(cublasLtCreate(&h));
  return Handle(h);
}

inline MatmulDesc make_matmul_desc(cublasComputeType_t compute, cudaDataType_t scale) {
  cublasLtMatmulDesc_t d = nullptr;
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
  return MatmulDesc(d);
}

inline MatrixLayout make_layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  return MatrixLayout(l);
}

// A preference that allows `workspace_bytes` of workspace.
inline Preference make_preference(std::size_t workspace_bytes) {
  cublasLtMatmulPreference_t p = nullptr;
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
  Preference owned(p);
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof workspace_bytes));
  return owned;
}

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attribute, &value, sizeof value));
}

template <typename T>
void set(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attribute, const T& value) {
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attribute, &value, sizeof value));
}

template <typename T>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  GPUSCOUT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attribute, &value, sizeof value));
}

}  // namespace gpuscout::cuda::lt
