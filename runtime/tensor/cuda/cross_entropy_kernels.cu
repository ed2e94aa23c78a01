// CudaOps softmax cross-entropy over rows of logits[N, V] (row stride ld): one block per row.
// Forward reads each logit once (an online fp32 max / sum of exp per thread, merged across the
// block) and writes the per-row loss and log-sum-exp; the logits stay. Backward reads each logit
// once and writes dlogits = (exp(x - lse) - onehot) * scale in place. Rows move in 128-bit packs
// when ld and the base allow, else element by element (same code, W = 1).
// Invariant: arithmetic is fp32 whatever the storage type; the loss never takes log of p.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "runtime/tensor/cuda/kernels.h"
#include "runtime/tensor/cuda/pack_io.cuh"

#include <cmath>
#include <cstdint>
#include <string>

namespace ds::runtime::cuda {
namespace {

constexpr int kCeThreads = 512;
constexpr int kCeUnroll = 4;  // packs in flight per thread
constexpr float kLog2e = 1.4426950408889634f;

// Merges the softmax state (m2, s2) into (m, s): s is a sum of exp(x - m).
__device__ __forceinline__ void mergeState(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mNew = fmaxf(m, m2);
  s = s * exp2f((m - mNew) * kLog2e) + s2 * exp2f((m2 - mNew) * kLog2e);
  m = mNew;
}

// Folds W logits (those with column < V) into (m, s).
template <int W>
__device__ __forceinline__ void foldPack(float& m, float& s, const float (&x)[W], int col, int V) {
  float pm = -INFINITY;
#pragma unroll
  for (int i = 0; i < W; ++i)
    if (col + i < V) pm = fmaxf(pm, x[i]);
  if (pm == -INFINITY) return;  // nothing finite yet: adds nothing
  if (pm > m) {
    s = m == -INFINITY ? 0.f : s * exp2f((m - pm) * kLog2e);
    m = pm;
  }
  const float mL = m * kLog2e;
#pragma unroll
  for (int i = 0; i < W; ++i)
    if (col + i < V) s += exp2f(fmaf(x[i], kLog2e, -mL));
}

// Grid N, block kCeThreads; W elements per access (ld % W == 0, rows aligned to W elements).
template <class E, int W>
__global__ void __launch_bounds__(kCeThreads)
    crossEntropyForwardKernel(const E* logits, float* losses, float* lse, const int32_t* targets,
                              int V, int ld) {
  __shared__ float sm[kCeThreads / 32], ss[kCeThreads / 32];
  const E* row = logits + static_cast<size_t>(blockIdx.x) * ld;
  const int packs = (V + W - 1) / W;  // ends at or before ld since ld % W == 0
  float m = -INFINITY, s = 0.f;
  for (int p0 = threadIdx.x; p0 < packs; p0 += kCeThreads * kCeUnroll) {
    float x[kCeUnroll][W];
#pragma unroll
    for (int u = 0; u < kCeUnroll; ++u) {
      const int p = p0 + u * kCeThreads;
      if (p < packs) loadPack<E, W>(row + static_cast<size_t>(p) * W, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kCeUnroll; ++u) {
      const int p = p0 + u * kCeThreads;
      if (p < packs) foldPack<W>(m, s, x[u], p * W, V);
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
  if (threadIdx.x != 0) return;
  m = -INFINITY;
  s = 0.f;
  for (int w = 0; w < kCeThreads / 32; ++w) mergeState(m, s, sm[w], ss[w]);  // fixed order
  const float logS = logf(s);
  const int target = targets[blockIdx.x];
  lse[blockIdx.x] = m + logS;
  losses[blockIdx.x] = target >= 0 ? logS - (loadF(row + target) - m) : 0.f;
}

// Grid N, block kCeThreads: d = exp(x - lse) * scale, minus scale at the target; zeros where
// target < 0 and in the padding columns [V, ld). Two packs in flight per thread (both loaded
// before either is stored).
template <class E, int W>
__global__ void __launch_bounds__(kCeThreads)
    crossEntropyBackwardKernel(E* __restrict__ logits, const float* __restrict__ lse,
                               const int32_t* __restrict__ targets, int V, int ld, float scale) {
  constexpr int kInFlight = 2;
  E* row = logits + static_cast<size_t>(blockIdx.x) * ld;
  const int target = targets[blockIdx.x];
  const float lseL = target >= 0 ? lse[blockIdx.x] * kLog2e : 0.f;
  const int packs = ld / W;
  for (int p0 = threadIdx.x; p0 < packs; p0 += kCeThreads * kInFlight) {
    float x[kInFlight][W];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int col = (p0 + u * kCeThreads) * W;
      if (target >= 0 && col < V && p0 + u * kCeThreads < packs) loadPack<E, W>(row + col, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int p = p0 + u * kCeThreads;
      if (p >= packs) break;
      const int col = p * W;
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const int j = col + i;
        x[u][i] = target >= 0 && j < V
                      ? exp2f(fmaf(x[u][i], kLog2e, -lseL)) * scale - (j == target ? scale : 0.f)
                      : 0.f;
      }
      storePack<E, W>(row + col, x[u]);
    }
  }
}

void checkArgs(int N, int V, int ld, DType dt, const char* what) {
  if (N < 0 || V <= 0 || ld < V)
    throw NotSupported(std::string(what) + ": bad shape N=" + std::to_string(N) +
                       " V=" + std::to_string(V) + " ld=" + std::to_string(ld));
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16)
    throw NotSupported(std::string(what) + ": dtype " + std::string(dtypeName(dt)) +
                       " (fp32, bf16 or fp16 only)");
}

// Calls f.template operator()<E, W>() with the widest pack the base pointer and stride allow.
template <class E, class F>
void withPack(const void* base, int ld, F&& f) {
  if (aligned16(base) && ld % kPack16<E> == 0) f.template operator()<E, kPack16<E>>();
  else f.template operator()<E, 1>();
}

template <class F>
void withTypeAndPack(DType dt, const void* base, int ld, F&& f) {
  if (dt == DType::kF32) withPack<float>(base, ld, f);
  else if (dt == DType::kF16) withPack<fp16>(base, ld, f);
  else withPack<bf16>(base, ld, f);
}

}  // namespace

void CudaOps::crossEntropyForward(const void* logits, float* losses, float* lse,
                                  const int32_t* targets, int N, int V, int ld, DType dt) {
  checkArgs(N, V, ld, dt, "crossEntropyForward");
  if (N == 0) return;
  withTypeAndPack(dt, logits, ld, [&]<class E, int W>() {
    crossEntropyForwardKernel<E, W>
        <<<N, kCeThreads, 0, stream_>>>(static_cast<const E*>(logits), losses, lse, targets, V, ld);
  });
  DS_CUDA_LAUNCHED("crossEntropyForwardKernel");
}

void CudaOps::crossEntropyBackward(void* logitsToDlogits, const float* lse, const int32_t* targets,
                                   int N, int V, int ld, float scale, DType dt) {
  checkArgs(N, V, ld, dt, "crossEntropyBackward");
  if (N == 0) return;
  withTypeAndPack(dt, logitsToDlogits, ld, [&]<class E, int W>() {
    crossEntropyBackwardKernel<E, W><<<N, kCeThreads, 0, stream_>>>(
        static_cast<E*>(logitsToDlogits), lse, targets, V, ld, scale);
  });
  DS_CUDA_LAUNCHED("crossEntropyBackwardKernel");
}

}  // namespace ds::runtime::cuda
