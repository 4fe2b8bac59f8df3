#include "gpuscout/cuda/check.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuscout::cuda {

CudaError::CudaError(std::string api, int code, std::string error_name, std::string description, std::string call,
                     std::string file, int line)
    : gpuscout::Error(fmt::format("{} failed: {} ({}: {}) at {}:{}", call, error_name, api, description, file, line)),
      api_(std::move(api)),
      code_(code),
      error_name_(std::move(error_name)),
      call_(std::move(call)),
      file_(std::move(file)),
      line_(line) {}

bool CudaError::out_of_memory() const noexcept {
  return (api_ == "cuda" && code_ == static_cast<int>(cudaErrorMemoryAllocation)) ||
         (api_ == "cublasLt" && code_ == static_cast<int>(CUBLAS_STATUS_ALLOC_FAILED));
}

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  throw CudaError("cuda", static_cast<int>(code), cudaGetErrorName(code), cudaGetErrorString(code), call, file, line);
}

void throw_cublas_error(cublasStatus_t code, const char* call, const char* file, int line) {
  throw CudaError("cublasLt", static_cast<int>(code), cublasLtGetStatusName(code), cublasLtGetStatusString(code), call,
                  file, line);
}

void log_cuda_error(cudaError_t code, const char* call, const char* file, int line) noexcept {
  try {
    spdlog::warn("{} failed: {} ({}) at {}:{}", call, cudaGetErrorName(code), cudaGetErrorString(code), file, line);
  } catch (...) {
  }
}

}  // namespace gpuscout::cuda
