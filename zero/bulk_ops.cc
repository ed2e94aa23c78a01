// Bulk element-wise loops (see bulk_ops.h): serial below kParallelBytes, else static chunks of
// kChunkBytes over OpenMP threads.
#include "zero/bulk_ops.h"

#include <cstring>

namespace ds::zero {
namespace {

constexpr size_t kParallelBytes = size_t(4) << 20;  // below: one thread (a region costs us)
constexpr size_t kChunkBytes = size_t(1) << 20;

// body(begin, end) over [0, bytes) in kChunkBytes pieces (aligned to `align` bytes).
template <class Body>
void forByteChunks(size_t bytes, size_t align, Body&& body) {
  if (bytes < kParallelBytes) {
    body(size_t(0), bytes);
    return;
  }
  const size_t chunk = kChunkBytes / align * align;
  const long chunks = long((bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (long c = 0; c < chunks; ++c) {
    const size_t begin = size_t(c) * chunk;
    const size_t end = begin + chunk < bytes ? begin + chunk : bytes;
    body(begin, end);
  }
}

}  // namespace

void bulkCopyBytes(void* dst, const void* src, size_t bytes) {
  forByteChunks(bytes, 1, [&](size_t begin, size_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                end - begin);
  });
}

void bulkCopy(float* dst, const float* src, size_t count) {
  bulkCopyBytes(dst, src, count * sizeof(float));
}

void bulkZero(float* dst, size_t count) {
  forByteChunks(count * sizeof(float), sizeof(float), [&](size_t begin, size_t end) {
    std::memset(reinterpret_cast<char*>(dst) + begin, 0, end - begin);
  });
}

void bulkAdd(float* dst, const float* src, size_t count) {
  forByteChunks(count * sizeof(float), sizeof(float), [&](size_t begin, size_t end) {
    float* __restrict out = dst + begin / sizeof(float);
    const float* __restrict add = src + begin / sizeof(float);
    const size_t elems = (end - begin) / sizeof(float);
#pragma omp simd
    for (size_t elem = 0; elem < elems; ++elem) out[elem] += add[elem];
  });
}

}  // namespace ds::zero
