// Shared-memory broadcast and barrier. Broadcast: per chunk the root copies it into its slot;
// step; the others copy it out (the root refills a half two chunks later, after a step every
// member reaches only once done reading it). Barrier: one step.
#include <algorithm>
#include <cstring>

#include "comm/shm/shm_collectives.h"

namespace ds::comm::shm_impl {

void broadcast(ShmLink& link, void* data, size_t bytes, int root) {
  if (link.cmaFor(bytes)) return broadcastSingleCopy(link, data, bytes, root);
  auto rootBytes = [&](int p) { return p == root ? bytes : size_t{0}; };  // the others only read
  if (link.mapOnlyFor(bytes) && link.enterMapped(data, rootBytes, "broadcast"))
    return broadcastSingleCopy(link, data, bytes, root, /*entered=*/true);
  const size_t piece = link.halfBytes();
  const int r = link.rank();
  char* d = static_cast<char*>(data);
  for (size_t base = 0; base < bytes; base += piece) {
    const int h = link.nextHalf();
    const size_t l = std::min(piece, bytes - base);
    if (r == root) std::memcpy(link.slot(root, h), d + base, l);
    link.step("broadcast");
    if (r != root) std::memcpy(d + base, link.slot(root, h), l);
  }
}

void barrier(ShmLink& link) { link.step("barrier"); }

}  // namespace ds::comm::shm_impl
