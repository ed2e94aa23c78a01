// PeerMaps: one rank's mappings of its local peers' registered buffers (comm/shared_host_buffer.h),
// through which the single-copy collectives read and write those buffers in place instead of
// copying with CMA. A peer's region is mapped the first time a collective publishes a buffer in
// it: open /proc/<pid>/fd/<fd> (the kernel allows it where CMA is allowed: the same ptrace
// rule), check that the file is the one the peer registered (inode and device), map it whole,
// close the descriptor. Mappings are kept by (peer, region id) until the peer's count of released
// regions changes (then every mapping of that peer goes: one kept would pin memory the peer has
// freed) or the PeerMaps is destroyed. A region that cannot be mapped is remembered (its
// collectives copy with CMA) and the reason logged once at debug level. Memory safety: a peer that
// frees, or dies with, a mapped region leaves its pages alive until this side unmaps them, so a
// late write lands in them and never in memory the peer reuses. Not thread-safe (the link's
// worker uses it).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/shared_host_buffer.h"

namespace ds::comm::shm_impl {

class PeerMaps {
 public:
  explicit PeerMaps(int size) : peers_(static_cast<size_t>(size)) {}
  ~PeerMaps();
  PeerMaps(const PeerMaps&) = delete;
  PeerMaps& operator=(const PeerMaps&) = delete;

  // This process's address of byte `region.offset` of `peer`'s published region (as the peer's
  // findSharedRegion gave it; id 0: none), when it is
  // (or can now be) mapped and holds [offset, offset + bytes); nullptr otherwise. released: the
  // peer's count of released regions as it published it.
  char* resolve(int peer, pid_t pid, const SharedRegion& region, uint64_t released, size_t bytes);
  // Regions mapped now, over all peers (tests, logs).
  size_t regionsMapped() const;
  // Unmaps everything (after ShmLink::agreeOnMap's probes).
  void clear() {
    for (Peer& p : peers_) dropAll(p);
  }

 private:
  struct Mapping {
    char* base = nullptr;  // nullptr: could not be mapped (CMA for it)
    size_t bytes = 0;
  };
  struct Peer {
    std::map<uint64_t, Mapping> byId;
    uint64_t released = 0;
  };
  Mapping open(int peer, pid_t pid, const SharedRegion& region);
  void dropAll(Peer& p);

  std::vector<Peer> peers_;
  bool loggedFailure_ = false;
};

}  // namespace ds::comm::shm_impl
