// Reduce-scatter with uneven blocks (libgloo has no new-style reduce_scatter): one direct round
// through a receive channel up to DS_GLOO_DIRECT_REDUCE_SCATTER_BYTES, above it recursive halving
// at n = 4, 8, ..., the ring otherwise (reduceScatterBlocks). The input is
// never modified. fp32/int32/int64 reduce straight from the input into the output when the output
// is this rank's own block of the input or lies outside it; fp16/bf16, or an output overlapping
// another part of the input, go through a (widened) scratch copy. Each rank sends (n-1)/n of it.
#include <functional>
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {
namespace {

bool overlaps(const char* a, size_t aBytes, const char* b, size_t bBytes) {
  std::less<const char*> lt;  // total order over unrelated pointers
  return aBytes > 0 && bBytes > 0 && lt(a, b + bBytes) && lt(b, a + aBytes);
}

// Small buffers: one direct round through a receive channel; else halving or the ring.
void reduceScatterAny(GlooLink& link, const void* in, void* out, DType t, const Blocks& b,
                      ReduceOp op) {
  const size_t bytes = (b.offsets.back() + b.counts.back()) * dtypeSize(t);
  if (link.size() > 1 && bytes <= directReduceScatterBytes() &&
      directReduceScatter(link, in, out, t, b, op, "reduce_scatter")) {
    return;
  }
  reduceScatterBlocks(link, in, out, t, b, op, link.collectiveSlots(), "reduce_scatter");
}

}  // namespace

void reduceScatterRing(GlooLink& link, const void* input, void* output,
                       const std::vector<size_t>& counts, DType t, ReduceOp op) {
  const int n = link.size(), r = link.rank();
  Blocks b = blocksFrom(counts);
  size_t total = b.offsets.back() + b.counts.back();
  if (total == 0) return;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  if (isReduceNative(t)) {
    const size_t es = dtypeSize(t);
    const char* own = in + b.offsets[r] * es;
    if (out == own || !overlaps(out, b.counts[r] * es, in, total * es)) {
      reduceScatterAny(link, in, out, t, b, op);
      finishAvg(out, b.counts[r], t, op, n);
      return;
    }
  }
  DType wt = workType(t);
  const size_t es = dtypeSize(wt);
  char* work = link.scratch(0, total * es);
  toWork(input, t, work, total);
  char* mine = work + b.offsets[r] * es;
  reduceScatterAny(link, work, mine, wt, b, op);
  finishAvg(mine, b.counts[r], wt, op, n);
  fromWork(mine, t, output, b.counts[r]);
}

}  // namespace ds::comm::gloo_impl
