// GPT-2's tanh GELU and its derivative, one element at a time, with the library tanh: the CUDA
// kernel's formula (runtime/tensor/cuda/elementwise_kernels.cu) and the reference the CPU's
// vectorised kernels (runtime/tensor/gelu_kernels.h, an exp-based form) are tested against.
// On the device tanhf may differ from the host's by an ulp or so.
#pragma once

#include <cmath>

#include "runtime/tensor/math/hd.h"

namespace ds::runtime::math {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)

DS_HD inline float tanhF32(float x) {
#ifdef __CUDA_ARCH__
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

DS_HD inline float geluF32(float x) {
  float cube = 0.044715f * x * x * x;
  return 0.5f * x * (1.0f + tanhF32(kGeluScale * (x + cube)));
}

// d gelu(x) / dx.
DS_HD inline float geluGradF32(float x) {
  float cube = 0.044715f * x * x * x;
  float arg = kGeluScale * (x + cube);
  float th = tanhF32(arg);
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace ds::runtime::math
