// AVX2 kernels of cpu_adam: cpu_adam_math.h on 8 fp32 lanes (FMA, F16C), bit-identical to the
// scalar path. Compiled for its target with a pragma, so only this file's code uses AVX2;
// callers reach it only after cpu_adam.cc checked the CPU.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zero/cpu_adam_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// After the pragma on purpose: its templates are compiled for this target (see the header).
#include "zero/cpu_adam_math.h"  // NOLINT(llvm-include-order)

namespace ds::zero::kernels {
namespace {

struct Avx2Lanes {
  using V = __m256;
  static constexpr size_t kWidth = 8;
  static V load(const float* src) { return _mm256_loadu_ps(src); }
  static void store(float* dst, V x) { _mm256_storeu_ps(dst, x); }
  static V set(float x) { return _mm256_set1_ps(x); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  // kind: 1 bf16 (ScalarLanes::store16's rounding, lane-wise), 2 fp16.
  static void store16(uint16_t* dst, V x, int kind) {
    if (kind == 1) {
      const __m256i u = _mm256_castps_si256(x);
      const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
      const __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
      r = _mm256_srli_epi32(r, 16);
      const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
      r = _mm256_blendv_epi8(r, quiet, nan);
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
    } else if (kind == 2) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                       _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
};

}  // namespace

void adamAvx2(const AdamCoeffs& c, float* p, const float* g, float* m, float* v, size_t n,
              uint16_t* out16, int out16Kind) {
  adamKernel<Avx2Lanes>(c, p, g, m, v, n, out16, out16Kind);
}

void sgdAvx2(const SgdCoeffs& c, float* p, const float* g, float* buf, size_t n, uint16_t* out16,
             int out16Kind) {
  sgdKernel<Avx2Lanes>(c, p, g, buf, n, out16, out16Kind);
}

void to16Avx2(const float* src, uint16_t* dst, size_t n, int kind) {
  to16Kernel<Avx2Lanes>(src, dst, n, kind);
}

}  // namespace ds::zero::kernels

#pragma GCC pop_options
