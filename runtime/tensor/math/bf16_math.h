// bf16 <-> fp32 on 16-bit words, callable from host and CUDA code: the same rounding as
// core/dtype.h floatToBf16 (nearest even; a NaN stays a quiet NaN) and the exact widening.
// Not a storage type (see ds::bf16). Invariant: f32ToBf16Bits(x) == floatToBf16(x).bits for
// every float x, on either compiler.
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/tensor/math/hd.h"

namespace ds::runtime::math {

DS_HD inline uint32_t f32Bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

DS_HD inline float bitsF32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

DS_HD inline float bf16BitsToF32(uint16_t h) { return bitsF32(static_cast<uint32_t>(h) << 16); }

DS_HD inline uint16_t f32ToBf16Bits(float f) {
  uint32_t u = f32Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// Element I/O for kernels templated on the storage type: float, or uint16_t holding bf16.
DS_HD inline float loadF32(float x) { return x; }
DS_HD inline float loadF32(uint16_t x) { return bf16BitsToF32(x); }
template <class T>
DS_HD inline T storeAs(float x);
template <>
DS_HD inline float storeAs<float>(float x) {
  return x;
}
template <>
DS_HD inline uint16_t storeAs<uint16_t>(float x) {
  return f32ToBf16Bits(x);
}

}  // namespace ds::runtime::math
