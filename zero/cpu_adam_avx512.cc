// AVX-512 kernels of cpu_adam: cpu_adam_math.h on 16 fp32 lanes (AVX-512F, F16C), bit-identical
// to the scalar path. Compiled for its target with a pragma, so only this file's code uses
// AVX-512; callers reach it only after cpu_adam.cc checked the CPU.
// GCC 12 warns about _mm512_undefined_* inside its own headers; the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zero/cpu_adam_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")

// After the pragma on purpose: its templates are compiled for this target (see the header).
#include "zero/cpu_adam_math.h"  // NOLINT(llvm-include-order)

namespace ds::zero::kernels {
namespace {

struct Avx512Lanes {
  using V = __m512;
  static constexpr size_t kWidth = 16;
  static V load(const float* src) { return _mm512_loadu_ps(src); }
  static void store(float* dst, V x) { _mm512_storeu_ps(dst, x); }
  static V set(float x) { return _mm512_set1_ps(x); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  // kind: 1 bf16 (ScalarLanes::store16's rounding, lane-wise), 2 fp16.
  static void store16(uint16_t* dst, V x, int kind) {
    if (kind == 1) {
      const __m512i u = _mm512_castps_si512(x);
      const __m512i absu = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(absu, _mm512_set1_epi32(0x7f800000));
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
      __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
      r = _mm512_srli_epi32(r, 16);
      const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
      r = _mm512_mask_blend_epi32(nan, r, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(r));
    } else if (kind == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                          _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
};

}  // namespace

void adamAvx512(const AdamCoeffs& c, float* p, const float* g, float* m, float* v, size_t n,
                uint16_t* out16, int out16Kind) {
  adamKernel<Avx512Lanes>(c, p, g, m, v, n, out16, out16Kind);
}

void sgdAvx512(const SgdCoeffs& c, float* p, const float* g, float* buf, size_t n, uint16_t* out16,
               int out16Kind) {
  sgdKernel<Avx512Lanes>(c, p, g, buf, n, out16, out16Kind);
}

void to16Avx512(const float* src, uint16_t* dst, size_t n, int kind) {
  to16Kernel<Avx512Lanes>(src, dst, n, kind);
}

}  // namespace ds::zero::kernels

#pragma GCC pop_options
