// CudaOps' token + position embedding (llm.c's encoder) for fp32 and bf16 activations:
// out[b,t,:] = wte[tokens[b,t]] + wpe[t]; backward adds into fp32 dwte (atomicAdd: rows of a
// repeated token collide) and dwpe (one thread per (t, c), summing b in order). Not range-checked:
// tokens are in range (callers check). Invariant: backward ACCUMULATES.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/math/bf16_math.h"

namespace ds::runtime::cuda {
namespace {

template <class T>
__global__ void encoderForwardKernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                     int T_, int C, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * kThreads;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    const size_t bt = i / C;
    const int c = static_cast<int>(i % C);
    const int t = static_cast<int>(bt % T_);
    const size_t tok = static_cast<size_t>(tokens[bt]);
    out[i] = math::storeAs<T>(math::loadF32(wte[tok * C + c]) +
                              math::loadF32(wpe[static_cast<size_t>(t) * C + c]));
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
    encoderForwardKernel<S><<<gridFor(n), kThreads, 0, stream_>>>(
        static_cast<S*>(out), tokens, static_cast<const S*>(wte), static_cast<const S*>(wpe), T, C,
        n);
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
