// AVX2 + FMA GELU kernels (see gelu_kernels.h): gelu_avx512.cc's operations 8 lanes at a time
// (FMA where it has FMA, a true vdivps for 1 / (1 + e), n rounded to nearest even), so each
// element's result is the AVX-512 kernel's bit for bit; the last partial vector is masked. For
// the many x86 CPUs with AVX2 but no AVX-512 (AMD before Zen 4, Intel client parts), where the
// portable loop cost ~7% of a GPT-2 124M training step.
#include <immintrin.h>

#include "runtime/tensor/exp_neg_avx2.h"
#include "runtime/tensor/gelu_kernels.h"

namespace ds::runtime::detail {
namespace {

#define DS_GELU256 __attribute__((target("avx2,fma")))

struct Lanes {
  __m256 e;    // exp(-2|u|)
  __m256 rd;   // 1 / (1 + e)
  __m256 sig;  // sigmoid(2u)
};

DS_GELU256 inline Lanes lanes(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 u =
      _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_set1_ps(kGeluKc), x2, _mm256_set1_ps(kGeluK)));
  // t = -2|u|: clear the sign bit, then multiply by -2.
  const __m256 absU = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), u);
  const __m256 e = expNeg256(_mm256_mul_ps(absU, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  Lanes out{};
  out.e = e;
  out.rd = _mm256_div_ps(one, _mm256_add_ps(one, e));
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ);  // !(x >= 0)
  out.sig = _mm256_mul_ps(_mm256_blendv_ps(one, e, neg), out.rd);
  return out;
}

DS_GELU256 inline __m256 grad(__m256 x) {
  const Lanes l = lanes(x);
  const __m256 q = _mm256_mul_ps(_mm256_mul_ps(l.e, l.rd), l.rd);
  const __m256 poly =
      _mm256_fmadd_ps(_mm256_set1_ps(kGeluC3), _mm256_mul_ps(x, x), _mm256_set1_ps(1.0f));
  const __m256 xq = _mm256_mul_ps(_mm256_mul_ps(x, q), _mm256_set1_ps(2.0f * kGeluK));
  return _mm256_fmadd_ps(xq, poly, l.sig);
}

}  // namespace

DS_GELU256 void geluForwardAvx2(float* out, float* pre, const float* inp, const float* bias,
                                size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    const __m256i m = tailMask256(n - i);
    __m256 x = _mm256_maskload_ps(inp + i, m);
    if (bias != nullptr) x = _mm256_add_ps(x, _mm256_maskload_ps(bias + i, m));
    if (pre != nullptr) _mm256_maskstore_ps(pre + i, m, x);
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(x, lanes(x).sig));
  }
}

DS_GELU256 void geluBackwardAvx2(float* dinp, const float* inp, const float* dout, size_t n,
                                 bool accumulate) {
  for (size_t i = 0; i < n; i += 8) {
    const __m256i m = tailMask256(n - i);
    const __m256 x = _mm256_maskload_ps(inp + i, m);
    const __m256 d = _mm256_maskload_ps(dout + i, m);
    const __m256 base = accumulate ? _mm256_maskload_ps(dinp + i, m) : _mm256_setzero_ps();
    _mm256_maskstore_ps(dinp + i, m, _mm256_add_ps(base, _mm256_mul_ps(grad(x), d)));
  }
}

}  // namespace ds::runtime::detail
