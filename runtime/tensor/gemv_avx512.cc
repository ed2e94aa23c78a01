// AVX-512 gemv kernel (see gemv_kernels.h). Per group of 4 weight rows and block of up to 4 input
// rows: 16 zmm accumulators (row r x weight j), 16 columns a step, the last partial step masked;
// bf16 weights widened by zero-extending to 32 bits and shifting left 16. The 4 weight rows (at
// most 4 * C * 4 bytes) stay in L1/L2 while every input block passes over them.
// Software prefetch: every weight load also prefetches the same row kPrefetchBytes ahead (past the
// row's end that is the next rows, read next anyway; past the matrix's end a prefetch never
// faults): at batch 1 it lifted the bf16 kernel from ~0.6 to ~0.85-0.9 of the one-core STREAM read
// (2 KB ahead; 1 and 4 KB were slower), fp32 unchanged within noise (one-core microbenchmark timed
// by thread CPU time on the shared machine, 2026-11-27).
// `#pragma GCC unroll` on every loop over rows/accumulators: at -O2 GCC 12 kept those loops and the
// acc[R][J] array in memory (stack loads and stores around every FMA); unrolled, they live in zmm.
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#include "runtime/tensor/gemv_kernels.h"

namespace ds::runtime::detail {
namespace {

#define DS_GEMV512 __attribute__((target("avx512f,avx512bw,avx512vl")))

constexpr size_t kPrefetchBytes = 2048;

template <typename T>
DS_GEMV512 inline void prefetchAhead(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
}

DS_GEMV512 inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
DS_GEMV512 inline __m512 load16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Horizontal sum of 16 lanes.
DS_GEMV512 inline float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE)));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// out rows [n0, n0 + R), weight rows [o, o + J) (J <= 4: the tail group uses J < 4).
template <int R, int J, typename T>
DS_GEMV512 void block(const GemvArgs& a, const T* w, int o, int n0) {
  const size_t C = size_t(a.C);
  __m512 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  const T* wr[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wr[j] = w + size_t(o + j) * C;
  const float* x[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) x[r] = a.inp + size_t(n0 + r) * C;
  for (size_t k = 0; k < C; k += 16) {
    const size_t left = C - k;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m512 wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      prefetchAhead(wr[j] + k);
      wv[j] = load16(wr[j] + k, m);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x[r] + k);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_fmadd_ps(wv[j], xv, acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* out = a.out + size_t(n0 + r) * size_t(a.OC) + size_t(o);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) out[j] = hsum(acc[r][j]) + (a.bias ? a.bias[o + j] : 0.0f);
  }
}

// bf16 weights, 32 columns a step: one 512-bit load holds 16 dwords of two bf16 each; the even
// columns widen by a shift left 16, the odd ones by masking the low half, so no cross-lane
// conversion. a.inp here is the input with every full 32-column chunk permuted to [16 even
// columns | 16 odd columns] (gemv.cc); the last C % 32 columns stay in order and go 16-wide.
template <int R, int J>
DS_GEMV512 void blockBf16(const GemvArgs& a, const uint16_t* w, int o, int n0) {
  const size_t C = size_t(a.C), C32 = C / 32 * 32;
  __m512 acc[R][J];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  const uint16_t* wr[J];
#pragma GCC unroll 16
  for (int j = 0; j < J; ++j) wr[j] = w + size_t(o + j) * C;
  const float* x[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) x[r] = a.inp + size_t(n0 + r) * C;
  const __m512i hiMask = _mm512_set1_epi32(int(0xffff0000u));
  for (size_t k = 0; k < C32; k += 32) {
    __m512 we[J], wo[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      prefetchAhead(wr[j] + k);
      const __m512i v = _mm512_loadu_si512(wr[j] + k);
      we[j] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      wo[j] = _mm512_castsi512_ps(_mm512_and_si512(v, hiMask));
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xe = _mm512_loadu_ps(x[r] + k), xo = _mm512_loadu_ps(x[r] + k + 16);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) {
        acc[r][j] = _mm512_fmadd_ps(we[j], xe, acc[r][j]);
        acc[r][j] = _mm512_fmadd_ps(wo[j], xo, acc[r][j]);
      }
    }
  }
  for (size_t k = C32; k < C; k += 16) {
    const size_t left = C - k;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m512 wv[J];
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) wv[j] = load16(wr[j] + k, m);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x[r] + k);
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[r][j] = _mm512_fmadd_ps(wv[j], xv, acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* out = a.out + size_t(n0 + r) * size_t(a.OC) + size_t(o);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) out[j] = hsum(acc[r][j]) + (a.bias ? a.bias[o + j] : 0.0f);
  }
}

template <int R, int J, typename T>
DS_GEMV512 void pick(const GemvArgs& a, const T* w, int o, int n0) {
  if constexpr (std::is_same_v<T, uint16_t>) blockBf16<R, J>(a, w, o, n0);
  else block<R, J>(a, w, o, n0);
}

template <int J, typename T>
DS_GEMV512 void group(const GemvArgs& a, const T* w, int o) {
  int n = 0;
  for (; n + 4 <= a.N; n += 4) pick<4, J>(a, w, o, n);
  switch (a.N - n) {
    case 3: pick<3, J>(a, w, o, n); break;
    case 2: pick<2, J>(a, w, o, n); break;
    case 1: pick<1, J>(a, w, o, n); break;
    default: break;
  }
}

template <typename T>
DS_GEMV512 void run(const GemvArgs& a, const T* w, int o0, int o1) {
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

void gemvAvx512F32(const GemvArgs& a, const float* w, int o0, int o1) { run(a, w, o0, o1); }
void gemvAvx512Bf16(const GemvArgs& a, const uint16_t* w, int o0, int o1) { run(a, w, o0, o1); }

}  // namespace ds::runtime::detail
