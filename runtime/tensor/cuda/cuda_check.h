// The one boundary between runtime/tensor/cuda and the CUDA runtime / cuBLASLt error codes: each
// failed call becomes a ds::Error naming the call, the device and the CUDA error text. Kernel
// launches are checked with cudaGetLastError right after the launch (DS_CUDA_LAUNCHED).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace ds::runtime::cuda {

[[noreturn]] void throwCudaError(cudaError_t rc, const char* what, const char* file, int line);
[[noreturn]] void throwCublasError(cublasStatus_t rc, const char* what, const char* file, int line);

}  // namespace ds::runtime::cuda

#define DS_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t ds_cuda_rc_ = (call);                                              \
    if (ds_cuda_rc_ != cudaSuccess) {                                              \
      ::ds::runtime::cuda::throwCudaError(ds_cuda_rc_, #call, __FILE__, __LINE__); \
    }                                                                              \
  } while (0)

#define DS_CUBLAS_CHECK(call)                                                          \
  do {                                                                                 \
    cublasStatus_t ds_cublas_rc_ = (call);                                             \
    if (ds_cublas_rc_ != CUBLAS_STATUS_SUCCESS) {                                      \
      ::ds::runtime::cuda::throwCublasError(ds_cublas_rc_, #call, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// After a <<<...>>> launch: a bad configuration or an earlier asynchronous fault surfaces here.
#define DS_CUDA_LAUNCHED(kernelName) DS_CUDA_CHECK(cudaGetLastError())
