// Widen / narrow kernels for fp32 accumulation of fp16/bf16 (grid-stride loops), and the
// StagingBuffer. Compiled by nvcc only when CMake finds a CUDA compiler (comm/CMakeLists.txt).
#include "comm/nccl/half_staging.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ds::comm::nccl_impl {
namespace {

constexpr int kThreads = 256;

__global__ void widenF16(const __half* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __half2float(src[i]);
}

__global__ void widenBF16(const __nv_bfloat16* src, float* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __bfloat162float(src[i]);
}

__global__ void narrowF16(const float* src, __half* dst, size_t n, float divisor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __float2half_rn(__fdiv_rn(src[i], divisor));
}

__global__ void narrowBF16(const float* src, __nv_bfloat16* dst, size_t n, float divisor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = __float2bfloat16_rn(__fdiv_rn(src[i], divisor));
}

unsigned blocksFor(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + kThreads - 1) / kThreads, 4096));
}

// The CUDA boundary of this file: a launch failure becomes an exception the backend maps to
// CommError (nvcc does not compile core/error.h's fmt dependency here).
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("cuda: ") + what + " failed: " + cudaGetErrorString(rc));
}

}  // namespace

void launchWiden(const void* src, float* dst, size_t n, bool bf16, cudaStream_t stream) {
  if (n == 0) return;
  if (bf16) {
    widenBF16<<<blocksFor(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst,
                                                     n);
  } else {
    widenF16<<<blocksFor(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
  }
  check(cudaGetLastError(), "widen kernel launch");
}

void launchNarrow(const float* src, void* dst, size_t n, bool bf16, float divisor,
                  cudaStream_t stream) {
  if (n == 0) return;
  if (bf16) {
    narrowBF16<<<blocksFor(n), kThreads, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n,
                                                      divisor);
  } else {
    narrowF16<<<blocksFor(n), kThreads, 0, stream>>>(src, static_cast<__half*>(dst), n, divisor);
  }
  check(cudaGetLastError(), "narrow kernel launch");
}

StagingBuffer::~StagingBuffer() {
  if (data_) cudaFreeAsync(data_, stream_);
}

float* StagingBuffer::get(size_t n) {
  if (n <= capacity_ && data_) return data_;
  size_t want = std::max<size_t>({n, capacity_ + capacity_ / 2, 1024});
  if (data_) check(cudaFreeAsync(data_, stream_), "cudaFreeAsync (fp32 staging)");
  data_ = nullptr;
  capacity_ = 0;
  check(cudaMallocAsync(reinterpret_cast<void**>(&data_), want * sizeof(float), stream_),
        "cudaMallocAsync (fp32 staging)");
  capacity_ = want;
  return data_;
}

}  // namespace ds::comm::nccl_impl
