// LayerNorm forward/backward (see layernorm.h). The row reductions are `omp simd` reductions:
// summed in vector lanes (the baseline ISA's width), in a fixed order for a given build, so the
// results do not depend on the thread count; they differ from a sequential sum in the last bits.
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/threads.h"

#include <cmath>
#include <cstddef>

namespace ds::runtime {

void layernormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int N, int C) {
  constexpr float kEps = 1e-5f;
#pragma omp parallel for schedule(static) if (long(N) * C >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float m = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int i = 0; i < C; ++i) m += x[i];
    m /= static_cast<float>(C);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    v /= static_cast<float>(C);
    float s = 1.0f / std::sqrt(v + kEps);
    float* o = out + static_cast<size_t>(n) * C;
#pragma omp simd
    for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       int N, int C) {
#pragma omp parallel for schedule(static) if (long(N) * C >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    const float* dy = dout + static_cast<size_t>(n) * C;
    float* dx = dinp + static_cast<size_t>(n) * C;
    float m = mean[n], s = rstd[n];
    float dnormMean = 0.0f, dnormNormMean = 0.0f;
#pragma omp simd reduction(+ : dnormMean, dnormNormMean)
    for (int i = 0; i < C; ++i) {
      float norm = (x[i] - m) * s;
      float dnorm = weight[i] * dy[i];
      dnormMean += dnorm;
      dnormNormMean += dnorm * norm;
    }
    dnormMean /= static_cast<float>(C);
    dnormNormMean /= static_cast<float>(C);
#pragma omp simd
    for (int i = 0; i < C; ++i) {
      float norm = (x[i] - m) * s;
      float dnorm = weight[i] * dy[i];
      dx[i] += (dnorm - dnormMean - norm * dnormNormMean) * s;
    }
  }
  // Parameter grads: each thread owns channel chunks and walks all rows in order, so the sum
  // order per channel is fixed (row 0, 1, ...) whatever the thread count.
  constexpr int kChunk = 64;
  int chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (long(N) * C >= kMinParallelWork)
  for (int c = 0; c < chunks; ++c) {
    int lo = c * kChunk, hi = lo + kChunk < C ? lo + kChunk : C;
    float dw[kChunk] = {}, db[kChunk] = {};
    for (int n = 0; n < N; ++n) {
      const float* x = inp + static_cast<size_t>(n) * C;
      const float* dy = dout + static_cast<size_t>(n) * C;
      float m = mean[n], s = rstd[n];
#pragma omp simd
      for (int i = lo; i < hi; ++i) {
        dw[i - lo] += (x[i] - m) * s * dy[i];
        db[i - lo] += dy[i];
      }
    }
    for (int i = lo; i < hi; ++i) {
      dweight[i] += dw[i - lo];
      dbias[i] += db[i - lo];
    }
  }
}

}  // namespace ds::runtime
