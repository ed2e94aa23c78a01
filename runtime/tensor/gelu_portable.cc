// Portable GELU kernels (see gelu_kernels.h): the per-element formula in plain C++, for CPUs
// without AVX-512 (and the reference the AVX-512 kernels are tested against).
#include "runtime/tensor/gelu_kernels.h"

namespace ds::runtime::detail {

void geluForwardPortable(float* out, float* pre, const float* inp, const float* bias, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = bias != nullptr ? inp[i] + bias[i] : inp[i];
    if (pre != nullptr) pre[i] = x;
    out[i] = geluFast(x);
  }
}

void geluBackwardPortable(float* dinp, const float* inp, const float* dout, size_t n,
                          bool accumulate) {
  for (size_t i = 0; i < n; ++i) {
    // + 0.0f when writing: the bits of accumulating into a zeroed buffer (-0 becomes +0).
    const float base = accumulate ? dinp[i] : 0.0f;
    dinp[i] = base + geluGradFast(inp[i]) * dout[i];
  }
}

}  // namespace ds::runtime::detail
