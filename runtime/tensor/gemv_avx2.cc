// AVX2+FMA gemv kernel (see gemv_kernels.h). Per group of 4 weight rows and block of up to 2 input
// rows: 8 ymm accumulators (16 registers leave room for the 4 weight loads and one input), 8
// columns a step, the last C % 8 columns scalar; bf16 weights widened by zero-extend and shift.
// Loops over rows/accumulators carry `#pragma GCC unroll` (see gemv_avx512.cc: registers, not
// stack).
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "runtime/tensor/gemv_kernels.h"

namespace ds::runtime::detail {
namespace {

#define DS_GEMV256 __attribute__((target("avx2,fma")))

DS_GEMV256 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
DS_GEMV256 inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen1(float v) { return v; }
inline float widen1(uint16_t v) {
  const uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

DS_GEMV256 inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <int R, int J, typename T>
DS_GEMV256 void block(const GemvArgs& a, const T* w, int o, int n0) {
  const size_t C = size_t(a.C), C8 = C / 8 * 8;
  __m256 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
  const T* wr[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wr[j] = w + size_t(o + j) * C;
  const float* x[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) x[r] = a.inp + size_t(n0 + r) * C;
  for (size_t k = 0; k < C8; k += 8) {
    __m256 wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) wv[j] = load8(wr[j] + k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x[r] + k);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[r][j] = _mm256_fmadd_ps(wv[j], xv, acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* out = a.out + size_t(n0 + r) * size_t(a.OC) + size_t(o);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      float s = hsum(acc[r][j]);
      for (size_t k = C8; k < C; ++k) s += widen1(wr[j][k]) * x[r][k];
      out[j] = s + (a.bias ? a.bias[o + j] : 0.0f);
    }
  }
}

template <int J, typename T>
DS_GEMV256 void group(const GemvArgs& a, const T* w, int o) {
  int n = 0;
  for (; n + 2 <= a.N; n += 2) block<2, J>(a, w, o, n);
  if (n < a.N) block<1, J>(a, w, o, n);
}

template <typename T>
DS_GEMV256 void run(const GemvArgs& a, const T* w, int o0, int o1) {
  int o = o0;
  for (; o + 4 <= o1; o += 4) group<4>(a, w, o);
  switch (o1 - o) {
    case 3: group<3>(a, w, o); break;
    case 2: group<2>(a, w, o); break;
    case 1: group<1>(a, w, o); break;
    default: break;
  }
}

}  // namespace

void gemvAvx2F32(const GemvArgs& a, const float* w, int o0, int o1) { run(a, w, o0, o1); }
void gemvAvx2Bf16(const GemvArgs& a, const uint16_t* w, int o0, int o1) { run(a, w, o0, o1); }

}  // namespace ds::runtime::detail
