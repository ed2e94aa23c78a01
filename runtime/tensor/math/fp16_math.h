// fp16 <-> fp32 on 16-bit words, callable from host and CUDA code, and the fp16 overloads of
// bf16_math.h's element I/O (loadF32 / storeAs) for kernels templated on the storage type.
// Rounding: nearest even, +-inf beyond fp16's range, subnormals kept, NaN stays NaN; on the
// device __float2half_rn, on the host core/dtype.h's floatToFp16 (bit for bit what _Float16
// does), so both compilers narrow the same way (tests/core/dtype_test.cc checks the host one).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "runtime/tensor/math/bf16_math.h"
#include "runtime/tensor/math/hd.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

namespace ds::runtime::math {

DS_HD inline float fp16BitsToF32(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return fp16ToFloat(fp16{h});
#endif
}

DS_HD inline uint16_t f32ToFp16Bits(float f) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(f));
#else
  return floatToFp16(f).bits;
#endif
}

DS_HD inline float loadF32(fp16 x) { return fp16BitsToF32(x.bits); }
template <>
DS_HD inline fp16 storeAs<fp16>(float x) {
  return fp16{f32ToFp16Bits(x)};
}

}  // namespace ds::runtime::math
