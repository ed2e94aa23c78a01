// The per-element optimizer math shared by every ISA path (internal to zero/). static inline on
// purpose: each ISA translation unit gets its own copy compiled for its target, so no COMDAT
// copy built with AVX-512 can leak into generic code. Uses fmaf so that scalar and SIMD paths
// perform identical roundings.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "zero/cpu_adam_kernels.h"

namespace ds::zero::kernels {

static inline uint16_t bf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

static inline uint16_t fp16Bits(float value) {
  _Float16 half = static_cast<_Float16>(value);
  uint16_t bits16;
  std::memcpy(&bits16, &half, 2);
  return bits16;
}

static inline void store16(uint16_t* out16, int kind, size_t index, float value) {
  if (kind == 1) out16[index] = bf16Bits(value);
  else if (kind == 2) out16[index] = fp16Bits(value);
}

static inline void adamOne(const AdamCoeffs& coeffs, float* params, const float* grads,
                           float* expAvg, float* expAvgSq, size_t index, uint16_t* out16,
                           int kind) {
  float grad = grads[index] * coeffs.gradScale;
  float param = params[index];
  if (coeffs.l2Mode) grad = std::fmaf(param, coeffs.l2Decay, grad);
  float mom = expAvg[index] * coeffs.beta1;
  mom = std::fmaf(grad, coeffs.oneMinusBeta1, mom);
  float var = expAvgSq[index] * coeffs.beta2;
  float gradSq = grad * grad;
  var = std::fmaf(gradSq, coeffs.oneMinusBeta2, var);
  float denom = std::sqrt(var);
  denom = std::fmaf(denom, coeffs.bc2RsqrtInv, coeffs.eps);
  float upd = mom / denom;
  if (coeffs.decoupledOn) param = std::fmaf(param, coeffs.decoupled, param);
  param = std::fmaf(upd, coeffs.stepSize, param);
  params[index] = param;
  expAvg[index] = mom;
  expAvgSq[index] = var;
  store16(out16, kind, index, param);
}

static inline void sgdOne(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf,
                          size_t index, uint16_t* out16, int kind) {
  float grad = grads[index] * coeffs.gradScale;
  float param = params[index];
  if (coeffs.decay) grad = std::fmaf(param, coeffs.weightDecay, grad);
  if (coeffs.useMomentum) {
    grad = std::fmaf(buf[index], coeffs.momentum, grad);
    buf[index] = grad;
  }
  param = std::fmaf(grad, coeffs.negLr, param);
  params[index] = param;
  store16(out16, kind, index, param);
}

}  // namespace ds::zero::kernels
