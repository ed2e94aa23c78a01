// Avx2 kernels of cpu_adam: 8 fp32 lanes, FMA, the same operation sequence as
// cpu_adam_scalar_inl.h (bit-identical results). Compiled for its target with a pragma, so only
// these functions use Avx2; callers reach them only after cpu_adam.cc checked the CPU.
#include <immintrin.h>

#include "zero/cpu_adam_scalar_inl.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace ds::zero::kernels {
namespace {

constexpr size_t kLanes = 8;

inline void store16v(uint16_t* dst, __m256 values, int kind) {
  if (kind == 1) {
    __m256i bits = _mm256_castps_si256(values);
    __m256i absu = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    rounded = _mm256_srli_epi32(rounded, 16);
    __m256i nanBits = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    rounded = _mm256_blendv_epi8(rounded, nanBits, nan);
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
  } else if (kind == 2) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                     _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VSET _mm256_set1_ps
#define VMUL _mm256_mul_ps
#define VFMA _mm256_fmadd_ps
#define VSQRT _mm256_sqrt_ps
#define VDIV _mm256_div_ps
using Vec = __m256;

}  // namespace

void adamAvx2(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
              float* expAvgSq, size_t n, uint16_t* out16, int out16Kind) {
  const Vec beta1 = VSET(coeffs.beta1), beta2 = VSET(coeffs.beta2),
            omb1 = VSET(coeffs.oneMinusBeta1), omb2 = VSET(coeffs.oneMinusBeta2),
            eps = VSET(coeffs.eps), step = VSET(coeffs.stepSize), bc2 = VSET(coeffs.bc2RsqrtInv),
            l2Decay = VSET(coeffs.l2Decay), dec = VSET(coeffs.decoupled),
            gradScale = VSET(coeffs.gradScale);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec grad = VMUL(VLOAD(grads + i), gradScale);
    Vec param = VLOAD(params + i);
    if (coeffs.l2Mode) grad = VFMA(param, l2Decay, grad);
    Vec mom = VFMA(grad, omb1, VMUL(VLOAD(expAvg + i), beta1));
    Vec var = VFMA(VMUL(grad, grad), omb2, VMUL(VLOAD(expAvgSq + i), beta2));
    Vec den = VFMA(VSQRT(var), bc2, eps);
    Vec upd = VDIV(mom, den);
    if (coeffs.decoupledOn) param = VFMA(param, dec, param);
    param = VFMA(upd, step, param);
    VSTORE(params + i, param);
    VSTORE(expAvg + i, mom);
    VSTORE(expAvgSq + i, var);
    if (out16Kind) store16v(out16 + i, param, out16Kind);
  }
  for (; i < n; ++i) adamOne(coeffs, params, grads, expAvg, expAvgSq, i, out16, out16Kind);
}

void sgdAvx2(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t n,
             uint16_t* out16, int out16Kind) {
  const Vec negLr = VSET(coeffs.negLr), momentum = VSET(coeffs.momentum),
            decay = VSET(coeffs.weightDecay), gradScale = VSET(coeffs.gradScale);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec grad = VMUL(VLOAD(grads + i), gradScale);
    Vec param = VLOAD(params + i);
    if (coeffs.decay) grad = VFMA(param, decay, grad);
    if (coeffs.useMomentum) {
      grad = VFMA(VLOAD(buf + i), momentum, grad);
      VSTORE(buf + i, grad);
    }
    param = VFMA(grad, negLr, param);
    VSTORE(params + i, param);
    if (out16Kind) store16v(out16 + i, param, out16Kind);
  }
  for (; i < n; ++i) sgdOne(coeffs, params, grads, buf, i, out16, out16Kind);
}

void to16Avx2(const float* src, uint16_t* dst, size_t n, int kind) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store16v(dst + i, VLOAD(src + i), kind);
  for (; i < n; ++i) store16(dst, kind, i, src[i]);
}

}  // namespace ds::zero::kernels

#pragma GCC pop_options
