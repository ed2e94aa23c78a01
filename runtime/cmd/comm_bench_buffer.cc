// BenchBuffer: host vector, plus cudaMalloc'd memory and blocking copies in nccl builds.
#include "runtime/cmd/comm_bench_buffer.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "ds/config.h"
#if DS_HAVE_NCCL
#include <cuda_runtime.h>
#endif

namespace ds::runtime {

#if DS_HAVE_NCCL
namespace {
void cudaOk(cudaError_t rc, const char* what, size_t bytes) {
  if (rc != cudaSuccess)
    throw CommError(
        fmt::format("comm-bench: {} of {} bytes failed: {}", what, bytes, cudaGetErrorString(rc)));
}
}  // namespace
#endif

BenchBuffer::BenchBuffer(size_t count, comm::Device device, bool sharedHost)
    : host_(count, sharedHost && device != comm::Device::kCuda), device_(device) {
  if (device_ != comm::Device::kCuda) return;
#if DS_HAVE_NCCL
  // At least one byte, so an empty buffer still has a distinct device address.
  cudaOk(cudaMalloc(&dev_, std::max<size_t>(count * sizeof(float), 1)), "cudaMalloc",
         count * sizeof(float));
#else
  throw ConfigError(
      "comm-bench: the backend needs CUDA device buffers, but this dsrt was built "
      "without CUDA");
#endif
}

BenchBuffer::~BenchBuffer() {
#if DS_HAVE_NCCL
  if (dev_) cudaFree(dev_);
#endif
}

void BenchBuffer::upload() {
#if DS_HAVE_NCCL
  if (!dev_) return;
  size_t bytes = host_.size() * sizeof(float);
  cudaOk(cudaMemcpy(dev_, host_.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device",
         bytes);
  // A pageable-source copy may return before the DMA lands: finish it before any collective.
  cudaOk(cudaDeviceSynchronize(), "cudaDeviceSynchronize after upload", bytes);
#endif
}

void BenchBuffer::download() {
#if DS_HAVE_NCCL
  if (!dev_) return;
  size_t bytes = host_.size() * sizeof(float);
  cudaOk(cudaMemcpy(host_.data(), dev_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host",
         bytes);
#endif
}

comm::BufferView BenchBuffer::view() {
  if (dev_) return {dev_, host_.size(), DType::kF32, comm::Device::kCuda};
  return comm::view(host_.data(), host_.size());
}

}  // namespace ds::runtime
