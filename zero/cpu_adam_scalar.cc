// Scalar kernels of cpu_adam: cpu_adam_math.h on one fp32 lane (the reference every SIMD path is
// tested against).
#include "zero/cpu_adam_math.h"

namespace ds::zero::kernels {

void adamScalar(const AdamCoeffs& c, float* p, const float* g, float* m, float* v, size_t n,
                uint16_t* out16, int out16Kind) {
  adamKernel<ScalarLanes>(c, p, g, m, v, n, out16, out16Kind);
}

void sgdScalar(const SgdCoeffs& c, float* p, const float* g, float* buf, size_t n, uint16_t* out16,
               int out16Kind) {
  sgdKernel<ScalarLanes>(c, p, g, buf, n, out16, out16Kind);
}

void to16Scalar(const float* src, uint16_t* dst, size_t n, int kind) {
  to16Kernel<ScalarLanes>(src, dst, n, kind);
}

}  // namespace ds::zero::kernels
