// ShmLink's per-member record in the segment (shm_link.h) and the values of its CMA verdict:
// shared by shm_link.cc (steps, failure) and shm_link_cma.cc (the single-copy probe, copies and
// peer mappings).
// Invariant: a record is written by its member only, and read by the others after a step that
// follows the write (or, for pid/procId/self, after the member counted itself as mapped).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "comm/shared_host_buffer.h"
#include "comm/shm/shm_link.h"

namespace ds::comm::shm_impl {

constexpr size_t kIdBytes = 72;

struct ShmLink::State {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
  std::atomic<uint32_t> closed;
  int32_t pid;            // getpid() of the member (CMA), written before it counts as mapped
  char procId[kIdBytes];  // localProcessId() of the member, written before it counts as mapped
  uint64_t buffers[2];    // the current collective's buffers in the member's address space
  uint64_t self;          // this record's address in the member's address space (CMA probe)
  int32_t cmaVerdict;     // agreeOnCma: 0 ok, > 0 errno of the probe, kCma* below
  int32_t cmaPeer;        // the group rank whose probe failed (when cmaVerdict > 0)
  // 1 from this member's first CMA copy of a collective until its next step (or its failure):
  // while set, it may be writing into the others' buffers (ShmLink::fail waits for it to clear).
  std::atomic<uint32_t> remoteBusy;
  uint32_t pad;
  // Where buffers[0] lies when it is in a registered region (comm/shared_host_buffer.h; id 0:
  // it is not), and the member's count of released regions (peer_maps.h), both published with
  // the buffers.
  SharedRegion region;
  uint64_t regionsReleased;
  int32_t mapVerdict;  // agreeOnMap: 0 ok, > 0 errno, kMap* below
  int32_t mapPeer;     // the group rank whose probe failed (when mapVerdict != 0 and not kMapOff)
};
static_assert(sizeof(ShmLink::State) == 192);

// agreeOnCma's verdicts besides 0 (ok) and errno values.
inline constexpr int32_t kCmaUnset = -1;     // not yet decided
inline constexpr int32_t kCmaOff = -2;       // DS_COMM_SHM_CMA=0 on this member
inline constexpr int32_t kCmaOtherNs = -3;   // a peer runs in another pid namespace
inline constexpr int32_t kCmaMismatch = -4;  // another process answered at the peer's pid

// agreeOnMap's verdicts besides 0 (ok).
inline constexpr int32_t kMapOff = -2;       // DS_COMM_SHM_MAP=0 (or the option) on this member
inline constexpr int32_t kMapNoRegion = -3;  // this member could not make a registered probe
inline constexpr int32_t kMapFailed = -4;    // a peer's probe could not be mapped (logged)
inline constexpr int32_t kMapMismatch = -5;  // a peer's probe mapped to other contents

}  // namespace ds::comm::shm_impl
