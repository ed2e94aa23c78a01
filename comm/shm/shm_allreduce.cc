// Shared-memory allreduce: per chunk, every rank copies the slices of its chunk that the others
// reduce into its slot (its own slice stays in its buffer); step; rank p reduces slice p of the
// chunk over its own buffer and the others' slots (rank order) into its buffer and its slot;
// step; every rank copies the other slices from their owners' slots. Two steps per chunk; per
// rank about 2x the buffer read and 2x written (at 2 ranks), split across the ranks in parallel.

#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_slices.h"

namespace ds::comm::shm_impl {

void allreduce(ShmLink& link, void* data, size_t count, DType t, ReduceOp op) {
  const size_t bytes = count * dtypeSize(t);
  if (link.cmaFor(bytes)) return allreduceSingleCopy(link, data, count, t, op);
  if (link.mapOnlyFor(bytes)) {
    reserveSingleCopyScratch(link, t);       // nothing to allocate past the entry step
    auto need = [&](int) { return bytes; };  // every member's whole buffer
    if (link.enterMapped(data, need, "allreduce"))
      return allreduceSingleCopy(link, data, count, t, op, /*entered=*/true);
  }
  const size_t es = dtypeSize(t);
  const size_t chunk = link.halfBytes() / es;
  const int n = link.size(), r = link.rank();
  char* d = static_cast<char*>(data);
  std::vector<const char*> srcs(static_cast<size_t>(n));
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off);
    const int h = link.nextHalf();
    char* mine = link.slot(r, h);
    stageOthersSlices(mine, d, off, m, es, n, r);
    link.step("allreduce");
    Slice s = sliceOf(m, n, r);
    for (int p = 0; p < n; ++p) {
      srcs[static_cast<size_t>(p)] =
          p == r ? d + (off + s.begin) * es : link.slot(p, h) + s.begin * es;
    }
    reduceSlice(link, d + (off + s.begin) * es, mine + s.begin * es, srcs, s.count, t, op);
    link.step("allreduce");
    gatherOthersSlices(d, off, m, es, n, r, [&](int p) { return link.slot(p, h); });
  }
}

}  // namespace ds::comm::shm_impl
