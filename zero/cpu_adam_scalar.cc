// Scalar kernels of cpu_adam: cpu_adam_math.h on one fp32 lane (the reference every SIMD path is
// tested against).
#include "zero/cpu_adam_math.h"

namespace ds::zero::kernels {

void adamScalar(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t count, uint16_t* out16, int out16Kind) {
  adamKernel<ScalarLanes>(coeffs, params, grads, expAvg, expAvgSq, count, out16, out16Kind);
}

void sgdScalar(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
               uint16_t* out16, int out16Kind) {
  sgdKernel<ScalarLanes>(coeffs, params, grads, buf, count, out16, out16Kind);
}

void to16Scalar(const float* src, uint16_t* dst, size_t count, int kind) {
  to16Kernel<ScalarLanes>(src, dst, count, kind);
}

}  // namespace ds::zero::kernels
