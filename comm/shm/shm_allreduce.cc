// Shared-memory allreduce: per chunk, every rank copies its chunk into its slot; step; rank p
// reduces slice p of the chunk over all slots (rank order) into its own buffer and back into
// its slot; step; every rank copies the other slices from their owners' slots. Two steps per
// chunk; each rank reads and writes about 3x the buffer, split across all ranks in parallel.
#include <cstring>

#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_slices.h"

namespace ds::comm::shm_impl {

void allreduce(ShmLink& link, void* data, size_t count, DType t, ReduceOp op) {
  const size_t es = dtypeSize(t);
  const size_t chunk = link.halfBytes() / es;
  const int n = link.size(), r = link.rank();
  char* d = static_cast<char*>(data);
  std::vector<const char*> srcs(static_cast<size_t>(n));
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off);
    const int h = link.nextHalf();
    std::memcpy(link.slot(r, h), d + off * es, m * es);
    link.step("allreduce");
    Slice s = sliceOf(m, n, r);
    for (int p = 0; p < n; ++p) srcs[static_cast<size_t>(p)] = link.slot(p, h) + s.begin * es;
    char* mine = d + (off + s.begin) * es;
    reduceSlice(link, mine, srcs, s.count, t, op);
    if (s.count > 0) std::memcpy(link.slot(r, h) + s.begin * es, mine, s.count * es);
    link.step("allreduce");
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      Slice q = sliceOf(m, n, p);
      if (q.count > 0)
        std::memcpy(d + (off + q.begin) * es, link.slot(p, h) + q.begin * es, q.count * es);
    }
  }
}

}  // namespace ds::comm::shm_impl
