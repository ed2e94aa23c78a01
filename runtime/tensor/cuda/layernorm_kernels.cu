// CudaOps' LayerNorm (eps 1e-5) for fp32, bf16 and fp16 storage: one warp per row for the forward
// (the vectorised kernel of layernorm_fwd_vec_kernels.cu where the width allows). Backward: for
// bf16 and fp16 C = 256 * V (V <= 4) one fused pass (dinp and per-block dweight/dbias sums) and a
// short final sum; otherwise (or DS_CUDA_LAYERNORM_BWD=split) a warp per row for dinp, then
// per-column sums over fixed row chunks and one pass adding the chunks in order. Not fused with the
// residual. Invariant: mean/rstd are fp32 and saved; backward ACCUMULATES into dinp (dt), dweight
// and dbias (fp32); results are deterministic.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/pack_io.cuh"
#include "runtime/tensor/math/fp16_math.h"  // and bf16_math.h
#include "runtime/tensor/tensor_knobs.h"

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

// dinp for 16-bit rows (E: uint16_t bf16 bits, or fp16) of C = 256 * V: each lane holds 8 * V
// elements of its row in registers, read with 16-byte loads, so a row crosses memory once (the
// generic kernel above reads it twice, two bytes per lane per load: latency-bound at GPT-2's N =
// 16k rows). Sums in a different order than the generic kernel (8 adjacent elements per lane), so
// the two agree to rounding.
template <class E, int V>
__global__ void layernormBackwardInputVecKernel(E* dinp, const E* dout, const E* inp,
                                                const E* weight, const float* mean,
                                                const float* rstd, int N) {
  constexpr int C = 256 * V;
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t base = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float norm[V][8], dnorm[V][8];
  float sumD = 0.f, sumDN = 0.f;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int col = (v * 32 + lane) * 8;
    const uint4 xv = *reinterpret_cast<const uint4*>(inp + base + col);
    const uint4 gv = *reinterpret_cast<const uint4*>(dout + base + col);
    const uint4 wv = *reinterpret_cast<const uint4*>(weight + col);
    const E* x = reinterpret_cast<const E*>(&xv);
    const E* g = reinterpret_cast<const E*>(&gv);
    const E* w = reinterpret_cast<const E*>(&wv);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      norm[v][k] = (toF32(x[k]) - m) * r;
      dnorm[v][k] = toF32(w[k]) * toF32(g[k]);
      sumD += dnorm[v][k];
      sumDN += dnorm[v][k] * norm[v][k];
    }
  }
  sumD = warpSum(sumD) / static_cast<float>(C);
  sumDN = warpSum(sumDN) / static_cast<float>(C);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int col = (v * 32 + lane) * 8;
    uint4 dv = *reinterpret_cast<const uint4*>(dinp + base + col);
    E* d = reinterpret_cast<E*>(&dv);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float dx = (dnorm[v][k] - sumD - norm[v][k] * sumDN) * r;
      fromF32(d[k], toF32(d[k]) + dx);
    }
    *reinterpret_cast<uint4*>(dinp + base + col) = dv;
  }
}

