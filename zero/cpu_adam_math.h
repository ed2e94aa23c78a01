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

inline uint16_t bf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline uint16_t fp16Bits(float value) {
  _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, 2);
  return bits;
}

// One fp32 lane: the scalar path, and the tail of every vector path. fmaf so that scalar and
// SIMD round alike.
struct ScalarLanes {
  using V = float;
  static constexpr size_t kWidth = 1;
  static V load(const float* src) { return *src; }
  static void store(float* dst, V value) { *dst = value; }
  static V set(float value) { return value; }
  static V mul(V lhs, V rhs) { return lhs * rhs; }
  // lhs*rhs + addend, one rounding
  static V fma(V lhs, V rhs, V addend) { return std::fmaf(lhs, rhs, addend); }
  static V sqrt(V value) { return std::sqrt(value); }
  static V div(V lhs, V rhs) { return lhs / rhs; }
  // kind: 1 bf16, 2 fp16 (round to nearest even, NaN kept).
  static void store16(uint16_t* dst, V value, int kind) {
    if (kind == 1) *dst = bf16Bits(value);
    else if (kind == 2) *dst = fp16Bits(value);
  }
};

// AdamCoeffs broadcast to lanes, once per call.
template <class L>
struct AdamLanes {
  using V = typename L::V;
  explicit AdamLanes(const AdamCoeffs& coeffs)
      : beta1(L::set(coeffs.beta1)),
        beta2(L::set(coeffs.beta2)),
        oneMinusBeta1(L::set(coeffs.oneMinusBeta1)),
        oneMinusBeta2(L::set(coeffs.oneMinusBeta2)),
        eps(L::set(coeffs.eps)),
        stepSize(L::set(coeffs.stepSize)),
        bc2RsqrtInv(L::set(coeffs.bc2RsqrtInv)),
        l2Decay(L::set(coeffs.l2Decay)),
        decoupled(L::set(coeffs.decoupled)),
        gradScale(L::set(coeffs.gradScale)) {}
  V beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, stepSize, bc2RsqrtInv, l2Decay, decoupled,
      gradScale;
};

// Adam/AdamW on the L::kWidth elements at idx: the definition of the update (zero.md §4). Always
// inlined into the kernels' loops (a call per element made the scalar path 2x slower).
template <class L>
[[gnu::always_inline]] inline void adamAt(const AdamCoeffs& coeffs, const AdamLanes<L>& bcast,
                                          float* params, const float* grads, float* expAvg,
                                          float* expAvgSq, size_t idx, uint16_t* out16, int kind) {
  using V = typename L::V;
  V grad = L::mul(L::load(grads + idx), bcast.gradScale);
  V param = L::load(params + idx);
  if (coeffs.l2Mode) grad = L::fma(param, bcast.l2Decay, grad);
  const V mom = L::fma(grad, bcast.oneMinusBeta1, L::mul(L::load(expAvg + idx), bcast.beta1));
  const V var =
      L::fma(L::mul(grad, grad), bcast.oneMinusBeta2, L::mul(L::load(expAvgSq + idx), bcast.beta2));
  const V denom = L::fma(L::sqrt(var), bcast.bc2RsqrtInv, bcast.eps);
  const V update = L::div(mom, denom);
  if (coeffs.decoupledOn) param = L::fma(param, bcast.decoupled, param);
  param = L::fma(update, bcast.stepSize, param);
  L::store(params + idx, param);
  L::store(expAvg + idx, mom);
  L::store(expAvgSq + idx, var);
  if (kind) L::store16(out16 + idx, param, kind);
}

// SgdCoeffs broadcast to lanes, once per call.
template <class L>
struct SgdLanes {
  using V = typename L::V;
  explicit SgdLanes(const SgdCoeffs& coeffs)
      : negLr(L::set(coeffs.negLr)),
        momentum(L::set(coeffs.momentum)),
        weightDecay(L::set(coeffs.weightDecay)),
        gradScale(L::set(coeffs.gradScale)) {}
  V negLr, momentum, weightDecay, gradScale;
};

// SGD with momentum on the L::kWidth elements at idx.
template <class L>
[[gnu::always_inline]] inline void sgdAt(const SgdCoeffs& coeffs, const SgdLanes<L>& bcast,
                                         float* params, const float* grads, float* buf, size_t idx,
                                         uint16_t* out16, int kind) {
  using V = typename L::V;
  V grad = L::mul(L::load(grads + idx), bcast.gradScale);
  V param = L::load(params + idx);
  if (coeffs.decay) grad = L::fma(param, bcast.weightDecay, grad);
  if (coeffs.useMomentum) {
    grad = L::fma(L::load(buf + idx), bcast.momentum, grad);
    L::store(buf + idx, grad);
  }
  param = L::fma(grad, bcast.negLr, param);
  L::store(params + idx, param);
  if (kind) L::store16(out16 + idx, param, kind);
}

// The kernels: whole vectors of L, then the tail one lane at a time (the same arithmetic).
template <class L>
void adamKernel(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t count, uint16_t* out16, int kind) {
  const AdamLanes<L> lanes(coeffs);
  const AdamLanes<ScalarLanes> one(coeffs);
  size_t idx = 0;
  for (; idx + L::kWidth <= count; idx += L::kWidth)
    adamAt<L>(coeffs, lanes, params, grads, expAvg, expAvgSq, idx, out16, kind);
  for (; idx < count; ++idx)
    adamAt<ScalarLanes>(coeffs, one, params, grads, expAvg, expAvgSq, idx, out16, kind);
}

template <class L>
void sgdKernel(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
               uint16_t* out16, int kind) {
  const SgdLanes<L> lanes(coeffs);
  const SgdLanes<ScalarLanes> one(coeffs);
  size_t idx = 0;
  for (; idx + L::kWidth <= count; idx += L::kWidth)
    sgdAt<L>(coeffs, lanes, params, grads, buf, idx, out16, kind);
  for (; idx < count; ++idx) sgdAt<ScalarLanes>(coeffs, one, params, grads, buf, idx, out16, kind);
}

template <class L>
void to16Kernel(const float* src, uint16_t* dst, size_t count, int kind) {
  size_t idx = 0;
  for (; idx + L::kWidth <= count; idx += L::kWidth)
    L::store16(dst + idx, L::load(src + idx), kind);
  for (; idx < count; ++idx) ScalarLanes::store16(dst + idx, src[idx], kind);
}

}  // namespace
}  // namespace ds::zero::kernels
