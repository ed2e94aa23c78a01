// Ring allreduce: ring reduce-scatter, avg division on the owned block, ring allgather. Every rank
// ends with bitwise-identical values (each block is reduced once, by its owner, then copied).
// Bandwidth-optimal: each rank sends 2(n-1)/n of the buffer. fp16/bf16 run through fp32 scratch.
#include <vector>

#include "comm/gloo/collectives.h"
#include "comm/gloo/reduce_kernels.h"

namespace ds::comm::gloo_impl {

void allreduceRing(GlooLink& link, void* data, size_t count, DType t, ReduceOp op) {
  const int n = link.size(), r = link.rank();
  if (count == 0) return;
  DType wt = workType(t);
  void* work = data;
  if (wt != t) {
    work = link.scratch(0, count * dtypeSize(wt));
    toWork(data, t, work, count);
  }
  Blocks b = evenBlocks(count, n);
  uint64_t slots = link.collectiveSlots();
  char* mine = static_cast<char*>(work) + b.offsets[r] * dtypeSize(wt);
  // The allgather's receives are posted first, so no reduced block waits for a ready notice.
  auto posted = postAllgatherRecvs(link, work, dtypeSize(wt), b, slots + n, "allreduce");
  reduceScatterBlocks(link, work, mine, wt, b, op, slots, "allreduce");
  finishAvg(mine, b.counts[r], wt, op, n);
  ringAllgatherInPlace(link, work, dtypeSize(wt), b, slots + n, "allreduce", &posted);
  if (wt != t) fromWork(work, t, data, count);
}

}  // namespace ds::comm::gloo_impl
