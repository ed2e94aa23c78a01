// CudaOps' pointwise layers: GELU (tanh form, runtime/tensor/math/gelu_math.h) and the residual
// add, forward and backward, for fp32 and bf16 storage (fp32 arithmetic). Not fused with
// anything. Invariant: backward ACCUMULATES (dinp, da, db +=), one rounding per stored element.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/math/bf16_math.h"
#include "runtime/tensor/math/gelu_math.h"

namespace ds::runtime::cuda {
namespace {

#define DS_GRID_STRIDE(i, n)                                                         \
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * kThreads)

template <class T>
__global__ void geluForwardKernel(T* out, const T* inp, size_t n) {
  DS_GRID_STRIDE(i, n) { out[i] = math::storeAs<T>(math::geluF32(math::loadF32(inp[i]))); }
}

template <class T>
__global__ void geluBackwardKernel(T* dinp, const T* inp, const T* dout, size_t n) {
  DS_GRID_STRIDE(i, n) {
    const float g = math::geluGradF32(math::loadF32(inp[i])) * math::loadF32(dout[i]);
    dinp[i] = math::storeAs<T>(math::loadF32(dinp[i]) + g);
  }
}

template <class T>
__global__ void residualForwardKernel(T* out, const T* a, const T* b, size_t n) {
  DS_GRID_STRIDE(i, n) { out[i] = math::storeAs<T>(math::loadF32(a[i]) + math::loadF32(b[i])); }
}

template <class T>
__global__ void residualBackwardKernel(T* da, T* db, const T* dout, size_t n) {
  DS_GRID_STRIDE(i, n) {
    const float d = math::loadF32(dout[i]);
    if (da != nullptr) da[i] = math::storeAs<T>(math::loadF32(da[i]) + d);
    if (db != nullptr) db[i] = math::storeAs<T>(math::loadF32(db[i]) + d);
  }
}

#undef DS_GRID_STRIDE

}  // namespace

void CudaOps::geluForward(void* out, const void* inp, size_t n, DType dt) {
  dispatchStorage(dt, "geluForward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    geluForwardKernel<T>
        <<<gridFor(n), kThreads, 0, stream_>>>(static_cast<T*>(out), static_cast<const T*>(inp), n);
    DS_CUDA_LAUNCHED(geluForwardKernel);
  });
}

void CudaOps::geluBackward(void* dinp, const void* inp, const void* dout, size_t n, DType dt) {
  dispatchStorage(dt, "geluBackward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    geluBackwardKernel<T><<<gridFor(n), kThreads, 0, stream_>>>(
        static_cast<T*>(dinp), static_cast<const T*>(inp), static_cast<const T*>(dout), n);
    DS_CUDA_LAUNCHED(geluBackwardKernel);
  });
}

void CudaOps::residualForward(void* out, const void* a, const void* b, size_t n, DType dt) {
  dispatchStorage(dt, "residualForward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    residualForwardKernel<T><<<gridFor(n), kThreads, 0, stream_>>>(
        static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), n);
    DS_CUDA_LAUNCHED(residualForwardKernel);
  });
}

void CudaOps::residualBackward(void* da, void* db, const void* dout, size_t n, DType dt) {
  dispatchStorage(dt, "residualBackward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    residualBackwardKernel<T><<<gridFor(n), kThreads, 0, stream_>>>(
        static_cast<T*>(da), static_cast<T*>(db), static_cast<const T*>(dout), n);
    DS_CUDA_LAUNCHED(residualBackwardKernel);
  });
}

}  // namespace ds::runtime::cuda
