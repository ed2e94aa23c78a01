// AVX-512 GELU kernels (see gelu_kernels.h): the portable formula 16 lanes at a time with FMA,
// the last partial vector masked. exp's 2^n is built in the exponent bits as in the portable
// code; the division 1 / (1 + e) is a true vdivps (no reciprocal estimate), so the results
// differ from the portable kernel's only by FMA's single roundings.
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "runtime/tensor/exp_neg_avx512.h"
#include "runtime/tensor/gelu_kernels.h"

namespace ds::runtime::detail {
namespace {

#define DS_GELU512 __attribute__((target("avx512f")))

struct Lanes {
  __m512 e;    // exp(-2|u|)
  __m512 rd;   // 1 / (1 + e)
  __m512 sig;  // sigmoid(2u)
};

DS_GELU512 inline Lanes lanes(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 u =
      _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_set1_ps(kGeluKc), x2, _mm512_set1_ps(kGeluK)));
  // t = -2|u|: clear the sign bit, then negate by multiplying with -2.
  const __m512 t = _mm512_mul_ps(_mm512_abs_ps(u), _mm512_set1_ps(-2.0f));
  const __m512 e = expNeg512(t);
  const __m512 one = _mm512_set1_ps(1.0f);
  Lanes out{};
  out.e = e;
  out.rd = _mm512_div_ps(one, _mm512_add_ps(one, e));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NGE_UQ);  // !(x >= 0)
  out.sig = _mm512_mul_ps(_mm512_mask_mov_ps(one, neg, e), out.rd);
  return out;
}

DS_GELU512 inline __m512 grad(__m512 x) {
  const Lanes l = lanes(x);
  const __m512 q = _mm512_mul_ps(_mm512_mul_ps(l.e, l.rd), l.rd);
  const __m512 poly =
      _mm512_fmadd_ps(_mm512_set1_ps(kGeluC3), _mm512_mul_ps(x, x), _mm512_set1_ps(1.0f));
  const __m512 xq = _mm512_mul_ps(_mm512_mul_ps(x, q), _mm512_set1_ps(2.0f * kGeluK));
  return _mm512_fmadd_ps(xq, poly, l.sig);
}

DS_GELU512 inline __mmask16 tailMask(size_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

}  // namespace

DS_GELU512 void geluForwardAvx512(float* out, float* pre, const float* inp, const float* bias,
                                  size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tailMask(n - i);
    __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
    if (bias != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + i));
    if (pre != nullptr) _mm512_mask_storeu_ps(pre + i, m, x);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(x, lanes(x).sig));
  }
}

DS_GELU512 void geluBackwardAvx512(float* dinp, const float* inp, const float* dout, size_t n,
                                   bool accumulate) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tailMask(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
    const __m512 d = _mm512_maskz_loadu_ps(m, dout + i);
    const __m512 base = accumulate ? _mm512_maskz_loadu_ps(m, dinp + i) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(dinp + i, m, _mm512_add_ps(base, _mm512_mul_ps(grad(x), d)));
  }
}

}  // namespace ds::runtime::detail
