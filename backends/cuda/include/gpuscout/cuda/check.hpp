#pragma once
// Checked CUDA and cuBLASLt calls (nvbench style): a failing call throws CudaError carrying the
// file, line, call text and error name; destructors use the no-throw variant, which logs instead.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "gpuscout/util/error.hpp"

namespace gpuscout::cuda {

class CudaError : public gpuscout::Error {
 public:
  CudaError(std::string api, int code, std::string error_name, std::string description, std::string call,
            std::string file, int line);
  const std::string& api() const noexcept { return api_; }  // "cuda" or "cublasLt"
  int code() const noexcept { return code_; }
  const std::string& error_name() const noexcept { return error_name_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  bool out_of_memory() const noexcept;

 private:
  std::string api_;
  int code_;
  std::string error_name_, call_, file_;
  int line_;
};

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line);
// Logs a failed call (used where throwing is not allowed: destructors, cleanup paths).
void log_cuda_error(cudaError_t code, const char* call, const char* file, int line) noexcept;

}  // namespace gpuscout::cuda

#define GPUSCOUT_CUDA_CHECK(call)                                                      \
  do {                                                                                 \
    const cudaError_t gpuscout_status_ = (call);                                       \
    if (gpuscout_status_ != cudaSuccess)                                               \
      ::gpuscout::cuda::throw_cuda_error(gpuscout_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define GPUSCOUT_CUDA_CHECK_NOTHROW(call)                                            \
  do {                                                                               \
    const cudaError_t gpuscout_status_ = (call);                                     \
    if (gpuscout_status_ != cudaSuccess)                                             \
      ::gpuscout::cuda::log_cuda_error(gpuscout_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, execution errors at the next sync.
#define GPUSCOUT_CUDA_CHECK_LAUNCH() GPUSCOUT_CUDA_CHECK(cudaGetLastError())

#define GPUSCOUT_CUBLAS_CHECK(call)                                                      \
  do {                                                                                   \
    const cublasStatus_t gpuscout_status_ = (call);                                      \
    if (gpuscout_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::gpuscout::cuda::throw_cublas_error(gpuscout_status_, #call, __FILE__, __LINE__); \
  } while (0)

// Short names, as in most CUDA code bases.
#ifndef CUDA_CHECK
#define CUDA_CHECK(call) GPUSCOUT_CUDA_CHECK(call)
#endif
#ifndef CUDA_CHECK_NOTHROW
#define CUDA_CHECK_NOTHROW(call) GPUSCOUT_CUDA_CHECK_NOTHROW(call)
#endif
#ifndef CUBLAS_CHECK
#define CUBLAS_CHECK(call) GPUSCOUT_CUBLAS_CHECK(call)
#endif
