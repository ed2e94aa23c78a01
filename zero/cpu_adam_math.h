// The per-element optimizer arithmetic of cpu_adam, written once (internal to zero/): Adam/AdamW,
// SGD and the 16-bit copy as templates over a lane type L (float here in ScalarLanes; __m256 and
// __m512 in the AVX2 and AVX-512 files), so every ISA performs the same sequence of fp32
// mul/fma/sqrt/div per element and the results are bit-identical.
// Not a public API (use zero/cpu_adam.h). Everything here has internal linkage and the ISA files
// include it after their target pragma, so each translation unit compiles its own copy for its
// own target and no copy built for AVX-512 can be picked by the linker for generic code.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zero/cpu_adam_kernels.h"

namespace ds::zero::kernels {
namespace {  // NOLINT(google-build-namespaces,cert-dcl59-cpp): one copy per ISA file, see above

inline uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline uint16_t fp16Bits(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// One fp32 lane: the scalar path, and the tail of every vector path. fmaf so that scalar and
// SIMD round alike.
struct ScalarLanes {
  using V = float;
  static constexpr size_t kWidth = 1;
  static V load(const float* src) { return *src; }
  static void store(float* dst, V x) { *dst = x; }
  static V set(float x) { return x; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return std::fmaf(a, b, c); }  // a*b + c, one rounding
  static V sqrt(V a) { return std::sqrt(a); }
  static V div(V a, V b) { return a / b; }
  // kind: 1 bf16, 2 fp16 (round to nearest even, NaN kept).
  static void store16(uint16_t* dst, V x, int kind) {
    if (kind == 1) *dst = bf16Bits(x);
    else if (kind == 2) *dst = fp16Bits(x);
  }
};

// AdamCoeffs broadcast to lanes, once per call.
template <class L>
struct AdamLanes {
  using V = typename L::V;
  explicit AdamLanes(const AdamCoeffs& c)
      : beta1(L::set(c.beta1)),
        beta2(L::set(c.beta2)),
        oneMinusBeta1(L::set(c.oneMinusBeta1)),
        oneMinusBeta2(L::set(c.oneMinusBeta2)),
        eps(L::set(c.eps)),
        stepSize(L::set(c.stepSize)),
        bc2RsqrtInv(L::set(c.bc2RsqrtInv)),
        l2Decay(L::set(c.l2Decay)),
        decoupled(L::set(c.decoupled)),
        gradScale(L::set(c.gradScale)) {}
  V beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, stepSize, bc2RsqrtInv, l2Decay, decoupled,
      gradScale;
};

// Adam/AdamW on the L::kWidth elements at i: the definition of the update (zero.md §4). Always
// inlined into the kernels' loops (a call per element made the scalar path 2x slower).
template <class L>
[[gnu::always_inline]] inline void adamAt(const AdamCoeffs& c, const AdamLanes<L>& k, float* p,
                                          const float* g, float* m, float* v, size_t i,
                                          uint16_t* out16, int kind) {
  using V = typename L::V;
  V grad = L::mul(L::load(g + i), k.gradScale);
  V param = L::load(p + i);
  if (c.l2Mode) grad = L::fma(param, k.l2Decay, grad);
  const V mom = L::fma(grad, k.oneMinusBeta1, L::mul(L::load(m + i), k.beta1));
  const V var = L::fma(L::mul(grad, grad), k.oneMinusBeta2, L::mul(L::load(v + i), k.beta2));
  const V denom = L::fma(L::sqrt(var), k.bc2RsqrtInv, k.eps);
  const V update = L::div(mom, denom);
  if (c.decoupledOn) param = L::fma(param, k.decoupled, param);
  param = L::fma(update, k.stepSize, param);
  L::store(p + i, param);
  L::store(m + i, mom);
  L::store(v + i, var);
  if (kind) L::store16(out16 + i, param, kind);
}

// SgdCoeffs broadcast to lanes, once per call.
template <class L>
struct SgdLanes {
  using V = typename L::V;
  explicit SgdLanes(const SgdCoeffs& c)
      : negLr(L::set(c.negLr)),
        momentum(L::set(c.momentum)),
        weightDecay(L::set(c.weightDecay)),
        gradScale(L::set(c.gradScale)) {}
  V negLr, momentum, weightDecay, gradScale;
};

// SGD with momentum on the L::kWidth elements at i.
template <class L>
[[gnu::always_inline]] inline void sgdAt(const SgdCoeffs& c, const SgdLanes<L>& k, float* p,
                                         const float* g, float* buf, size_t i, uint16_t* out16,
                                         int kind) {
  using V = typename L::V;
  V grad = L::mul(L::load(g + i), k.gradScale);
  V param = L::load(p + i);
  if (c.decay) grad = L::fma(param, k.weightDecay, grad);
  if (c.useMomentum) {
    grad = L::fma(L::load(buf + i), k.momentum, grad);
    L::store(buf + i, grad);
  }
  param = L::fma(grad, k.negLr, param);
  L::store(p + i, param);
  if (kind) L::store16(out16 + i, param, kind);
}

// The kernels: whole vectors of L, then the tail one lane at a time (the same arithmetic).
template <class L>
void adamKernel(const AdamCoeffs& c, float* p, const float* g, float* m, float* v, size_t n,
                uint16_t* out16, int kind) {
  const AdamLanes<L> lanes(c);
  const AdamLanes<ScalarLanes> one(c);
  size_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) adamAt<L>(c, lanes, p, g, m, v, i, out16, kind);
  for (; i < n; ++i) adamAt<ScalarLanes>(c, one, p, g, m, v, i, out16, kind);
}

template <class L>
void sgdKernel(const SgdCoeffs& c, float* p, const float* g, float* buf, size_t n, uint16_t* out16,
               int kind) {
  const SgdLanes<L> lanes(c);
  const SgdLanes<ScalarLanes> one(c);
  size_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) sgdAt<L>(c, lanes, p, g, buf, i, out16, kind);
  for (; i < n; ++i) sgdAt<ScalarLanes>(c, one, p, g, buf, i, out16, kind);
}

template <class L>
void to16Kernel(const float* src, uint16_t* dst, size_t n, int kind) {
  size_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) L::store16(dst + i, L::load(src + i), kind);
  for (; i < n; ++i) ScalarLanes::store16(dst + i, src[i], kind);
}

}  // namespace
}  // namespace ds::zero::kernels
