// Pipelined chain broadcast: ranks form a chain starting at root; each forwards segment k to the
// next as soon as it has it, so large buffers move at link speed whatever n is. Every receive is
// posted up front (one slot per segment). Segment size: DS_GLOO_SEGMENT_BYTES.
#include <vector>

#include "comm/gloo/collectives.h"

namespace ds::comm::gloo_impl {

void broadcastChain(GlooLink& link, void* data, size_t bytes, int root) {
  const int n = link.size(), r = link.rank();
  if (n == 1 || bytes == 0) return;
  const int pos = (r - root + n) % n;
  const int prev = (r + n - 1) % n, next = (r + 1) % n;
  const bool hasNext = pos<n - 1, hasPrev = pos> 0;
  size_t seg = std::max(segmentBytes(), (bytes >> 19) + 1);
  size_t nseg = (bytes + seg - 1) / seg;
  uint64_t slots = link.collectiveSlots();
  char* base = static_cast<char*>(data);
  std::vector<UBuf> recvs(nseg), sends(nseg);
  auto segLen = [&](size_t k) { return std::min(seg, bytes - k * seg); };
  if (hasPrev) {
    for (size_t k = 0; k < nseg; ++k) {
      recvs[k] = link.buffer(base + k * seg, segLen(k));
      link.recv(recvs[k], prev, slots + k, 0, segLen(k), "broadcast");
    }
  }
  for (size_t k = 0; k < nseg; ++k) {
    if (hasPrev) link.waitRecv(recvs[k], prev, "broadcast");
    if (hasNext) {
      sends[k] = link.buffer(base + k * seg, segLen(k));
      link.send(sends[k], next, slots + k, 0, segLen(k), "broadcast");
    }
  }
  if (hasNext) {
    for (size_t k = 0; k < nseg; ++k) link.waitSend(sends[k], next, "broadcast");
  }
}

}  // namespace ds::comm::gloo_impl