// The vector kernel where it applies (16-bit E, C a multiple of 256 up to 2048, 16-byte aligned
// rows); false otherwise.
template <class E>
bool launchBackwardInputVec(void* dinp, const void* dout, const void* inp, const void* weight,
                            const float* mean, const float* rstd, int N, int C,
                            cudaStream_t stream) {
  if (C % 256 != 0 || C > 2048 || !aligned16(dinp) || !aligned16(dout) || !aligned16(inp) ||
      !aligned16(weight))
    return false;
  const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  auto* di = static_cast<E*>(dinp);
  const auto* g = static_cast<const E*>(dout);
  const auto* x = static_cast<const E*>(inp);
  const auto* w = static_cast<const E*>(weight);
  switch (C / 256) {
#define DS_LN_VEC(V)                                                   \
  case V:                                                              \
    layernormBackwardInputVecKernel<E, V>                              \
        <<<blocks, kThreads, 0, stream>>>(di, g, x, w, mean, rstd, N); \
    break;
    DS_LN_VEC(1)
    DS_LN_VEC(2)
    DS_LN_VEC(3)
    DS_LN_VEC(4)
    DS_LN_VEC(5)
    DS_LN_VEC(6)
    DS_LN_VEC(7)
    DS_LN_VEC(8)
#undef DS_LN_VEC
    default: return false;
  }
  DS_CUDA_LAUNCHED(layernormBackwardInputVecKernel);
  return true;
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

// The whole backward in one pass for 16-bit rows (E as above) of C = 256 * V (V <= 4), after
// llm.c's layernorm_backward_kernel10: a warp per row (rows strided over a grid sized to fill the
// GPU once), the row's dout and inp in registers from 16-byte loads, dinp read and written once;
// each lane keeps its columns' dweight/dbias sums in registers, the block's warps add theirs into
// shared memory in warp order, and the block writes one partials row for
// layernormParamFinalKernel (fixed orders throughout: deterministic for a given grid).
template <class E, int V>
__global__ void __launch_bounds__(kThreads, V <= 3 ? 2 : 1)  // 2 blocks: <= 128 registers
    layernormBackwardFusedKernel(E* dinp, float* partials, const E* dout, const E* inp,
                                 const E* weight, const float* mean, const float* rstd, int N) {
  constexpr int C = 256 * V;
  __shared__ float sums[2][C];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float dw[V][8] = {}, db[V][8] = {};
  for (int row = blockIdx.x * kWarpsPerBlock + warp; row < N; row += gridDim.x * kWarpsPerBlock) {
    const size_t base = static_cast<size_t>(row) * C;
    const float m = mean[row], r = rstd[row];
    uint4 xv[V], gv[V], dv[V];  // dinp too, before the sums: one round trip per row
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int col = (v * 32 + lane) * 8;
      xv[v] = *reinterpret_cast<const uint4*>(inp + base + col);
      gv[v] = *reinterpret_cast<const uint4*>(dout + base + col);
      dv[v] = *reinterpret_cast<const uint4*>(dinp + base + col);
    }
    float sumD = 0.f, sumDN = 0.f;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const uint4 wv = *reinterpret_cast<const uint4*>(weight + (v * 32 + lane) * 8);
      const E* x = reinterpret_cast<const E*>(&xv[v]);
      const E* g = reinterpret_cast<const E*>(&gv[v]);
      const E* w = reinterpret_cast<const E*>(&wv);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float norm = (toF32(x[k]) - m) * r;
        const float dy = toF32(g[k]);
        const float dnorm = toF32(w[k]) * dy;
        sumD += dnorm;
        sumDN += dnorm * norm;
        dw[v][k] += norm * dy;
        db[v][k] += dy;
      }
    }
    sumD = warpSum(sumD) / static_cast<float>(C);
    sumDN = warpSum(sumDN) / static_cast<float>(C);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int col = (v * 32 + lane) * 8;
      const uint4 wv = *reinterpret_cast<const uint4*>(weight + col);
      const E* x = reinterpret_cast<const E*>(&xv[v]);
      const E* g = reinterpret_cast<const E*>(&gv[v]);
      const E* w = reinterpret_cast<const E*>(&wv);
      E* d = reinterpret_cast<E*>(&dv[v]);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float norm = (toF32(x[k]) - m) * r;
        const float dnorm = toF32(w[k]) * toF32(g[k]);
        const float dx = (dnorm - sumD - norm * sumDN) * r;
        fromF32(d[k], toF32(d[k]) + dx);
      }
      *reinterpret_cast<uint4*>(dinp + base + col) = dv[v];
    }
  }
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    if (warp == w) {
#pragma unroll
      for (int v = 0; v < V; ++v) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int c = (v * 32 + lane) * 8 + k;
          sums[0][c] = w == 0 ? dw[v][k] : sums[0][c] + dw[v][k];
          sums[1][c] = w == 0 ? db[v][k] : sums[1][c] + db[v][k];
        }
      }
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    partials[static_cast<size_t>(blockIdx.x) * C + c] = sums[0][c];
    partials[static_cast<size_t>(gridDim.x + blockIdx.x) * C + c] = sums[1][c];
  }
}

