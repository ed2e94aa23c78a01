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
  static void store(float* dst, V value) { _mm512_storeu_ps(dst, value); }
  static V set(float value) { return _mm512_set1_ps(value); }
  static V mul(V lhs, V rhs) { return _mm512_mul_ps(lhs, rhs); }
  static V fma(V lhs, V rhs, V addend) { return _mm512_fmadd_ps(lhs, rhs, addend); }
  static V sqrt(V value) { return _mm512_sqrt_ps(value); }
  static V div(V lhs, V rhs) { return _mm512_div_ps(lhs, rhs); }
  // kind: 1 bf16 (ScalarLanes::store16's rounding, lane-wise), 2 fp16.
  static void store16(uint16_t* dst, V value, int kind) {
    if (kind == 1) {
      const __m512i bits = _mm512_castps_si512(value);
      const __m512i absu = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(absu, _mm512_set1_epi32(0x7f800000));
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
      __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
      rounded = _mm512_srli_epi32(rounded, 16);
      const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
      rounded = _mm512_mask_blend_epi32(nan, rounded, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(rounded));
    } else if (kind == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                          _mm512_cvtps_ph(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
};

}  // namespace

void adamAvx512(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t count, uint16_t* out16, int out16Kind) {
  adamKernel<Avx512Lanes>(coeffs, params, grads, expAvg, expAvgSq, count, out16, out16Kind);
}

void sgdAvx512(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
               uint16_t* out16, int out16Kind) {
  sgdKernel<Avx512Lanes>(coeffs, params, grads, buf, count, out16, out16Kind);
}

void to16Avx512(const float* src, uint16_t* dst, size_t count, int kind) {
  to16Kernel<Avx512Lanes>(src, dst, count, kind);
}

}  // namespace ds::zero::kernels

#pragma GCC pop_options
