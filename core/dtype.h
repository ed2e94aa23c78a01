// Element types shared by comm, zero and runtime, and scalar fp16/bf16 <-> fp32 conversion
// (round to nearest even; NaN stays NaN). Vectorized bulk conversions live with their users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace ds {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8, kU16 };

constexpr size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kU16: return 2;
  }
  return 0;
}

// "fp32", "fp16", "bf16", "int32", "int64", "uint8", "uint16".
std::string_view dtypeName(DType t);
// Safetensors spelling: F32, F16, BF16, I32, I64, U8, U16.
std::string_view dtypeSafetensorsName(DType t);

// Storage types: plain 16-bit words with explicit conversion, never implicit arithmetic.
struct bf16 {
  uint16_t bits;
};
struct fp16 {
  uint16_t bits;
};

inline float bf16ToFloat(bf16 h) {
  uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return bf16{static_cast<uint16_t>(u >> 16)};
}

// Portable conversions, bit for bit what _Float16 does (tests/core/dtype_test.cc compares them
// over every fp16 value and a sweep of floats). Used where the compiler has no _Float16 (clang 14
// on x86 without AVX512-FP16: the libFuzzer and lint builds).
inline float fp16ToFloatSoft(fp16 h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu, man = h.bits & 0x3ffu, u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);  // inf; NaN made quiet
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: normalize
    exp = 113u;
    while ((man & 0x400u) == 0) man <<= 1, --exp;
    u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline fp16 floatToFp16Soft(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: keep the top payload bits, stay quiet
    return fp16{static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
  if (a >= 0x477ff000u) return fp16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (a >= 0x38800000u) {  // fp16 normal: drop 13 bits, round to nearest even
    uint32_t v = a - 0x38000000u;
    v += 0xfffu + ((v >> 13) & 1u);
    return fp16{static_cast<uint16_t>(sign | (v >> 13))};
  }
  if (a < 0x33000000u) return fp16{sign};  // below half the smallest subnormal: zero
  // fp16 subnormal: the value in units of 2^-24, rounded to nearest even.
  const uint32_t man = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - (a >> 23);  // 14..24
  uint32_t q = man >> shift;
  const uint32_t rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return fp16{static_cast<uint16_t>(sign | q)};
}

#if defined(__FLT16_MANT_DIG__)
inline float fp16ToFloat(fp16 h) {
  _Float16 v;
  std::memcpy(&v, &h.bits, 2);
  return static_cast<float>(v);
}

inline fp16 floatToFp16(float f) {
  _Float16 v = static_cast<_Float16>(f);
  fp16 h;
  std::memcpy(&h.bits, &v, 2);
  return h;
}
#else
inline float fp16ToFloat(fp16 h) { return fp16ToFloatSoft(h); }
inline fp16 floatToFp16(float f) { return floatToFp16Soft(f); }
#endif

}  // namespace ds
