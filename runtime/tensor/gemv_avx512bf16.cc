// AVX512-BF16 gemv kernel (see gemv_kernels.h, gemvForwardBf16Dot in gemv.h): bf16 weights times
// bf16-rounded inputs with VDPBF16PS (32 products a step, pairs summed into fp32 lanes), no
// widening. Per group of 4 weight rows and block of up to 4 input rows: 16 zmm accumulators; the
// last C % 32 weight columns load masked (zeros), the input rows are padded with zeros to ldx.
// Loops over rows/accumulators carry `#pragma GCC unroll` (gemv_avx512.cc: registers, not stack).
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>

#include "runtime/tensor/gemv_kernels.h"

namespace ds::runtime::detail {
namespace {

#define DS_GEMVDP __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr size_t kPrefetchBytes = 2048;  // as gemv_avx512.cc

DS_GEMVDP inline float hsum(__m512 v) {
  const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v),
                                    _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE)));
  const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}

// out rows [n0, n0 + R), weight rows [o, o + J).
template <int R, int J>
DS_GEMVDP void block(const GemvDotArgs& args, const uint16_t* wgt, int o, int n0) {
  const size_t cols = size_t(args.C);
  __m512 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  const uint16_t* wr[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wr[j] = wgt + size_t(o + j) * cols;
  const uint16_t* xr[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) xr[r] = args.inp + size_t(n0 + r) * size_t(args.ldx);
  for (size_t k = 0; k < cols; k += 32) {
    const size_t left = cols - k;
    const __mmask32 mask = left >= 32 ? ~__mmask32(0) : __mmask32((1u << left) - 1);
    __m512bh wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[j] + k) + kPrefetchBytes, _MM_HINT_T0);
      wv[j] = __m512bh(_mm512_maskz_loadu_epi16(mask, wr[j] + k));
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh xv = __m512bh(_mm512_loadu_si512(xr[r] + k));  // padded: always 32 in range
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], wv[j], xv);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* out = args.out + size_t(n0 + r) * size_t(args.OC) + size_t(o);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) out[j] = hsum(acc[r][j]) + (args.bias ? args.bias[o + j] : 0.0f);
  }
}

template <int J>
DS_GEMVDP void group(const GemvDotArgs& args, const uint16_t* wgt, int o) {
  int n = 0;
  for (; n + 4 <= args.N; n += 4) block<4, J>(args, wgt, o, n);
  switch (args.N - n) {
    case 3: block<3, J>(args, wgt, o, n); break;
    case 2: block<2, J>(args, wgt, o, n); break;
    case 1: block<1, J>(args, wgt, o, n); break;
    default: break;
  }
}

}  // namespace

void gemvAvx512Bf16Dot(const GemvDotArgs& args, const uint16_t* wgt, int o0, int o1) {
  int o = o0;
  for (; o + 4 <= o1; o += 4) group<4>(args, wgt, o);
  switch (o1 - o) {
    case 3: group<3>(args, wgt, o); break;
    case 2: group<2>(args, wgt, o); break;
    case 1: group<1>(args, wgt, o); break;
    default: break;
  }
}

}  // namespace ds::runtime::detail
