// Shared-memory reduce to a root: as the allreduce (shm_allreduce.cc), but each rank reduces
// its slice into its slot (the root: into its buffer) and only the root copies the other slices
// out; the other members' buffers are only read.

#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_slices.h"

namespace ds::comm::shm_impl {

void reduce(ShmLink& link, void* data, size_t count, DType t, int root, ReduceOp op) {
  const size_t bytes = count * dtypeSize(t);
  if (link.cmaFor(bytes)) return reduceSingleCopy(link, data, count, t, root, op);
  if (link.mapOnlyFor(bytes)) {
    reserveSingleCopyScratch(link, t);       // nothing to allocate past the entry step
    auto need = [&](int) { return bytes; };  // every member's whole buffer
    if (link.enterMapped(data, need, "reduce"))
      return reduceSingleCopy(link, data, count, t, root, op, /*entered=*/true);
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
    link.step("reduce");
    Slice s = sliceOf(m, n, r);
    for (int p = 0; p < n; ++p) {
      srcs[static_cast<size_t>(p)] =
          p == r ? d + (off + s.begin) * es : link.slot(p, h) + s.begin * es;
    }
    char* dst = r == root ? d + (off + s.begin) * es : mine + s.begin * es;
    reduceSlice(link, dst, nullptr, srcs, s.count, t, op);
    link.step("reduce");
    if (r != root) continue;
    gatherOthersSlices(d, off, m, es, n, r, [&](int p) { return link.slot(p, h); });
  }
}

}  // namespace ds::comm::shm_impl
