// cachedAttention (see attention_kernel.h): the scalar loop and the AVX-512 one, same three passes
// (scores and their max, exp and sum, weighted sum of V). The AVX-512 pass keeps q and the output
// row in registers (hs / 16 zmm each) and streams the cache rows once per pass.
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "runtime/inference/attention_kernel.h"

#include <immintrin.h>

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

void scalarRow(float* y, float* scores, const AttentionRow& row) {
  const int hs = row.hs;
  float mx = -INFINITY;
  for (int j = 0; j < row.len; ++j) {
    const float* kj = row.keys + size_t(j) * row.stride;
    float dot = 0.0f;
    for (int d = 0; d < hs; ++d) dot += row.q[d] * kj[d];
    scores[j] = dot * row.scale;
    mx = scores[j] > mx ? scores[j] : mx;
  }
  float sum = 0.0f;
  for (int j = 0; j < row.len; ++j) {
    scores[j] = std::exp(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = 1.0f / sum;
  for (int d = 0; d < hs; ++d) y[d] = 0.0f;
  for (int j = 0; j < row.len; ++j) {
    const float weight = scores[j] * inv;
    const float* vj = row.values + size_t(j) * row.stride;
    for (int d = 0; d < hs; ++d) y[d] += weight * vj[d];
  }
}

#define DS_ATTN512 __attribute__((target("avx512f")))

DS_ATTN512 inline float hsum(__m512 v) {
  const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v),
                                    _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE)));
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}

// e^x for x <= 0 (scores minus their max): x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor
// polynomial to r^7 (truncation < 1e-8 relative), times 2^n by VSCALEFPS; x below -87 is clamped
// (e^-87 ~ 2e-38: nothing beside the maximum's weight of 1). A few ulp from expf
// (attention_kernel_test bounds the result).
DS_ATTN512 inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);   // ln2 high bits
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);  // ln2 - high
  __m512 poly = _mm512_set1_ps(1.0f / 5040.0f);
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 720.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 120.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 24.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 6.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(0.5f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(poly, n);
}

// kVec = hs / 16 vectors per row (hs up to 256 in registers; wider heads use the generic loop).
template <int kVec>
DS_ATTN512 void avx512Row(float* y, float* scores, const AttentionRow& row) {
  __m512 qv[kVec];
#pragma GCC unroll 16
  for (int i = 0; i < kVec; ++i) qv[i] = _mm512_loadu_ps(row.q + 16 * i);
  float mx = -INFINITY;
  for (int j = 0; j < row.len; ++j) {
    const float* kj = row.keys + size_t(j) * row.stride;
    __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kj));
#pragma GCC unroll 16
    for (int i = 1; i < kVec; ++i) acc = _mm512_fmadd_ps(qv[i], _mm512_loadu_ps(kj + 16 * i), acc);
    scores[j] = hsum(acc) * row.scale;
    mx = scores[j] > mx ? scores[j] : mx;
  }
  const __m512 mxv = _mm512_set1_ps(mx);
  __m512 sumv = _mm512_setzero_ps();
  for (int j = 0; j < row.len; j += 16) {
    const int left = row.len - j;
    const __mmask16 mask = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __m512 ev = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, scores + j), mxv));
    _mm512_mask_storeu_ps(scores + j, mask, ev);
    sumv = _mm512_add_ps(sumv, _mm512_maskz_mov_ps(mask, ev));
  }
  const float sum = hsum(sumv);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  __m512 out[kVec];
#pragma GCC unroll 16
  for (int i = 0; i < kVec; ++i) out[i] = _mm512_setzero_ps();
  for (int j = 0; j < row.len; ++j) {
    const float* vj = row.values + size_t(j) * row.stride;
    const __m512 weight = _mm512_mul_ps(_mm512_set1_ps(scores[j]), inv);
#pragma GCC unroll 16
    for (int i = 0; i < kVec; ++i)
      out[i] = _mm512_fmadd_ps(weight, _mm512_loadu_ps(vj + 16 * i), out[i]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < kVec; ++i) _mm512_storeu_ps(y + 16 * i, out[i]);
}

DS_ATTN512 void avx512Dispatch(float* y, float* scores, const AttentionRow& row) {
  switch (row.hs / 16) {
    case 1: avx512Row<1>(y, scores, row); break;
    case 2: avx512Row<2>(y, scores, row); break;
    case 4: avx512Row<4>(y, scores, row); break;
    case 8: avx512Row<8>(y, scores, row); break;
    default: scalarRow(y, scores, row); break;  // uncommon head widths
  }
}

}  // namespace

bool attentionIsaSupported(AttentionIsa isa) {
  if (isa == AttentionIsa::kScalar) return true;
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return avx512;
}

AttentionIsa attentionBestIsa(int hs) {
  return attentionIsaSupported(AttentionIsa::kAvx512) && hs % 16 == 0 ? AttentionIsa::kAvx512
                                                                      : AttentionIsa::kScalar;
}

void cachedAttention(float* y, float* scores, const AttentionRow& row, AttentionIsa isa) {
  if (!attentionIsaSupported(isa) || (isa == AttentionIsa::kAvx512 && row.hs % 16 != 0))
    throw InternalError(fmt::format("attention: ISA {} cannot run head size {} on this CPU",
                                    isa == AttentionIsa::kAvx512 ? "avx512" : "scalar", row.hs));
  if (row.len < 1) throw InternalError("attention: a query must see at least its own position");
  if (isa == AttentionIsa::kAvx512) avx512Dispatch(y, scores, row);
  else scalarRow(y, scores, row);
}

}  // namespace ds::runtime
