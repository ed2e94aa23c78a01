// exp(t) for t <= 0, 16 lanes (AVX-512F): exp_neg.h's expNeg per lane, with FMA and round to
// nearest even for n. Include only from files whose callers check the CPU first (the function
// carries the target attribute). NaN lanes are treated as kExpMin, t < kExpMin gives 0.
#pragma once

#include <immintrin.h>

#include "runtime/tensor/exp_neg.h"

namespace ds::runtime::detail {

__attribute__((target("avx512f"))) inline __m512 expNeg512(__m512 t) {
  const __m512 lo = _mm512_set1_ps(kExpMin);
  // max with t first: a NaN t gives lo (as the scalar t > kExpMin ? t : kExpMin).
  const __m512 tc = _mm512_max_ps(t, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(tc, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), tc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kExpC7), r, _mm512_set1_ps(kExpC6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, lo, _CMP_NLT_UQ), e);  // t < kExpMin: 0
}

}  // namespace ds::runtime::detail