// Whether this call takes the fused kernel: DS_CUDA_LAYERNORM_BWD (read on every call, so the
// bench can compare) is auto or fused, and the shape fits (bf16 or fp16, C = 256 * V with V <= 4,
// 16-byte aligned rows, all three gradients given).
bool useFusedBackward(bool half, void* dinp, const float* dweight, const float* dbias,
                      const void* dout, const void* inp, const void* weight, int C) {
  if (knobChoice(knobs::kCudaLayernormBwd).value_or("auto") == "split") return false;
  return half && dinp != nullptr && dweight != nullptr && dbias != nullptr && C % 256 == 0 &&
         C <= 1024 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
}

// Blocks of the fused kernel: as many as are resident on the device at once (a fixed number per
// device and C, so the partials' order and the result are the same every run), at most one per
// kWarpsPerBlock rows.
template <class E, int V>
int fusedBlocks(int N) {
  int device = 0, sms = 0, perSm = 0;
  DS_CUDA_CHECK(cudaGetDevice(&device));
  DS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  DS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &perSm, layernormBackwardFusedKernel<E, V>, kThreads, 0));
  const int rowsBlocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return std::max(1, std::min(rowsBlocks, sms * std::max(perSm, 1)));
}

template <class E>
int fusedBackwardBlocks(int N, int C) {
  switch (C / 256) {
    case 1: return fusedBlocks<E, 1>(N);
    case 2: return fusedBlocks<E, 2>(N);
    case 3: return fusedBlocks<E, 3>(N);
    default: return fusedBlocks<E, 4>(N);
  }
}

// The fused kernel into `partials` (2 * blocks rows of C floats), then layernormParamFinalKernel.
template <class E>
void launchBackwardFused(float* partials, int blocks, void* dinp, float* dweight, float* dbias,
                         const void* dout, const void* inp, const void* weight, const float* mean,
                         const float* rstd, int N, int C, cudaStream_t stream) {
  auto* di = static_cast<E*>(dinp);
  const auto* g = static_cast<const E*>(dout);
  const auto* x = static_cast<const E*>(inp);
  const auto* w = static_cast<const E*>(weight);
  const unsigned grid = static_cast<unsigned>(blocks);
  switch (C / 256) {
#define DS_LN_FUSED(V)                                                         \
  case V:                                                                      \
    layernormBackwardFusedKernel<E, V>                                         \
        <<<grid, kThreads, 0, stream>>>(di, partials, g, x, w, mean, rstd, N); \
    break;
    DS_LN_FUSED(1)
    DS_LN_FUSED(2)
    DS_LN_FUSED(3)
    DS_LN_FUSED(4)
#undef DS_LN_FUSED
    default: throw InternalError("layernorm fused backward: C " + std::to_string(C));
  }
  DS_CUDA_LAUNCHED(layernormBackwardFusedKernel);
  const unsigned finalBlocks = static_cast<unsigned>((C + kFinalCols - 1) / kFinalCols);
  layernormParamFinalKernel<<<finalBlocks, dim3(kFinalCols, kFinalRows), 0, stream>>>(
      dweight, dbias, partials, blocks, C);
  DS_CUDA_LAUNCHED(layernormParamFinalKernel);
}

}  // namespace

void CudaOps::layernormForward(void* out, float* mean, float* rstd, const void* inp,
                               const void* weight, const void* bias, int N, int C, DType dt) {
  dispatchStorage(dt, "layernormForward", [&](auto tag) {
    using T = decltype(tag);
    if (N <= 0 || C <= 0) return;
    if (launchLayernormForwardVec(nullptr, out, mean, rstd, inp, nullptr, weight, bias, N, C, dt,
                                  stream_))
      return;
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
    constexpr bool half = !std::is_same_v<T, float>;  // bf16 bits or fp16
    if (useFusedBackward(half, dinp, dweight, dbias, dout, inp, weight, C)) {
      const int blocks = fusedBackwardBlocks<T>(N, C);
      auto* partials = static_cast<float*>(
          scratch(2 * static_cast<size_t>(blocks) * static_cast<size_t>(C) * sizeof(float)));
      launchBackwardFused<T>(partials, blocks, dinp, dweight, dbias, dout, inp, weight, mean, rstd,
                             N, C, stream_);
      return;
    }
    const bool vec = dinp != nullptr && half &&
                     launchBackwardInputVec<T>(dinp, dout, inp, weight, mean, rstd, N, C, stream_);
    if (dinp != nullptr && !vec) {
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
