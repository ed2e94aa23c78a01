// Bulk bf16 <-> fp32 conversion for activations and weights (OpenMP; round to nearest even, as
// ds::floatToBf16, bit for bit on every path). AVX-512F where the CPU has it, scalar otherwise.
// Not a storage type: bf16 data are plain ds::bf16 words.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ds::runtime {

void bf16ToF32(float* out, const bf16* in, size_t n);
void f32ToBf16(bf16* out, const float* in, size_t n);
// x[i] = float(bf16(x[i])): what a bf16 store followed by a load gives.
void roundToBf16(float* x, size_t n);

namespace detail {
// The AVX-512F loops (bf16_convert_avx512.cc): whole 16-element vectors of [0, n) only, the
// n % 16 tail left to the caller; after the CPU check only.
void bf16ToF32Avx512(float* out, const uint16_t* in, size_t n);
void f32ToBf16Avx512(uint16_t* out, const float* in, size_t n);
void roundToBf16Avx512(float* x, size_t n);
// The scalar loop whatever the CPU (tests).
void roundToBf16Scalar(float* x, size_t n);
}  // namespace detail

}  // namespace ds::runtime
