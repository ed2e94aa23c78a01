// Bulk element-wise loops over large host buffers (copy, zero, add), split over OpenMP threads
// above a size threshold: the host engine's gradient path moves the whole model's gradients
// several times per step (bucket fill, single-rank reduce, partition accumulate), and one core
// cannot keep up with a GPU producing them. Not reductions: every element is independent, so the
// result is bit-identical to the serial loop at any thread count.
#pragma once

#include <cstddef>

namespace ds::zero {

void bulkCopyBytes(void* dst, const void* src, size_t bytes);
void bulkCopy(float* dst, const float* src, size_t count);
void bulkZero(float* dst, size_t count);
void bulkAdd(float* dst, const float* src, size_t count);  // dst[i] += src[i]

}  // namespace ds::zero
