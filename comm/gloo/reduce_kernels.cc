// Reduction kernels: plain loops the compiler vectorizes; one switch on (dtype, op) per call, never
// per element. Max/min follow std::max/std::min (a NaN in acc propagates, one in `in` may not).
#include "comm/gloo/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace ds::comm::gloo_impl {
namespace {

template <typename T>
void reduceTyped(T* __restrict acc, const T* __restrict in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) acc[i] += in[i];
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      return;
  }
}

// No __restrict: dst may alias a or b exactly (the compiler vectorizes behind an overlap check).
template <typename T>
void reduceFromTyped(T* dst, const T* a, const T* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(a[i], b[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(a[i], b[i]);
      return;
  }
}

template <typename T>
void divideTyped(T* buf, size_t n, int size) {
  const T d = static_cast<T>(size);
  for (size_t i = 0; i < n; ++i) buf[i] /= d;
}

}  // namespace

bool isReduceNative(DType t) {
  return t == DType::kF32 || t == DType::kI32 || t == DType::kI64;
}

bool isHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

void reduceInto(void* acc, const void* in, size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::kF32:
      return reduceTyped(static_cast<float*>(acc), static_cast<const float*>(in), n, op);
    case DType::kI32:
      return reduceTyped(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n, op);
    case DType::kI64:
      return reduceTyped(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n, op);
    default:
      throw NotSupported(fmt::format("gloo: no reduction kernel for dtype {}", dtypeName(t)));
  }
}

void reduceFrom(void* dst, const void* a, const void* b, size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::kF32:
      return reduceFromTyped(static_cast<float*>(dst), static_cast<const float*>(a),
                             static_cast<const float*>(b), n, op);
    case DType::kI32:
      return reduceFromTyped(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a),
                             static_cast<const int32_t*>(b), n, op);
    case DType::kI64:
      return reduceFromTyped(static_cast<int64_t*>(dst), static_cast<const int64_t*>(a),
                             static_cast<const int64_t*>(b), n, op);
    default:
      throw NotSupported(fmt::format("gloo: no reduction kernel for dtype {}", dtypeName(t)));
  }
}

void finishAvg(void* buf, size_t n, DType t, ReduceOp op, int size) {
  if (op != ReduceOp::kAvg || size == 1) return;
  switch (t) {
    case DType::kF32: return divideTyped(static_cast<float*>(buf), n, size);
    case DType::kI32: return divideTyped(static_cast<int32_t*>(buf), n, size);
    case DType::kI64: return divideTyped(static_cast<int64_t*>(buf), n, size);
    default:
      throw NotSupported(fmt::format("gloo: no avg kernel for dtype {}", dtypeName(t)));
  }
}

void widenToF32(const void* src, DType t, float* dst, size_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloat(bf16{s[i]});
  } else {
    DS_CHECK(t == DType::kF16, "widenToF32 on {}", dtypeName(t));
    for (size_t i = 0; i < n; ++i) dst[i] = fp16ToFloat(fp16{s[i]});
  }
}

void narrowFromF32(const float* src, DType t, void* dst, size_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  if (t == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d[i] = floatToBf16(src[i]).bits;
  } else {
    DS_CHECK(t == DType::kF16, "narrowFromF32 on {}", dtypeName(t));
    for (size_t i = 0; i < n; ++i) d[i] = floatToFp16(src[i]).bits;
  }
}

DType workType(DType t) { return isHalf(t) ? DType::kF32 : t; }

void toWork(const void* src, DType t, void* dst, size_t n) {
  if (isHalf(t)) return widenToF32(src, t, static_cast<float*>(dst), n);
  if (src != dst && n > 0) std::memmove(dst, src, n * dtypeSize(t));
}

void fromWork(const void* src, DType t, void* dst, size_t n) {
  if (isHalf(t)) return narrowFromF32(static_cast<const float*>(src), t, dst, n);
  if (src != dst && n > 0) std::memmove(dst, src, n * dtypeSize(t));
}

}  // namespace ds::comm::gloo_impl
