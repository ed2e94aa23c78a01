// Reduce to one root: ring reduce-scatter on a scratch copy, then every rank sends its reduced
// block to root, which assembles them into its buffer. Non-root buffers are left untouched.
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {

void reduceToRoot(GlooLink& link, void* data, size_t count, DType t, int root, ReduceOp op) {
  const int n = link.size(), r = link.rank();
  if (count == 0) return;
  DType wt = workType(t);
  const size_t es = dtypeSize(wt);
  char* work = link.scratch(0, count * es);
  toWork(data, t, work, count);
  Blocks b = evenBlocks(count, n);
  uint64_t slots = link.collectiveSlots();
  reduceScatterBlocks(link, work, work + b.offsets[r] * es, wt, b, op, slots, "reduce");
  finishAvg(work + b.offsets[r] * es, b.counts[r], wt, op, n);
  const uint64_t gatherSlot = slots + n;
  if (r == root) {
    std::vector<UBuf> recvs(n);
    for (int p = 0; p < n; ++p) {
      if (p == r || b.counts[p] == 0) continue;
      recvs[p] = link.buffer(work + b.offsets[p] * es, b.counts[p] * es);
      link.recv(recvs[p], p, gatherSlot, 0, b.counts[p] * es, "reduce");
    }
    for (int p = 0; p < n; ++p) {
      if (recvs[p]) link.waitRecv(recvs[p], p, "reduce");
    }
    fromWork(work, t, data, count);
  } else if (b.counts[r] > 0) {
    UBuf send = link.buffer(work + b.offsets[r] * es, b.counts[r] * es);
    link.send(send, root, gatherSlot, 0, b.counts[r] * es, "reduce");
    link.waitSend(send, root, "reduce");
  }
}

}  // namespace ds::comm::gloo_impl
