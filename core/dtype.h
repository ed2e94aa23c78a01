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

inline float fp16ToFloat(fp16 h) {
#if defined(__F16C__) || defined(__x86_64__)
  _Float16 v;
  std::memcpy(&v, &h.bits, 2);
  return static_cast<float>(v);
#else
#error "fp16 conversion needs _Float16"
#endif
}

inline fp16 floatToFp16(float f) {
  _Float16 v = static_cast<_Float16>(f);
  fp16 h;
  std::memcpy(&h.bits, &v, 2);
  return h;
}

}  // namespace ds
