// The CUDA / cuBLASLt error boundary (cuda_check.h): a failed call becomes a ds::Error naming the
// call, file:line, the device and the library's error text. Not a recovery policy: callers decide.
// Invariant: out-of-memory codes become runtime::OutOfMemoryError, absent devices or drivers
// NotSupported, everything else CudaError (kind "CudaError").
#include "runtime/tensor/cuda/cuda_check.h"

#include <fmt/format.h>

#include "runtime/tensor/ops.h"

namespace ds::runtime::cuda {
namespace {

// A CUDA or cuBLASLt failure that is neither out-of-memory nor a missing device/driver.
class CudaError : public Error {
 public:
  using Error::Error;
  const char* kind() const noexcept override { return "CudaError"; }
};

std::string deviceText() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cuda:?";
  }
  return fmt::format("cuda:{}", device);
}

}  // namespace

void throwCudaError(cudaError_t rc, const char* what, const char* file, int line) {
  const std::string msg = fmt::format("{} failed at {}:{} on {}: {} ({})", what, file, line,
                                      deviceText(), cudaGetErrorString(rc), cudaGetErrorName(rc));
  switch (rc) {
    case cudaErrorMemoryAllocation: throw OutOfMemoryError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice: throw NotSupported(msg);
    default: throw CudaError(msg);
  }
}

void throwCublasError(cublasStatus_t rc, const char* what, const char* file, int line) {
  const std::string msg =
      fmt::format("{} failed at {}:{} on {}: {} ({})", what, file, line, deviceText(),
                  cublasLtGetStatusString(rc), cublasLtGetStatusName(rc));
  switch (rc) {
    case CUBLAS_STATUS_ALLOC_FAILED: throw OutOfMemoryError(msg);
    case CUBLAS_STATUS_NOT_SUPPORTED: throw NotSupported(msg);
    default: throw CudaError(msg);
  }
}

}  // namespace ds::runtime::cuda
