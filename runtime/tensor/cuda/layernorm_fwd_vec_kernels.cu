// CudaOps' vectorised LayerNorm forward (eps 1e-5), optionally fused with the residual add before
// it: one warp per row, the row held in registers (P 128-bit packs per lane), read once and
// written once, for rows of C = 32 * W * P (W = 16 bytes of the element). Also
// CudaOps::residualLayernormForward, which falls back to the two separate ops elsewhere.
// Invariant: the LayerNorm reads the residual as stored (rounded to the element type), so fused
// and separate agree to summation order; mean/rstd are fp32 and saved.
#include <cstdint>
#include <initializer_list>

#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/pack_io.cuh"

namespace ds::runtime::cuda {
namespace {

constexpr float kEps = 1e-5f;
constexpr int kRowsPerBlock = kThreads / 32;
constexpr int kMaxPacks = 8;  // per lane: C up to 2048 (bf16) or 1024 (fp32)

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// v as the element type T stores it.
template <class T>
__device__ __forceinline__ float roundAs(float v) {
  T e;
  fromF32(e, v);
  return toF32(e);
}

// res = a + b (when b is not null) and out = LayerNorm(res or a); grid rows / kRowsPerBlock.
template <class T, int P>
__global__ void __launch_bounds__(kThreads)
    layernormForwardVecKernel(T* res, T* out, float* mean, float* rstd, const T* a, const T* b,
                              const T* weight, const T* bias, int N) {
  constexpr int W = kPack16<T>, C = 32 * W * P;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;  // whole warps leave together
  const size_t base = static_cast<size_t>(row) * C;
  float x[P][W];
  float s = 0.f;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int col = (p * 32 + lane) * W;
    loadPack<T, W>(a + base + col, x[p]);
    if (b != nullptr) {
      float y[W];
      loadPack<T, W>(b + base + col, y);
#pragma unroll
      for (int k = 0; k < W; ++k) x[p][k] = roundAs<T>(x[p][k] + y[k]);
      storePack<T, W>(res + base + col, x[p]);
    }
#pragma unroll
    for (int k = 0; k < W; ++k) s += x[p][k];
  }
  const float m = warpSum(s) / static_cast<float>(C);
  float v = 0.f;
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int k = 0; k < W; ++k) v += (x[p][k] - m) * (x[p][k] - m);
  const float r = 1.0f / sqrtf(warpSum(v) / static_cast<float>(C) + kEps);
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int col = (p * 32 + lane) * W;
    float w[W], bi[W];
    loadPack<T, W>(weight + col, w);
    loadPack<T, W>(bias + col, bi);
#pragma unroll
    for (int k = 0; k < W; ++k) x[p][k] = (x[p][k] - m) * r * w[k] + bi[k];
    storePack<T, W>(out + base + col, x[p]);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

}  // namespace

bool launchLayernormForwardVec(void* res, void* out, float* mean, float* rstd, const void* a,
                               const void* b, const void* weight, const void* bias, int N, int C,
                               DType dt, cudaStream_t stream) {
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16) return false;
  const int rowPack = 32 * static_cast<int>(16 / dtypeSize(dt));  // elements per warp-wide pack
  if (N <= 0 || C % rowPack != 0 || C / rowPack > kMaxPacks) return false;
  for (const void* p : std::initializer_list<const void*>{res, out, a, b, weight, bias})
    if (p != nullptr && !aligned16(p)) return false;
  if (b != nullptr && res == nullptr) return false;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  bool launched = false;
  dispatchStorage(dt, "layernormForward", [&](auto tag) {
    using T = decltype(tag);
    auto* r = static_cast<T*>(res);
    auto* o = static_cast<T*>(out);
    const auto *x = static_cast<const T*>(a), *y = static_cast<const T*>(b);
    const auto *w = static_cast<const T*>(weight), *bi = static_cast<const T*>(bias);
    switch (C / rowPack) {
#define DS_LN_FWD_VEC(P)                                                     \
  case P:                                                                    \
    layernormForwardVecKernel<T, P>                                          \
        <<<blocks, kThreads, 0, stream>>>(r, o, mean, rstd, x, y, w, bi, N); \
    launched = true;                                                         \
    break;
      DS_LN_FWD_VEC(1)
      DS_LN_FWD_VEC(2)
      DS_LN_FWD_VEC(3)
      DS_LN_FWD_VEC(4)
      DS_LN_FWD_VEC(5)
      DS_LN_FWD_VEC(6)
      DS_LN_FWD_VEC(7)
      DS_LN_FWD_VEC(8)
#undef DS_LN_FWD_VEC
      default: break;
    }
  });
  if (launched) DS_CUDA_LAUNCHED(layernormForwardVecKernel);
  return launched;
}

void CudaOps::residualLayernormForward(void* res, void* out, float* mean, float* rstd,
                                       const void* a, const void* b, const void* weight,
                                       const void* bias, int N, int C, DType dt) {
  if (launchLayernormForwardVec(res, out, mean, rstd, a, b, weight, bias, N, C, dt, stream_))
    return;
  residualForward(res, a, b, static_cast<size_t>(N) * static_cast<size_t>(C), dt);
  layernormForward(out, mean, rstd, res, weight, bias, N, C, dt);
}

}  // namespace ds::runtime::cuda
