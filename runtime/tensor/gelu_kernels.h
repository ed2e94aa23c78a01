// Internal to elementwise.cc: GPT-2's tanh GELU over a contiguous range, one kernel per ISA
// (portable C++, AVX2 + FMA, AVX-512), plus the per-element portable formula they share. Not for
// callers outside runtime/tensor; the vector kernels carry target attributes and run only after
// the CPU check (geluIsaSupported). The AVX2 and AVX-512 kernels run the same operations per lane
// (FMA, a true division): their results are equal bit for bit.
//
// The formula. With u = sqrt(2/pi) (x + 0.044715 x^3) and s = sigmoid(2u) = (1 + tanh u) / 2:
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// evaluated through e = exp(-2|u|) in [0, 1] (never overflows): s = (x >= 0 ? 1 : e) / (1 + e)
// and s (1 - s) = e / (1 + e)^2. exp is a degree-7 polynomial on the reduced argument
// r = t - n ln2, |r| <= ln2 / 2, times 2^n built in the exponent bits; t below -87.3 gives e = 0
// (so n >= -126 and 2^n stays normal). Invariants: the relative error against the exact formula
// is a few ulp (tests/runtime/tensor/gelu_test.cc states the bound against libm's tanhf version,
// runtime/tensor/math/gelu_math.h); NaN in gives NaN out; gelu(+inf) = +inf and gelu(-inf) = NaN,
// gelu'(+-inf) = NaN, as the libm version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/tensor/exp_neg.h"

namespace ds::runtime::detail {

inline constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluKc = 0.7978845608028654f * 0.044715f;
inline constexpr float kGeluC3 = 3.0f * 0.044715f;
// e = exp(-2|u|) of x.
inline float geluE(float x) {
  const float u = x * (kGeluKc * (x * x) + kGeluK);
  return expNeg(-2.0f * (u < 0.0f ? -u : u));
}

inline float geluFast(float x) {
  const float e = geluE(x);
  return x * ((x >= 0.0f ? 1.0f : e) / (1.0f + e));
}

inline float geluGradFast(float x) {
  const float e = geluE(x);
  const float rd = 1.0f / (1.0f + e);
  const float s = (x >= 0.0f ? 1.0f : e) * rd;
  const float q = e * rd * rd;
  // x first: at |u| = inf (|x| > ~1e13) q = 0 and the product is 0 while x^2 is finite.
  return s + x * q * (2.0f * kGeluK) * (kGeluC3 * (x * x) + 1.0f);
}

// out[i] = gelu(inp[i] + bias[i]) for i < n; bias may be null (then + 0 is skipped); pre, when
// not null, receives inp[i] + bias[i] (pre may alias inp, out may alias inp).
void geluForwardPortable(float* out, float* pre, const float* inp, const float* bias, size_t n);
void geluForwardAvx2(float* out, float* pre, const float* inp, const float* bias, size_t n);
void geluForwardAvx512(float* out, float* pre, const float* inp, const float* bias, size_t n);
// dinp[i] = (accumulate ? dinp[i] : 0) + gelu'(inp[i]) * dout[i] for i < n.
void geluBackwardPortable(float* dinp, const float* inp, const float* dout, size_t n,
                          bool accumulate);
void geluBackwardAvx2(float* dinp, const float* inp, const float* dout, size_t n, bool accumulate);
void geluBackwardAvx512(float* dinp, const float* inp, const float* dout, size_t n,
                        bool accumulate);

}  // namespace ds::runtime::detail
