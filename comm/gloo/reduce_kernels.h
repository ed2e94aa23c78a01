// Elementwise reduction kernels and 16-bit staging for the gloo backend's own algorithms.
// Not a collective: pure local arithmetic on host memory. Reductions run on fp32, int32 and int64;
// fp16/bf16 buffers are widened to fp32 before a reduction and narrowed once at the end, so every
// 16-bit reduction accumulates in fp32 and is rounded exactly once.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/types.h"
#include "core/dtype.h"

namespace ds::comm::gloo_impl {

// True for the dtypes the kernels reduce directly (fp32, int32, int64).
bool isReduceNative(DType t);
// True for fp16 / bf16 (reduced through an fp32 staging buffer).
bool isHalf(DType t);

// acc[i] = op(acc[i], in[i]) for n elements of type t (native types only). kAvg sums.
void reduceInto(void* acc, const void* in, size_t n, DType t, ReduceOp op);
// dst[i] = op(a[i], b[i]) for n elements (native types only). dst may be a or b exactly (no
// partial overlap): the ring reduces a received segment in place with it.
void reduceFrom(void* dst, const void* a, const void* b, size_t n, DType t, ReduceOp op);
// For kAvg: divides n elements by `size` (integers truncate toward zero); no-op for other ops.
void finishAvg(void* buf, size_t n, DType t, ReduceOp op, int size);

// Widen n fp16/bf16 elements to fp32, and narrow back (round to nearest even).
void widenToF32(const void* src, DType t, float* dst, size_t n);
void narrowFromF32(const float* src, DType t, void* dst, size_t n);

// The type a reduction runs in: fp32 for fp16/bf16, the type itself otherwise.
DType workType(DType t);
// Copies n elements of type t into a work-type buffer (widening 16-bit), and back (narrowing).
void toWork(const void* src, DType t, void* dst, size_t n);
void fromWork(const void* src, DType t, void* dst, size_t n);

}  // namespace ds::comm::gloo_impl
