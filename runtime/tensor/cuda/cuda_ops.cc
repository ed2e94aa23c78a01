// CudaOps' device, memory and cuBLASLt lifetime: the constructor and destructor, makeCudaOps,
// alloc/release, the copies, synchronize and the scratch buffer. Not the kernels (*_kernels.cu)
// nor the products (matmul_lt.cc). Invariant: everything the constructor creates is freed exactly
// once (freeAll), also when the constructor throws; the destructor never throws.
#include "runtime/tensor/cuda/cuda_ops.h"

#include <fmt/format.h>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/matmul_lt.h"
#include "runtime/tensor/tensor_knobs.h"

namespace ds::runtime::cuda {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

CudaOps::CudaOps(int device, CudaOpsOptions options) : device_(device), options_(options) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw NotSupported(
        fmt::format("cuda device {} requested, but no CUDA device is usable: {} ({})", device,
                    cudaGetErrorString(rc), cudaGetErrorName(rc)));
  }
  if (device < 0 || device >= count) {
    throw ConfigError(fmt::format(
        "cuda device {} requested, but this process sees {} CUDA device(s) (indices 0..{}; "
        "CUDA_VISIBLE_DEVICES may hide the others)",
        device, count, count - 1));
  }
  try {
    DS_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    DS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    name_ = fmt::format("cuda:{} ({}, {:.1f} GiB)", device, prop.name,
                        static_cast<double>(prop.totalGlobalMem) / kGiB);
    DS_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking));
    DS_CUBLAS_CHECK(cublasLtCreate(&lt_));
    ltWorkspace_ = alloc(options_.cublasWorkspaceBytes, "cuBLASLt workspace");
    ltPlans_ = std::make_unique<LtPlanCache>();
  } catch (...) {
    freeAll();
    throw;
  }
}

CudaOps::~CudaOps() { freeAll(); }

void CudaOps::freeAll() noexcept {
  // Queued work may still use the buffers; errors here are past reporting.
  (void)cudaDeviceSynchronize();
  ltPlans_.reset();
  if (lt_ != nullptr) cublasLtDestroy(lt_);
  lt_ = nullptr;
  release(ltWorkspace_);
  ltWorkspace_ = nullptr;
  release(scratch_);
  scratch_ = nullptr;
  scratchBytes_ = 0;
  if (copyStream_ != nullptr) (void)cudaStreamDestroy(copyStream_);
  copyStream_ = nullptr;
  (void)cudaGetLastError();
}

void* CudaOps::alloc(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc == cudaSuccess) return p;
  (void)cudaGetLastError();  // a failed cudaMalloc must not surface at the next launch check
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) (void)cudaGetLastError();
  const std::string msg = fmt::format(
      "cudaMalloc of {} bytes ({:.2f} GiB) for {} on {} failed: {}; the device has {} bytes "
      "({:.2f} GiB) free of {} ({:.2f} GiB)",
      bytes, static_cast<double>(bytes) / kGiB, what, name_.empty() ? "cuda" : name_,
      cudaGetErrorString(rc), freeBytes, static_cast<double>(freeBytes) / kGiB, totalBytes,
      static_cast<double>(totalBytes) / kGiB);
  if (rc == cudaErrorMemoryAllocation) throw OutOfMemoryError(msg);
  DS_CUDA_CHECK(rc);            // anything else: a CUDA error naming the call
  throw OutOfMemoryError(msg);  // not reached
}

void CudaOps::release(void* ptr) noexcept {
  if (ptr != nullptr) (void)cudaFree(ptr);
}

void CudaOps::upload(void* dst, const void* hostSrc, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemcpyAsync(dst, hostSrc, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaOps::download(void* hostDst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemcpyAsync(hostDst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  DS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaOps::zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  DS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaOps::synchronize() { DS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void* CudaOps::scratch(size_t bytes) {
  if (bytes <= scratchBytes_) return scratch_;
  // Work queued earlier may still read the old buffer.
  DS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  release(scratch_);
  scratch_ = nullptr;
  scratchBytes_ = 0;
  const size_t grown = bytes < (1u << 20) ? (1u << 20) : bytes;
  scratch_ = alloc(grown, "CudaOps scratch");
  scratchBytes_ = grown;
  return scratch_;
}

}  // namespace ds::runtime::cuda

namespace ds::runtime {

std::unique_ptr<Ops> makeCudaOps(int device, bool allowTf32) {
  cuda::CudaOpsOptions options;
  options.allowTf32 = allowTf32;
  options.fuseGelu = knobChoice(knobs::kCudaGeluFusion).value_or("auto") != "off";
  return std::make_unique<cuda::CudaOps>(device, options);
}

}  // namespace ds::runtime
