// AVX-512 softmax row passes (see softmax_row.h), 16 lanes a step, the tail masked. Run only
// after softmax_row.cc's CPU check.
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>

#include "runtime/tensor/exp_neg_avx512.h"
#include "runtime/tensor/softmax_row.h"

namespace ds::runtime::detail {

#define DS_SOFTMAX512 __attribute__((target("avx512f")))

namespace {
DS_SOFTMAX512 inline __mmask16 tailMask(size_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}
}  // namespace

DS_SOFTMAX512 float rowMaxAvx512(const float* row, size_t n) {
  // Lanes start at row[0]; masked-off tail lanes keep their value (max is idempotent).
  __m512 mx = _mm512_set1_ps(row[0]);
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = tailMask(n - j);
    // max(x, mx) with mx second: a NaN x leaves mx (the scalar compare skips it too).
    mx = _mm512_mask_max_ps(mx, m, _mm512_maskz_loadu_ps(m, row + j), mx);
  }
  return _mm512_reduce_max_ps(mx);
}

DS_SOFTMAX512 double expShiftSumAvx512(float* row, size_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (size_t j = 0; j < n; j += 16) {
    const __mmask16 m = tailMask(n - j);
    const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), sh);
    const __m512 e = _mm512_maskz_mov_ps(m, expNeg512(t));
    _mm512_mask_storeu_ps(row + j, m, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(
        hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}

}  // namespace ds::runtime::detail
