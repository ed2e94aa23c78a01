// CudaOps' LayerNorm (eps 1e-5) for fp32 and bf16 storage: one warp per row for the forward and
// for dinp; the parameter gradients as per-column sums over fixed row chunks, then one pass adding
// the chunks in order. Not fused with the residual. Invariant: mean/rstd are fp32 and saved;
// backward ACCUMULATES into dinp (dt), dweight and dbias (fp32); results are deterministic.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/math/bf16_math.h"

namespace ds::runtime::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kWarpsPerBlock = kThreads / 32;
// Row chunks of the parameter-gradient partial sums: enough blocks to fill the GPU at GPT-2's
// N = 16k rows (a chunk of 16 rows per block column), few enough that the final pass is short.
constexpr int kParamRowChunks = 1024;
constexpr int kFinalCols = 32, kFinalRows = 8;  // the final pass's block: 32 columns x 8 lanes

__device__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <class T>
__global__ void layernormForwardKernel(T* out, float* mean, float* rstd, const T* inp,
                                       const T* weight, const T* bias, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;  // whole warps leave together
  const T* x = inp + static_cast<size_t>(row) * C;
  float s = 0.f;
  for (int i = lane; i < C; i += 32) s += math::loadF32(x[i]);
  const float m = warpSum(s) / static_cast<float>(C);
  float v = 0.f;
  for (int i = lane; i < C; i += 32) {
    const float d = math::loadF32(x[i]) - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(warpSum(v) / static_cast<float>(C) + kEps);
  T* o = out + static_cast<size_t>(row) * C;
  for (int i = lane; i < C; i += 32) {
    const float norm = (math::loadF32(x[i]) - m) * r;
    o[i] = math::storeAs<T>(norm * math::loadF32(weight[i]) + math::loadF32(bias[i]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

template <class T>
__global__ void layernormBackwardInputKernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                             const float* mean, const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t base = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float dnormMean = 0.f, dnormNormMean = 0.f;
  for (int i = lane; i < C; i += 32) {
    const float norm = (math::loadF32(inp[base + i]) - m) * r;
    const float dnorm = math::loadF32(weight[i]) * math::loadF32(dout[base + i]);
    dnormMean += dnorm;
    dnormNormMean += dnorm * norm;
  }
  dnormMean = warpSum(dnormMean) / static_cast<float>(C);
  dnormNormMean = warpSum(dnormNormMean) / static_cast<float>(C);
  for (int i = lane; i < C; i += 32) {
    const float norm = (math::loadF32(inp[base + i]) - m) * r;
    const float dnorm = math::loadF32(weight[i]) * math::loadF32(dout[base + i]);
    const float dx = (dnorm - dnormMean - norm * dnormNormMean) * r;
    dinp[base + i] = math::storeAs<T>(math::loadF32(dinp[base + i]) + dx);
  }
}

// partials[0][chunk, c] = sum over the chunk's rows of norm * dout, partials[1][chunk, c] of dout.
template <class T>
__global__ void layernormParamPartialsKernel(float* partials, const T* dout, const T* inp,
                                             const float* mean, const float* rstd, int N, int C,
                                             int rowsPerChunk) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int lo = blockIdx.y * rowsPerChunk;
  const int hi = min(lo + rowsPerChunk, N);
  float dw = 0.f, db = 0.f;
  for (int n = lo; n < hi; ++n) {
    const size_t at = static_cast<size_t>(n) * C + c;
    const float dy = math::loadF32(dout[at]);
    dw += (math::loadF32(inp[at]) - mean[n]) * rstd[n] * dy;
    db += dy;
  }
  const size_t chunkAt = static_cast<size_t>(blockIdx.y) * C + c;
  partials[chunkAt] = dw;
  partials[static_cast<size_t>(gridDim.y) * C + chunkAt] = db;
}

// Block (kFinalCols, kFinalRows): lane y of column x sums chunks y, y + 8, ... in order, then
// lane 0 adds the 8 lane sums in order (a fixed order: deterministic).
__global__ void layernormParamFinalKernel(float* dweight, float* dbias, const float* partials,
                                          int chunks, int C) {
  __shared__ float sw[kFinalRows][kFinalCols], sb[kFinalRows][kFinalCols];
  const int c = blockIdx.x * kFinalCols + threadIdx.x;
  float dw = 0.f, db = 0.f;
  if (c < C) {
    for (int k = threadIdx.y; k < chunks; k += kFinalRows) {
      dw += partials[static_cast<size_t>(k) * C + c];
      db += partials[static_cast<size_t>(chunks + k) * C + c];
    }
  }
  sw[threadIdx.y][threadIdx.x] = dw;
  sb[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  dw = 0.f;
  db = 0.f;
  for (int y = 0; y < kFinalRows; ++y) {
    dw += sw[y][threadIdx.x];
    db += sb[y][threadIdx.x];
  }
  if (dweight != nullptr) dweight[c] += dw;
  if (dbias != nullptr) dbias[c] += db;
}

}  // namespace

void CudaOps::layernormForward(void* out, float* mean, float* rstd, const void* inp,
                               const void* weight, const void* bias, int N, int C, DType dt) {
  dispatchStorage(dt, "layernormForward", [&](auto tag) {
    using T = decltype(tag);
    if (N <= 0 || C <= 0) return;
    const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
    layernormForwardKernel<T><<<blocks, kThreads, 0, stream_>>>(
        static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
        static_cast<const T*>(bias), N, C);
    DS_CUDA_LAUNCHED(layernormForwardKernel);
  });
}

void CudaOps::layernormBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                                const void* inp, const void* weight, const float* mean,
                                const float* rstd, int N, int C, DType dt) {
  dispatchStorage(dt, "layernormBackward", [&](auto tag) {
    using T = decltype(tag);
    if (N <= 0 || C <= 0) return;
    if (dinp != nullptr) {
      const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
      layernormBackwardInputKernel<T><<<blocks, kThreads, 0, stream_>>>(
          static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp),
          static_cast<const T*>(weight), mean, rstd, N, C);
      DS_CUDA_LAUNCHED(layernormBackwardInputKernel);
    }
    if (dweight == nullptr && dbias == nullptr) return;
    const int rows = (N + kParamRowChunks - 1) / kParamRowChunks;
    const int chunks = (N + rows - 1) / rows;
    auto* partials = static_cast<float*>(
        scratch(2 * static_cast<size_t>(chunks) * static_cast<size_t>(C) * sizeof(float)));
    const unsigned colBlocks = static_cast<unsigned>((C + kThreads - 1) / kThreads);
    layernormParamPartialsKernel<T>
        <<<dim3(colBlocks, static_cast<unsigned>(chunks)), kThreads, 0, stream_>>>(
            partials, static_cast<const T*>(dout), static_cast<const T*>(inp), mean, rstd, N, C,
            rows);
    DS_CUDA_LAUNCHED(layernormParamPartialsKernel);
    const unsigned finalBlocks = static_cast<unsigned>((C + kFinalCols - 1) / kFinalCols);
    layernormParamFinalKernel<<<finalBlocks, dim3(kFinalCols, kFinalRows), 0, stream_>>>(
        dweight, dbias, partials, chunks, C);
    DS_CUDA_LAUNCHED(layernormParamFinalKernel);
  });
}

}  // namespace ds::runtime::cuda
