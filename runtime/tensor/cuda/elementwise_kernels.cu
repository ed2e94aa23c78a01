// CudaOps' pointwise layers: GELU (tanh form, runtime/tensor/math/gelu_math.h) and the residual
// add, forward and backward, plus GELU's in-place gradient (launchGeluGradScale), for fp32 and
// bf16 storage (fp32 arithmetic). 128-bit packs when every pointer is 16-byte aligned (the last
// n % W elements one by one), else element by element: the same arithmetic either way.
// Invariant: backward ACCUMULATES (dinp, da, db +=), one rounding per stored element.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/pack_io.cuh"
#include "runtime/tensor/math/gelu_math.h"

#include <initializer_list>

namespace ds::runtime::cuda {
namespace {

// i runs over the packs [0, n / W); then `tail` over the n % W leftover elements (first threads).
#define DS_PACK_LOOP(i, n, W)                                                              \
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < (n) / (W); \
       i += static_cast<size_t>(gridDim.x) * kThreads)
#define DS_PACK_TAIL(i, n, W)                                                                 \
  for (size_t i = (n) / (W) * (W) + static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; \
       i < (n); i += static_cast<size_t>(gridDim.x) * kThreads)

template <class T, int W>
__global__ void geluForwardKernel(T* out, const T* inp, size_t n) {
  DS_PACK_LOOP(p, n, W) {
    float x[W];
    loadPack<T, W>(inp + p * W, x);
#pragma unroll
    for (int k = 0; k < W; ++k) x[k] = math::geluF32(x[k]);
    storePack<T, W>(out + p * W, x);
  }
  DS_PACK_TAIL(i, n, W) { fromF32(out[i], math::geluF32(toF32(inp[i]))); }
}

template <class T, int W>
__global__ void geluBackwardKernel(T* dinp, const T* inp, const T* dout, size_t n) {
  DS_PACK_LOOP(p, n, W) {
    float x[W], d[W], g[W];
    loadPack<T, W>(inp + p * W, x);
    loadPack<T, W>(dout + p * W, d);
    loadPack<T, W>(dinp + p * W, g);
#pragma unroll
    for (int k = 0; k < W; ++k) g[k] += math::geluGradF32(x[k]) * d[k];
    storePack<T, W>(dinp + p * W, g);
  }
  DS_PACK_TAIL(i, n, W) {
    fromF32(dinp[i], toF32(dinp[i]) + math::geluGradF32(toF32(inp[i])) * toF32(dout[i]));
  }
}

template <class T, int W>
__global__ void geluGradScaleKernel(T* d, const T* pre, size_t n) {
  DS_PACK_LOOP(p, n, W) {
    float x[W], g[W];
    loadPack<T, W>(pre + p * W, x);
    loadPack<T, W>(d + p * W, g);
#pragma unroll
    for (int k = 0; k < W; ++k) g[k] = math::geluGradF32(x[k]) * g[k];
    storePack<T, W>(d + p * W, g);
  }
  DS_PACK_TAIL(i, n, W) { fromF32(d[i], math::geluGradF32(toF32(pre[i])) * toF32(d[i])); }
}

template <class T, int W>
__global__ void residualForwardKernel(T* out, const T* a, const T* b, size_t n) {
  DS_PACK_LOOP(p, n, W) {
    float x[W], y[W];
    loadPack<T, W>(a + p * W, x);
    loadPack<T, W>(b + p * W, y);
#pragma unroll
    for (int k = 0; k < W; ++k) x[k] += y[k];
    storePack<T, W>(out + p * W, x);
  }
  DS_PACK_TAIL(i, n, W) { fromF32(out[i], toF32(a[i]) + toF32(b[i])); }
}

template <class T, int W>
__global__ void residualBackwardKernel(T* da, T* db, const T* dout, size_t n) {
  DS_PACK_LOOP(p, n, W) {
    float d[W], g[W];
    loadPack<T, W>(dout + p * W, d);
    if (da != nullptr) {
      loadPack<T, W>(da + p * W, g);
#pragma unroll
      for (int k = 0; k < W; ++k) g[k] += d[k];
      storePack<T, W>(da + p * W, g);
    }
    if (db != nullptr) {
      loadPack<T, W>(db + p * W, g);
#pragma unroll
      for (int k = 0; k < W; ++k) g[k] += d[k];
      storePack<T, W>(db + p * W, g);
    }
  }
  DS_PACK_TAIL(i, n, W) {
    const float d = toF32(dout[i]);
    if (da != nullptr) fromF32(da[i], toF32(da[i]) + d);
    if (db != nullptr) fromF32(db[i], toF32(db[i]) + d);
  }
}

#undef DS_PACK_LOOP
#undef DS_PACK_TAIL

bool allAligned(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (p != nullptr && !aligned16(p)) return false;
  return true;
}

// Grid for W-element packs over n elements (at least one block for the tail).
unsigned gridForPacks(size_t n, int W) { return gridFor(n / W > 0 ? n / W : n); }

}  // namespace

// Launches kernel<T, W>: W = 16 bytes of T where `vec` (every pointer 16-byte aligned), else 1.
#define DS_LAUNCH_PACKED(kernel, n, vec, ...)                                    \
  do {                                                                           \
    if (vec) {                                                                   \
      constexpr int W = kPack16<T>;                                              \
      kernel<T, W><<<gridForPacks(n, W), kThreads, 0, stream>>>(__VA_ARGS__, n); \
    } else {                                                                     \
      kernel<T, 1><<<gridFor(n), kThreads, 0, stream>>>(__VA_ARGS__, n);         \
    }                                                                            \
    DS_CUDA_LAUNCHED(#kernel);                                                   \
  } while (0)

void launchGeluGradScale(void* d, const void* pre, size_t n, DType dt, cudaStream_t stream) {
  dispatchStorage(dt, "geluGradScale", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    DS_LAUNCH_PACKED(geluGradScaleKernel, n, allAligned({d, pre}), static_cast<T*>(d),
                     static_cast<const T*>(pre));
  });
}

void CudaOps::geluForward(void* out, const void* inp, size_t n, DType dt) {
  cudaStream_t stream = stream_;
  dispatchStorage(dt, "geluForward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    DS_LAUNCH_PACKED(geluForwardKernel, n, allAligned({out, inp}), static_cast<T*>(out),
                     static_cast<const T*>(inp));
  });
}

void CudaOps::geluBackward(void* dinp, const void* inp, const void* dout, size_t n, DType dt) {
  cudaStream_t stream = stream_;
  dispatchStorage(dt, "geluBackward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    DS_LAUNCH_PACKED(geluBackwardKernel, n, allAligned({dinp, inp, dout}), static_cast<T*>(dinp),
                     static_cast<const T*>(inp), static_cast<const T*>(dout));
  });
}

void CudaOps::residualForward(void* out, const void* a, const void* b, size_t n, DType dt) {
  cudaStream_t stream = stream_;
  dispatchStorage(dt, "residualForward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    DS_LAUNCH_PACKED(residualForwardKernel, n, allAligned({out, a, b}), static_cast<T*>(out),
                     static_cast<const T*>(a), static_cast<const T*>(b));
  });
}

void CudaOps::residualBackward(void* da, void* db, const void* dout, size_t n, DType dt) {
  cudaStream_t stream = stream_;
  dispatchStorage(dt, "residualBackward", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    DS_LAUNCH_PACKED(residualBackwardKernel, n, allAligned({da, db, dout}), static_cast<T*>(da),
                     static_cast<T*>(db), static_cast<const T*>(dout));
  });
}

#undef DS_LAUNCH_PACKED

}  // namespace ds::runtime::cuda
