// AVX-512F bulk bf16 <-> fp32 conversion (see bf16_convert.h), 16 lanes a step over whole
// vectors; the caller converts the n % 16 tail with the scalar ds::floatToBf16. Bit for bit the
// scalar conversion: nearest even by integer arithmetic (not vcvtneps2bf16, which flushes
// subnormals), a NaN kept quiet as (bits >> 16) | 0x40. Run only after the CPU check.
// GCC 12's AVX-512 intrinsics (_mm256_undefined_* inside them) trip -Wuninitialized once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime::detail {
namespace {

#define DS_CVT512 __attribute__((target("avx512f")))

// 16 floats' bits -> their bf16 bits in the low half of each 32-bit lane.
DS_CVT512 inline __m512i roundLanes(__m512i bits) {
  const __m512i absBits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(absBits, _mm512_set1_epi32(0x7f800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

}  // namespace

DS_CVT512 void bf16ToF32Avx512(float* out, const uint16_t* in, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
}

DS_CVT512 void f32ToBf16Avx512(uint16_t* out, const float* in, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    const __m512i r = roundLanes(_mm512_loadu_si512(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
}

DS_CVT512 void roundToBf16Avx512(float* x, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    const __m512i r = roundLanes(_mm512_loadu_si512(x + i));
    _mm512_storeu_si512(x + i, _mm512_slli_epi32(r, 16));
  }
}

}  // namespace ds::runtime::detail
