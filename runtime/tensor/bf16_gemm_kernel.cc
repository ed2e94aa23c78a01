// AVX512-BF16 micro-kernel and packing of bf16_gemm (see bf16_gemm_kernel.h). Every function that
// uses AVX-512 carries a target attribute, so this file builds with the project's generic flags;
// the driver calls in only after the CPU check. Micro-kernel registers: kMR x 3 accumulators (24),
// 3 B loads, 1 broadcast A word.
#include "runtime/tensor/bf16_gemm_kernel.h"

#include <immintrin.h>

namespace ds::runtime::detail {

#define DS_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

bool bf16GemmCpuHasAvx512Bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

namespace {

constexpr int kNV = kNR / 16;  // zmm per micro-tile row

DS_BF16_TARGET inline __m512bh asBh(__m512i v) { return reinterpret_cast<__m512bh>(v); }
DS_BF16_TARGET inline __m512i shl16(__m512i v) {
  return _mm512_maskz_slli_epi32(__mmask16(0xffff), v, 16);
}

DS_BF16_TARGET inline __mmask16 firstN(int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// 16 bf16 values (as zero-extended 32-bit lanes) of 16 contiguous elements, lanes past the mask 0.
DS_BF16_TARGET inline __m512i load16(const float* p, __mmask16 m) {
  const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, p));
  return _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), reinterpret_cast<__m256i>(h));
}
DS_BF16_TARGET inline __m512i load16(const uint16_t* p, __mmask16 m) {
  return _mm512_maskz_cvtepu16_epi32(__mmask16(0xffff), _mm256_maskz_loadu_epi16(m, p));
}

inline uint32_t bitsOf(const float* p, long i) {
  uint32_t u;
  __builtin_memcpy(&u, p + i, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40;  // quiet NaN
  if ((u & 0x7f800000u) == 0) return (u >> 16) & 0x8000u;        // denormal: flushed, as vcvtneps
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
inline uint32_t bitsOf(const uint16_t* p, long i) { return p[i]; }

template <class T>
DS_BF16_TARGET void packRows(uint32_t* dst, long lda, const T* src, long rs, int rows, int K) {
  const int kp = (K + 1) / 2;
  for (int r = 0; r < rows; ++r) {
    const T* row = src + r * rs;
    uint32_t* out = dst + r * lda;
    for (int p = 0; p < kp; p += 16) {  // 32 elements -> 16 words
      const int k = 2 * p;
      const __m512i lo = load16(row + k, firstN(K - k));
      const __m512i hi = load16(row + k + 16, firstN(K - k - 16));
      // lanes j: (k+j) for lo, (k+16+j) for hi; words need (k+2j, k+2j+1)
      const __m512i idxLo =
          _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      const __m512i idxHi =
          _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
      const __m512i even = _mm512_permutex2var_epi32(lo, idxLo, hi);
      const __m512i odd = _mm512_permutex2var_epi32(lo, idxHi, hi);
      _mm512_mask_storeu_epi32(out + p, firstN(kp - p), _mm512_or_si512(even, shl16(odd)));
    }
  }
}

template <class T>
DS_BF16_TARGET void packPanel(uint32_t* dst, int R, const T* src, long rs, long cs, int r0,
                              int rows, int K) {
  const int kp = (K + 1) / 2;
  const int valid = rows - r0 < R ? rows - r0 : R;
  if (rs == 1) {  // the R rows are contiguous at each k: 16 words per vector
    for (int p = 0; p < kp; ++p) {
      const T* lo = src + 2L * p * cs + r0;
      const bool hasHi = 2 * p + 1 < K;
      for (int v = 0; v < R; v += 16) {
        const __mmask16 m = firstN(valid - v);
        __m512i w = load16(lo + v, m);
        if (hasHi) w = _mm512_or_si512(w, shl16(load16(lo + cs + v, m)));
        _mm512_mask_storeu_epi32(dst + p * R + v, firstN(R - v), w);
      }
    }
    return;
  }
  for (int r = 0; r < valid; ++r) {  // general strides: one row at a time
    const T* row = src + (r0 + r) * rs;
    for (int p = 0; p < kp; ++p) {
      const uint32_t hi = 2 * p + 1 < K ? bitsOf(row, (2L * p + 1) * cs) : 0u;
      dst[p * R + r] = bitsOf(row, 2L * p * cs) | (hi << 16);
    }
  }
  for (int p = 0; p < kp; ++p) {
    for (int r = valid; r < R; ++r) dst[p * R + r] = 0;
  }
}

template <bool kRowsA>
DS_BF16_TARGET inline void microTile(int kp, const uint32_t* a, long aRow, const uint32_t* b,
                                     float* c, long ldc, int mr, int nr, bool accumulate) {
  __m512 acc[kMR][kNV];
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int p = 0; p < kp; ++p) {
    __m512bh bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = asBh(_mm512_loadu_si512(b + p * kNR + v * 16));
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const uint32_t w = kRowsA ? a[i * aRow + p] : a[p * kMR + i];
      const __m512bh av = asBh(_mm512_set1_epi32(static_cast<int>(w)));
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      float* row = c + i * ldc;
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) {
        __m512 x = acc[i][v];
        if (accumulate) x = _mm512_add_ps(x, _mm512_loadu_ps(row + v * 16));
        _mm512_storeu_ps(row + v * 16, x);
      }
    }
    return;
  }
  __mmask16 mask[kNV];
  for (int v = 0; v < kNV; ++v) mask[v] = firstN(nr - v * 16);
#pragma GCC unroll 8
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) {
      __m512 x = acc[i][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], row + v * 16));
      _mm512_mask_storeu_ps(row + v * 16, mask[v], x);
    }
  }
}

}  // namespace

DS_BF16_TARGET void packRowsF32(uint32_t* dst, long lda, const float* src, long rs, int rows,
                                int K) {
  packRows(dst, lda, src, rs, rows, K);
}
DS_BF16_TARGET void packRowsBf16(uint32_t* dst, long lda, const uint16_t* src, long rs, int rows,
                                 int K) {
  packRows(dst, lda, src, rs, rows, K);
}
DS_BF16_TARGET void packPanelF32(uint32_t* dst, int R, const float* src, long rs, long cs, int r0,
                                 int rows, int K) {
  packPanel(dst, R, src, rs, cs, r0, rows, K);
}
DS_BF16_TARGET void packPanelBf16(uint32_t* dst, int R, const uint16_t* src, long rs, long cs,
                                  int r0, int rows, int K) {
  packPanel(dst, R, src, rs, cs, r0, rows, K);
}

DS_BF16_TARGET void bf16MicroTile(int kp, const uint32_t* a, long aRow, long aPair,
                                  const uint32_t* b, float* c, long ldc, int mr, int nr,
                                  bool accumulate) {
  if (aPair == 1) {
    microTile<true>(kp, a, aRow, b, c, ldc, mr, nr, accumulate);
  } else {
    microTile<false>(kp, a, aRow, b, c, ldc, mr, nr, accumulate);
  }
}

}  // namespace ds::runtime::detail
