// AVX2 + FMA softmax row passes (see softmax_row.h), 8 lanes a step, the tail masked. exp is
// exp_neg_avx2.h's (each element bitwise the AVX-512 pass's); the sum goes into 8 double lanes in
// a different order from the AVX-512 pass, so sums may differ in the last bits. Run only after
// softmax_row.cc's CPU check.
#include <immintrin.h>

#include <cstddef>

#include "runtime/tensor/exp_neg_avx2.h"
#include "runtime/tensor/softmax_row.h"

namespace ds::runtime::detail {

#define DS_SOFTMAX256 __attribute__((target("avx2,fma")))

DS_SOFTMAX256 float rowMaxAvx2(const float* row, size_t n) {
  // Lanes start at row[0]; masked-off tail lanes keep their value (max is idempotent).
  __m256 mx = _mm256_set1_ps(row[0]);
  for (size_t j = 0; j < n; j += 8) {
    const __m256i m = tailMask256(n - j);
    const __m256 x = _mm256_blendv_ps(mx, _mm256_maskload_ps(row + j, m), _mm256_castsi256_ps(m));
    // max(x, mx) with mx second: a NaN x leaves mx (the scalar compare skips it too).
    mx = _mm256_max_ps(x, mx);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

DS_SOFTMAX256 double expShiftSumAvx2(float* row, size_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (size_t j = 0; j < n; j += 8) {
    const __m256i m = tailMask256(n - j);
    const __m256 t = _mm256_sub_ps(_mm256_maskload_ps(row + j, m), sh);
    const __m256 e = _mm256_and_ps(expNeg256(t), _mm256_castsi256_ps(m));  // masked lanes: 0
    _mm256_maskstore_ps(row + j, m, e);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  const __m256d sum4 = _mm256_add_pd(lo, hi);
  const __m128d sum2 = _mm_add_pd(_mm256_castpd256_pd128(sum4), _mm256_extractf128_pd(sum4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(sum2, _mm_unpackhi_pd(sum2, sum2)));
}

}  // namespace ds::runtime::detail
