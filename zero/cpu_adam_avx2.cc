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
  static void store(float* dst, V value) { _mm256_storeu_ps(dst, value); }
  static V set(float value) { return _mm256_set1_ps(value); }
  static V mul(V lhs, V rhs) { return _mm256_mul_ps(lhs, rhs); }
  static V fma(V lhs, V rhs, V addend) { return _mm256_fmadd_ps(lhs, rhs, addend); }
  static V sqrt(V value) { return _mm256_sqrt_ps(value); }
  static V div(V lhs, V rhs) { return _mm256_div_ps(lhs, rhs); }
  // kind: 1 bf16 (ScalarLanes::store16's rounding, lane-wise), 2 fp16.
  static void store16(uint16_t* dst, V value, int kind) {
    if (kind == 1) {
      const __m256i bits = _mm256_castps_si256(value);
      const __m256i absu = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
      const __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
      __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
      rounded = _mm256_srli_epi32(rounded, 16);
      const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
      rounded = _mm256_blendv_epi8(rounded, quiet, nan);
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
    } else if (kind == 2) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                       _mm256_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
};

}  // namespace

void adamAvx2(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
              float* expAvgSq, size_t count, uint16_t* out16, int out16Kind) {
  adamKernel<Avx2Lanes>(coeffs, params, grads, expAvg, expAvgSq, count, out16, out16Kind);
}

void sgdAvx2(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
             uint16_t* out16, int out16Kind) {
  sgdKernel<Avx2Lanes>(coeffs, params, grads, buf, count, out16, out16Kind);
}

void to16Avx2(const float* src, uint16_t* dst, size_t count, int kind) {
  to16Kernel<Avx2Lanes>(src, dst, count, kind);
}

}  // namespace ds::zero::kernels

#pragma GCC pop_options
