// loadF / storeF: an element of fp32, bf16 or fp16 storage to and from fp32 inside a kernel, with
// the rounding of runtime/tensor/math/bf16_math.h for bf16 (nearest even, NaN kept: core/dtype.h's
// floatToBf16) and __float2half_rn for fp16 (nearest even, +-inf beyond fp16's range, subnormals
// kept: the host's roundToFp16), so every kernel of runtime/tensor/cuda narrows the same way.
// Device code only.
#pragma once

#include "core/dtype.h"
#include "runtime/tensor/math/bf16_math.h"
#include "runtime/tensor/math/fp16_math.h"

namespace ds::runtime::cuda {

__device__ __forceinline__ float loadF(const float* p) { return *p; }
__device__ __forceinline__ float loadF(const bf16* p) { return math::bf16BitsToF32(p->bits); }
__device__ __forceinline__ void storeF(float* p, float v) { *p = v; }
__device__ __forceinline__ void storeF(bf16* p, float v) { p->bits = math::f32ToBf16Bits(v); }
__device__ __forceinline__ float loadF(const fp16* p) { return math::fp16BitsToF32(p->bits); }
__device__ __forceinline__ void storeF(fp16* p, float v) { p->bits = math::f32ToFp16Bits(v); }

}  // namespace ds::runtime::cuda
