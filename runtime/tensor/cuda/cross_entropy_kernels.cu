// CudaOps softmax cross-entropy over rows of logits[N, V]: one block per row, an online fp32
// (max, sum of exp) pass, then probabilities written in place. Backward rewrites probabilities
// as (p - onehot) * scale. Not a mean: losses stay per row (0 where the target is negative).
// Invariant: arithmetic is fp32 whatever the storage type; the loss never takes log of p.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/element_io.cuh"

#include <cmath>
#include <cstdint>
#include <string>

namespace ds::runtime::cuda {
namespace {

constexpr int kThreads = 512;

// Merges the softmax state (m2, s2) into (m, s): s is a sum of exp(x - m).
__device__ __forceinline__ void mergeState(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mNew = fmaxf(m, m2);
  s = s * expf(m - mNew) + s2 * expf(m2 - mNew);
  m = mNew;
}

// Grid N, block kThreads. logits become probabilities; losses[n] = log(sum) - (x_t - max).
template <class E>
__global__ void __launch_bounds__(kThreads)
    crossEntropyForwardKernel(E* logits, float* losses, const int32_t* targets, int V, int ld) {
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  E* row = logits + static_cast<size_t>(blockIdx.x) * ld;
  const int target = targets[blockIdx.x];
  // Read before any thread writes the row (the writes come after the block reduction).
  const float xt = target >= 0 ? loadF(row + target) : 0.f;
  float m = -INFINITY, s = 0.f;
  for (int j = threadIdx.x; j < V; j += kThreads) {
    const float x = loadF(row + j);
    if (x > m) {
      s = s * expf(m - x) + 1.f;  // expf(-inf) = 0 on the first element
      m = x;
    } else if (m > -INFINITY) {  // a -inf logit before any finite one adds nothing
      s += expf(x - m);
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    mergeState(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  m = -INFINITY;
  s = 0.f;
  for (int w = 0; w < kThreads / 32; ++w) mergeState(m, s, sm[w], ss[w]);  // same order in all
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < V; j += kThreads) storeF(row + j, expf(loadF(row + j) - m) * inv);
  if (threadIdx.x == 0) losses[blockIdx.x] = target >= 0 ? logf(s) - (xt - m) : 0.f;
}

// Grid N, block kThreads: d = p * scale, minus scale at the target; zeros where target < 0.
template <class E>
__global__ void __launch_bounds__(kThreads)
    crossEntropyBackwardKernel(E* probs, const int32_t* targets, int V, int ld, float scale) {
  E* row = probs + static_cast<size_t>(blockIdx.x) * ld;
  const int target = targets[blockIdx.x];
  for (int j = threadIdx.x; j < ld; j += kThreads) {
    float d = 0.f;
    if (target >= 0 && j < V) {
      d = loadF(row + j) * scale;
      if (j == target) d -= scale;
    }
    storeF(row + j, d);
  }
}

void checkArgs(int N, int V, int ld, DType dt, const char* what) {
  if (N < 0 || V <= 0 || ld < V)
    throw NotSupported(std::string(what) + ": bad shape N=" + std::to_string(N) +
                       " V=" + std::to_string(V) + " ld=" + std::to_string(ld));
  if (dt != DType::kF32 && dt != DType::kBF16)
    throw NotSupported(std::string(what) + ": dtype " + std::string(dtypeName(dt)) +
                       " (fp32 or bf16 only)");
}

}  // namespace

void CudaOps::crossEntropyForward(void* logitsToProbs, float* losses, const int32_t* targets, int N,
                                  int V, int ld, DType dt) {
  checkArgs(N, V, ld, dt, "crossEntropyForward");
  if (N == 0) return;
  if (dt == DType::kF32)
    crossEntropyForwardKernel<<<N, kThreads, 0, stream_>>>(static_cast<float*>(logitsToProbs),
                                                           losses, targets, V, ld);
  else
    crossEntropyForwardKernel<<<N, kThreads, 0, stream_>>>(static_cast<bf16*>(logitsToProbs),
                                                           losses, targets, V, ld);
  DS_CUDA_LAUNCHED("crossEntropyForwardKernel");
}

void CudaOps::crossEntropyBackward(void* probsToDlogits, const int32_t* targets, int N, int V,
                                   int ld, float scale, DType dt) {
  checkArgs(N, V, ld, dt, "crossEntropyBackward");
  if (N == 0) return;
  if (dt == DType::kF32)
    crossEntropyBackwardKernel<<<N, kThreads, 0, stream_>>>(static_cast<float*>(probsToDlogits),
                                                            targets, V, ld, scale);
  else
    crossEntropyBackwardKernel<<<N, kThreads, 0, stream_>>>(static_cast<bf16*>(probsToDlogits),
                                                            targets, V, ld, scale);
  DS_CUDA_LAUNCHED("crossEntropyBackwardKernel");
}

}  // namespace ds::runtime::cuda
