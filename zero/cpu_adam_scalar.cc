// Scalar reference kernels of cpu_adam (the definition every SIMD path is tested against).
#include "zero/cpu_adam_scalar_inl.h"

namespace ds::zero::kernels {

void adamScalar(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t n, uint16_t* out16, int out16Kind) {
  for (size_t i = 0; i < n; ++i)
    adamOne(coeffs, params, grads, expAvg, expAvgSq, i, out16, out16Kind);
}

void sgdScalar(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t n,
               uint16_t* out16, int out16Kind) {
  for (size_t i = 0; i < n; ++i) sgdOne(coeffs, params, grads, buf, i, out16, out16Kind);
}

void to16Scalar(const float* src, uint16_t* dst, size_t n, int kind) {
  for (size_t i = 0; i < n; ++i) store16(dst, kind, i, src[i]);
}

}  // namespace ds::zero::kernels
