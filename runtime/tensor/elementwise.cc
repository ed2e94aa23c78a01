// GELU and residual kernels (see elementwise.h).
// The per-element formulas are runtime/tensor/math/gelu_math.h, shared with the CUDA kernels.
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/math/gelu_math.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {

void geluForward(float* out, const float* inp, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) out[i] = math::geluF32(inp[i]);
}

void geluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) dinp[i] += math::geluGradF32(inp[i]) * dout[i];
}

void residualForward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residualBackward(float* da, float* db, const float* dout, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace ds::runtime
