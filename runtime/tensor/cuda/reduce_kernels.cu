// Reductions and fp32 buffer kernels of CudaOps: sum, sumSquares, scale, toBf16, toFp16,
// roundToFp16, and the column sums / bias add that matmul_lt.cc uses (kernels.h). Not the layer
// kernels. Invariant: every reduction has a grid fixed by its sizes and a fixed summation order, so
// a result is bit-reproducible; NaN and inf propagate (no max/min tricks, no skipped elements).
#include <cuda_fp16.h>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/math/fp16_math.h"  // and bf16_math.h

namespace ds::runtime::cuda {
namespace {

constexpr int kSumBlocks = 512;  // partials of the first pass (fixed: determinism)
constexpr int kColumnRowChunks = 64;

// Tree-reduces v over the block (blockDim.x == kThreads); thread 0 gets the total.
template <class T>
__device__ T blockSum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  return shared[0];
}

template <bool kSquares>
__global__ void sumPartialsKernel(double* partials, const float* x, size_t n) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    const double v = x[i];
    acc += kSquares ? v * v : v;
  }
  const double total = blockSum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sumFinalKernel(double* out, const double* partials, int count) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  const double total = blockSum(acc, shared);
  if (threadIdx.x == 0) out[0] = total;
}

__global__ void scaleKernel(float* x, size_t n, float factor) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    x[i] *= factor;
  }
}

__global__ void toBf16Kernel(uint16_t* dst, const float* src, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    dst[i] = math::f32ToBf16Bits(src[i]);
  }
}

__global__ void toFp16Kernel(uint16_t* dst, const float* src, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    dst[i] = math::f32ToFp16Bits(src[i]);
  }
}

// float(fp16(x)) with __float2half_rn: round to nearest even, inf beyond 65504 + half an ulp,
// subnormals kept, NaN stays NaN: the same values as the host's roundToFp16 (CpuOps).
__global__ void roundToFp16Kernel(float* x, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    x[i] = __half2float(__float2half_rn(x[i]));
  }
}

// Rows per chunk of the column sums: at most kColumnRowChunks chunks.
int columnRowsPerChunk(int N) { return (N + kColumnRowChunks - 1) / kColumnRowChunks; }
int columnChunks(int N) {
  const int rows = columnRowsPerChunk(N);
  return rows == 0 ? 0 : (N + rows - 1) / rows;
}

// partials[chunk, c] = sum of src[n, c] over the chunk's rows, in row order.
template <class T>
__global__ void columnPartialsKernel(float* partials, const T* src, int N, int C,
                                     int rowsPerChunk) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int lo = blockIdx.y * rowsPerChunk;
  const int hi = min(lo + rowsPerChunk, N);
  float acc = 0.f;
  for (int n = lo; n < hi; ++n) acc += math::loadF32(src[static_cast<size_t>(n) * C + c]);
  partials[static_cast<size_t>(blockIdx.y) * C + c] = acc;
}

__global__ void columnFinalKernel(float* dst, const float* partials, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float acc = 0.f;
  for (int k = 0; k < chunks; ++k) acc += partials[static_cast<size_t>(k) * C + c];
  dst[c] += acc;
}

template <class T>
__global__ void addBiasKernel(T* out, const T* bias, size_t n, int C) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    out[i] = math::storeAs<T>(math::loadF32(out[i]) + math::loadF32(bias[i % C]));
  }
}

}  // namespace

size_t columnSumScratchBytes(int N, int C) {
  return static_cast<size_t>(columnChunks(N)) * static_cast<size_t>(C) * sizeof(float);
}

void launchColumnSumAdd(float* dst, const void* src, int N, int C, DType dt, void* partials,
                        cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const int rows = columnRowsPerChunk(N), chunks = columnChunks(N);
  auto* p = static_cast<float*>(partials);
  const unsigned colBlocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
  dispatchStorage(dt, "column sums", [&](auto tag) {
    using T = decltype(tag);
    columnPartialsKernel<T>
        <<<dim3(colBlocks, static_cast<unsigned>(chunks)), kThreads, 0, stream>>>(
            p, static_cast<const T*>(src), N, C, rows);
    DS_CUDA_LAUNCHED(columnPartialsKernel);
  });
  columnFinalKernel<<<colBlocks, kThreads, 0, stream>>>(dst, p, chunks, C);
  DS_CUDA_LAUNCHED(columnFinalKernel);
}

void launchAddBias(void* out, const void* bias, int N, int C, DType dt, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N) * static_cast<size_t>(C);
  if (n == 0) return;
  dispatchStorage(dt, "bias add", [&](auto tag) {
    using T = decltype(tag);
    addBiasKernel<T><<<gridFor(n), kThreads, 0, stream>>>(static_cast<T*>(out),
                                                          static_cast<const T*>(bias), n, C);
    DS_CUDA_LAUNCHED(addBiasKernel);
  });
}

namespace {

template <bool kSquares>
double deviceSum(CudaOps& ops, void* scratchBuf, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return 0.0;
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < size_t{kSumBlocks} ? wanted : size_t{kSumBlocks});
  auto* partials = static_cast<double*>(scratchBuf);
  sumPartialsKernel<kSquares><<<blocks, kThreads, 0, stream>>>(partials, x, n);
  DS_CUDA_LAUNCHED(sumPartialsKernel);
  sumFinalKernel<<<1, kThreads, 0, stream>>>(partials + kSumBlocks, partials, blocks);
  DS_CUDA_LAUNCHED(sumFinalKernel);
  double result = 0.0;
  ops.download(&result, partials + kSumBlocks, sizeof(double));
  return result;
}

}  // namespace

double CudaOps::sum(const float* x, size_t n) {
  return deviceSum<false>(*this, scratch((kSumBlocks + 1) * sizeof(double)), x, n, stream_);
}

double CudaOps::sumSquares(const float* x, size_t n) {
  return deviceSum<true>(*this, scratch((kSumBlocks + 1) * sizeof(double)), x, n, stream_);
}

void CudaOps::scale(float* x, size_t n, float factor) {
  if (n == 0) return;
  scaleKernel<<<gridFor(n), kThreads, 0, stream_>>>(x, n, factor);
  DS_CUDA_LAUNCHED(scaleKernel);
}

void CudaOps::toBf16(bf16* dst16, const float* src, size_t n) {
  if (n == 0) return;
  toBf16Kernel<<<gridFor(n), kThreads, 0, stream_>>>(reinterpret_cast<uint16_t*>(dst16), src, n);
  DS_CUDA_LAUNCHED(toBf16Kernel);
}

void CudaOps::toFp16(fp16* dst16, const float* src, size_t n) {
  if (n == 0) return;
  toFp16Kernel<<<gridFor(n), kThreads, 0, stream_>>>(reinterpret_cast<uint16_t*>(dst16), src, n);
  DS_CUDA_LAUNCHED(toFp16Kernel);
}

void CudaOps::roundToFp16(float* x, size_t n) {
  if (n == 0) return;
  roundToFp16Kernel<<<gridFor(n), kThreads, 0, stream_>>>(x, n);
  DS_CUDA_LAUNCHED(roundToFp16Kernel);
}

}  // namespace ds::runtime::cuda
