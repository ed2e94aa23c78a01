// Rank-order reduction of one slice over the members' contributions (shm_collectives.h), block
// by block through a small fp32/native accumulator that stays in L1: each block of every source
// is read before the block of dst is written, so dst may be one of the sources exactly (a rank's
// own contribution is read from its own buffer, not copied to the segment first). The arithmetic
// is comm/gloo/reduce_kernels', so 16-bit sums accumulate in fp32 and round once, as in gloo.
#include <algorithm>
#include <cstring>

#include "comm/gloo/reduce_kernels.h"
#include "comm/shm/shm_collectives.h"

namespace ds::comm::shm_impl {
namespace {

constexpr size_t kBlockBytes = 16 << 10;  // accumulator per pass (work type)

}  // namespace

bool reducible(DType t) { return gloo_impl::isReduceNative(t) || gloo_impl::isHalf(t); }

void reduceSlice(ShmLink& link, void* dst, void* copy, const std::vector<const char*>& srcs,
                 size_t count, DType t, ReduceOp op) {
  if (count == 0) return;
  const DType wt = gloo_impl::workType(t);
  const bool half = wt != t;
  const size_t es = dtypeSize(t), wes = dtypeSize(wt), block = kBlockBytes / wes;
  char* acc = reinterpret_cast<char*>(link.scratch(0, kBlockBytes / 4));
  char* in = reinterpret_cast<char*>(link.scratch(1, kBlockBytes / 4));
  const int n = static_cast<int>(srcs.size());
  char* d = static_cast<char*>(dst);
  char* c = static_cast<char*>(copy);
  for (size_t at = 0; at < count; at += block) {
    const size_t m = std::min(block, count - at);
    auto src = [&](int p) { return srcs[static_cast<size_t>(p)] + at * es; };
    if (half) {
      gloo_impl::widenToF32(src(0), t, reinterpret_cast<float*>(acc), m);
      for (int p = 1; p < n; ++p) {
        gloo_impl::widenToF32(src(p), t, reinterpret_cast<float*>(in), m);
        gloo_impl::reduceInto(acc, in, m, wt, op);
      }
    } else if (n == 1) {
      std::memcpy(acc, src(0), m * es);
    } else {
      gloo_impl::reduceFrom(acc, src(0), src(1), m, wt, op);
      for (int p = 2; p < n; ++p) gloo_impl::reduceInto(acc, src(p), m, wt, op);
    }
    gloo_impl::finishAvg(acc, m, wt, op, n);
    if (half) {
      gloo_impl::narrowFromF32(reinterpret_cast<float*>(acc), t, d + at * es, m);
    } else {
      std::memcpy(d + at * es, acc, m * es);
    }
    if (c) std::memcpy(c + at * es, d + at * es, m * es);
  }
}

}  // namespace ds::comm::shm_impl
