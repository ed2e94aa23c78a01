// fp32 staging for fp16/bf16 reductions: NCCL would reduce 16-bit values in 16 bit and pass
// 16-bit partial sums between ranks, so sum/avg widen the input into an fp32 device buffer, run
// the collective in fp32 and narrow the result back, rounding once to nearest-even (avg divides
// in fp32 first). Kernels live in half_staging.cu (nvcc); they are launched on the group's
// stream, so the Work's event covers them. StagingBuffer: one group's cached fp32 buffer, grown
// stream-ordered (cudaMallocAsync / cudaFreeAsync), freed on destruction.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ds::comm::nccl_impl {

// dst[i] = float(src[i]); src holds fp16 (bf16 == false) or bf16 values.
void launchWiden(const void* src, float* dst, size_t n, bool bf16, cudaStream_t stream);
// dst[i] = round-to-nearest-even(src[i] / divisor) as fp16 or bf16.
void launchNarrow(const float* src, void* dst, size_t n, bool bf16, float divisor,
                  cudaStream_t stream);

class StagingBuffer {
 public:
  explicit StagingBuffer(cudaStream_t stream) : stream_(stream) {}
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  // At least n floats, valid for work enqueued on the stream from now on. Growing frees the old
  // buffer in stream order (after the work already enqueued that uses it).
  float* get(size_t n);
  size_t capacity() const { return capacity_; }

 private:
  cudaStream_t stream_;
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ds::comm::nccl_impl
