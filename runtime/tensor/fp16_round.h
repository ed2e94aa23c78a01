// roundToFp16: the host's fp16 rounding of fp32 values (fp16 mode's emulation, fp16_hooks.h;
// CpuOps::roundToFp16). The CUDA kernel (__float2half_rn) gives the same values.
#pragma once

#include <cstddef>

namespace ds::runtime {

// In place: each value becomes the fp32 value of its nearest fp16 (round to nearest even, +-inf
// beyond fp16's range, NaN stays NaN). Same result as (float)(_Float16)x.
void roundToFp16(float* x, size_t n);

}  // namespace ds::runtime
