// AVX512-BF16 micro-kernel of bf16_gemm (see bf16_gemm_kernel.h). Every function that uses
// AVX-512 carries a target attribute, so this file builds with the project's generic flags and
// nothing here runs unless the CPU check passed. Registers: kMR x 3 accumulators (24), 3 B loads,
// 1 broadcast A pair.
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

}  // namespace

DS_BF16_TARGET void bf16MicroTile(int kp, const uint32_t* a, const uint32_t* b, float* c,
                                  long ldc, int mr, int nr, bool accumulate) {
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
      const __m512bh av = asBh(_mm512_set1_epi32(static_cast<int>(a[p * kMR + i])));
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
  for (int v = 0; v < kNV; ++v) {
    const int left = nr - v * 16;
    mask[v] = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
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

}  // namespace ds::runtime::detail
