// Rank-order reduction of one slice over the members' slots (shm_collectives.h): the arithmetic
// is comm/gloo/reduce_kernels', so 16-bit sums accumulate in fp32 and round once, as in gloo.
#include <algorithm>
#include <cstring>

#include "comm/gloo/reduce_kernels.h"
#include "comm/shm/shm_collectives.h"

namespace ds::comm::shm_impl {
namespace {

constexpr size_t kHalfBlock = 4096;  // fp32 staging per pass: 16 KiB, stays in L1

void reduceNative(void* dst, const std::vector<const char*>& srcs, size_t count, DType t,
                  ReduceOp op) {
  int n = static_cast<int>(srcs.size());
  if (n == 1) {
    std::memcpy(dst, srcs[0], count * dtypeSize(t));
  } else {
    gloo_impl::reduceFrom(dst, srcs[0], srcs[1], count, t, op);
    for (int p = 2; p < n; ++p)
      gloo_impl::reduceInto(dst, srcs[static_cast<size_t>(p)], count, t, op);
  }
  gloo_impl::finishAvg(dst, count, t, op, n);
}

void reduceHalf(ShmLink& link, void* dst, const std::vector<const char*>& srcs, size_t count,
                DType t, ReduceOp op) {
  float* acc = link.scratch(0, kHalfBlock);
  float* in = link.scratch(1, kHalfBlock);
  int n = static_cast<int>(srcs.size());
  for (size_t at = 0; at < count; at += kHalfBlock) {
    size_t m = std::min(kHalfBlock, count - at);
    gloo_impl::widenToF32(srcs[0] + at * 2, t, acc, m);
    for (int p = 1; p < n; ++p) {
      gloo_impl::widenToF32(srcs[static_cast<size_t>(p)] + at * 2, t, in, m);
      gloo_impl::reduceInto(acc, in, m, DType::kF32, op);
    }
    gloo_impl::finishAvg(acc, m, DType::kF32, op, n);
    gloo_impl::narrowFromF32(acc, t, static_cast<char*>(dst) + at * 2, m);
  }
}

}  // namespace

bool reducible(DType t) { return gloo_impl::isReduceNative(t) || gloo_impl::isHalf(t); }

void reduceSlice(ShmLink& link, void* dst, const std::vector<const char*>& srcs, size_t count,
                 DType t, ReduceOp op) {
  if (count == 0) return;
  if (gloo_impl::isHalf(t)) {
    reduceHalf(link, dst, srcs, count, t, op);
  } else {
    reduceNative(dst, srcs, count, t, op);
  }
}

}  // namespace ds::comm::shm_impl
