// exp(t) for t <= 0, 8 lanes (AVX2 + FMA): exp_neg_avx512.h's expNeg512 on ymm registers, the
// same operations in the same order (FMA, n rounded to nearest even), so a lane's result is the
// AVX-512 lane's bit for bit. Include only from files whose callers check the CPU first (the
// function carries the target attribute). NaN lanes are treated as kExpMin, t < kExpMin gives 0.
#pragma once

#include <immintrin.h>

#include "runtime/tensor/exp_neg.h"

namespace ds::runtime::detail {

__attribute__((target("avx2,fma"))) inline __m256 expNeg256(__m256 t) {
  const __m256 lo = _mm256_set1_ps(kExpMin);
  // max with t first: a NaN t gives lo (as the scalar t > kExpMin ? t : kExpMin).
  const __m256 tc = _mm256_max_ps(t, lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(tc, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), tc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kExpC7), r, _mm256_set1_ps(kExpC6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  // t < kExpMin (ordered, so a NaN t keeps e, as the AVX-512 mask _CMP_NLT_UQ does): 0.
  return _mm256_andnot_ps(_mm256_cmp_ps(t, lo, _CMP_LT_OQ), e);
}

// Lane mask for the last `left` elements of a row (all lanes when left >= 8), for
// _mm256_maskload_ps / _mm256_maskstore_ps (masked-off lanes load as 0 and are not stored).
__attribute__((target("avx2,fma"))) inline __m256i tailMask256(size_t left) {
  const int k = left >= 8 ? 8 : int(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace ds::runtime::detail
