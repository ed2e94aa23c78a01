// GELU and residual kernels (see elementwise.h).
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/threads.h"

#include <cmath>

namespace ds::runtime {
namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
}

void geluForward(float* out, const float* inp, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
  }
}

void geluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    float arg = kGeluScale * (x + cube);
    float th = std::tanh(arg);
    float sech2 = 1.0f - th * th;
    float grad =
        0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += grad * dout[i];
  }
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
