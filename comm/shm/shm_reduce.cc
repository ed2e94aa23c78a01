// Shared-memory reduce to a root: as the allreduce (shm_allreduce.cc), but only the root copies
// the reduced slices out; the other members reduce into private scratch and leave their own
// buffers untouched.
#include <cstring>

#include "comm/shm/shm_collectives.h"
#include "comm/shm/shm_slices.h"

namespace ds::comm::shm_impl {

void reduce(ShmLink& link, void* data, size_t count, DType t, int root, ReduceOp op) {
  const size_t es = dtypeSize(t);
  const size_t chunk = link.halfBytes() / es;
  const int n = link.size(), r = link.rank();
  char* d = static_cast<char*>(data);
  std::vector<const char*> srcs(static_cast<size_t>(n));
  std::vector<char> tmp;
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off);
    const int h = link.nextHalf();
    std::memcpy(link.slot(r, h), d + off * es, m * es);
    link.step("reduce");
    Slice s = sliceOf(m, n, r);
    for (int p = 0; p < n; ++p) srcs[static_cast<size_t>(p)] = link.slot(p, h) + s.begin * es;
    if (r == root) {
      reduceSlice(link, d + (off + s.begin) * es, srcs, s.count, t, op);
    } else {
      tmp.resize(s.count * es);
      reduceSlice(link, tmp.data(), srcs, s.count, t, op);
      if (s.count > 0) std::memcpy(link.slot(r, h) + s.begin * es, tmp.data(), s.count * es);
    }
    link.step("reduce");
    if (r != root) continue;
    for (int p = 0; p < n; ++p) {
      Slice q = sliceOf(m, n, p);
      if (p != r && q.count > 0) {
        std::memcpy(d + (off + q.begin) * es, link.slot(p, h) + q.begin * es, q.count * es);
      }
    }
  }
}

}  // namespace ds::comm::shm_impl
