// CudaOps' token + position embedding (llm.c's encoder) for fp32 and bf16 activations:
// out[b,t,:] = wte[tokens[b,t]] + wpe[t]; backward adds into fp32 dwte (atomicAdd: rows of a
// repeated token collide) and dwpe (one thread per (t, c), summing b in order). Not range-checked:
// tokens are in range (callers check). Forward moves 128-bit packs where C and the pointers allow.
// Invariant: backward ACCUMULATES.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/pack_io.cuh"
#include "runtime/tensor/math/fp16_math.h"  // and bf16_math.h

namespace ds::runtime::cuda {
namespace {

// W elements per access (C % W == 0 and aligned rows: 128-bit packs; else W = 1); n = B*T*C / W.
template <class T, int W>
__global__ void encoderForwardKernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                     int T_, int C, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t p = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; p < n; p += step) {
    const size_t i = p * W;
    const size_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T_);
    const size_t tok = static_cast<size_t>(tokens[bt]);
    float x[W], y[W];
    loadPack<T, W>(wte + tok * C + c, x);
    loadPack<T, W>(wpe + static_cast<size_t>(t) * C + c, y);
#pragma unroll
    for (int k = 0; k < W; ++k) x[k] += y[k];
    storePack<T, W>(out + i, x);
  }
}

template <class T>
__global__ void encoderBackwardWteKernel(float* dwte, const T* dout, const int32_t* tokens, int C,
                                         size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    const size_t bt = i / C;
    const int c = static_cast<int>(i % C);
    atomicAdd(dwte + static_cast<size_t>(tokens[bt]) * C + c, math::loadF32(dout[i]));
  }
}

// One thread per (t, c) of dwpe [T, C]; sums the B rows in order.
template <class T>
__global__ void encoderBackwardWpeKernel(float* dwpe, const T* dout, int B, int T_, int C) {
  const size_t tc = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t TC = static_cast<size_t>(T_) * C;
  if (tc >= TC) return;
  float acc = 0.f;
  for (int b = 0; b < B; ++b) acc += math::loadF32(dout[static_cast<size_t>(b) * TC + tc]);
  dwpe[tc] += acc;
}

}  // namespace

void CudaOps::encoderForward(void* out, const int32_t* tokens, const void* wte, const void* wpe,
                             int B, int T, int C, DType dt) {
  dispatchStorage(dt, "encoderForward", [&](auto tag) {
    using S = decltype(tag);
    const size_t n = static_cast<size_t>(B) * T * C;
    if (n == 0) return;
    auto* o = static_cast<S*>(out);
    const auto *e = static_cast<const S*>(wte), *p = static_cast<const S*>(wpe);
    constexpr int W = kPack16<S>;
    if (C % W == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe))
      encoderForwardKernel<S, W>
          <<<gridFor(n / W), kThreads, 0, stream_>>>(o, tokens, e, p, T, C, n / W);
    else encoderForwardKernel<S, 1><<<gridFor(n), kThreads, 0, stream_>>>(o, tokens, e, p, T, C, n);
    DS_CUDA_LAUNCHED(encoderForwardKernel);
  });
}

void CudaOps::encoderBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens,
                              int B, int T, int C, DType dt) {
  dispatchStorage(dt, "encoderBackward", [&](auto tag) {
    using S = decltype(tag);
    const size_t n = static_cast<size_t>(B) * T * C;
    if (n == 0) return;
    if (dwte != nullptr) {
      encoderBackwardWteKernel<S>
          <<<gridFor(n), kThreads, 0, stream_>>>(dwte, static_cast<const S*>(dout), tokens, C, n);
      DS_CUDA_LAUNCHED(encoderBackwardWteKernel);
    }
    if (dwpe != nullptr) {
      const size_t tc = static_cast<size_t>(T) * C;
      const unsigned blocks = static_cast<unsigned>((tc + kThreads - 1) / kThreads);
      encoderBackwardWpeKernel<S>
          <<<blocks, kThreads, 0, stream_>>>(dwpe, static_cast<const S*>(dout), B, T, C);
      DS_CUDA_LAUNCHED(encoderBackwardWpeKernel);
    }
  });
}

}  // namespace ds::runtime::cuda
