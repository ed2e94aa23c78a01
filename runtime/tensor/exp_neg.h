// exp(t) for t <= 0 in float, for the vectorised kernels (GELU, softmax rows): a degree-7 Taylor
// polynomial on r = t - n ln2 (|r| <= ln2 / 2, Cody-Waite split of ln2) times 2^n built in the
// exponent bits. t below kExpMin gives 0 (so n >= -126 and 2^n stays a normal number: where libm
// would return a subnormal, this returns 0). Relative error a few ulp (tests/runtime/tensor/
// exp_neg_test.cc). The scalar form here is the portable kernels'; exp_neg_avx512.h is the same
// per lane with FMA. Invariant: callers pass t <= 0 (a softmax's x - max, GELU's -2|u|).
#pragma once

#include <cstdint>
#include <cstring>

namespace ds::runtime::detail {

inline constexpr float kExpMin = -87.3f;  // exp below this: 0 (2^n would leave the normal range)
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 = hi + lo; hi's 9 low bits zero
inline constexpr float kLn2Lo = 1.428606765330187e-06f;
// Taylor coefficients of exp, 1/k! for k = 2..7 (1 and 1 are exact).
inline constexpr float kExpC2 = 0.5f, kExpC3 = 1.0f / 6, kExpC4 = 1.0f / 24, kExpC5 = 1.0f / 120,
                       kExpC6 = 1.0f / 720, kExpC7 = 1.0f / 5040;

// exp(t) for t <= 0 (NaN treated as kExpMin: callers carry a NaN on through their other
// operands). Plain multiply-adds (no fmaf: a library call where the baseline ISA has no FMA);
// n * kLn2Hi is exact (|n| <= 126).
inline float expNeg(float t) {
  const float tc = t > kExpMin ? t : kExpMin;
  const int32_t ni = -int32_t(0.5f - tc * kLog2e);  // round(tc log2 e), tc <= 0
  const float n = float(ni);
  const float r = (tc - n * kLn2Hi) - n * kLn2Lo;
  float p = kExpC7 * r + kExpC6;
  p = p * r + kExpC5;
  p = p * r + kExpC4;
  p = p * r + kExpC3;
  p = p * r + kExpC2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const uint32_t bits = uint32_t(ni + 127) << 23;
  float scale = 0;
  std::memcpy(&scale, &bits, sizeof(scale));
  return t < kExpMin ? 0.0f : p * scale;
}

}  // namespace ds::runtime::detail
