#pragma once
// The probes' error checks (standalone programs built by one nvcc command each, outside the project's
// build): a failed CUDA or cuBLASLt call prints where and why and ends the program.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define LT(x)                                                                       \
  do {                                                                              \
    cublasStatus_t s_ = (x);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::printf("%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)
