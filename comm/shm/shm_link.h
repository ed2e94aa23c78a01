// ShmLink: a group's mapped shared-memory segment and the rules for using it: its layout (a
// header, one state record per rank, one slot per rank of two pipeline halves), the step (every
// member arrives, then waits for every other: a barrier over per-rank sequence numbers, spin
// then yield then futex), and failure: a wait past the timeout, a member whose process is gone
// or whose endpoint closed, records the culprit in the header, which fails every member's wait
// at once with a CommError naming it. Not a collective. Used by one thread at a time (the
// group's worker); abort state is shared through the segment.
// Single copy (cma.h): each record also carries its member's pid, the address of the record in
// the member's own mapping (the probe reads it back through CMA) and, per collective, the
// addresses of the member's buffers (published before the collective's entry step, valid until
// its exit step). agreeOnCma decides once, the same on every member, whether collectives of at
// least cmaMinBytes take that path.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "comm/shm/peer_maps.h"
#include "comm/shm/shm_segment.h"

namespace ds::comm::shm_impl {

// Segment bytes for `size` ranks with slots of `slotBytes` (a multiple of 4096).
size_t segmentBytes(int size, size_t slotBytes);

class ShmLink {
 public:
  // seg is mapped by this rank (the header initialized by its creator, initHeader); this rank
  // records its process id and counts itself as mapped. globalRanks[i]: world rank of group rank
  // i (messages only).
  ShmLink(ShmSegment seg, int rank, int size, size_t slotBytes, std::chrono::milliseconds timeout,
          std::vector<int> globalRanks);
  ~ShmLink();  // closes this endpoint: members still waiting on it fail at once
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  // The creator's part, before publishing the name: writes the header of a zeroed segment.
  static void initHeader(char* base, int size, size_t slotBytes);

  // Waits (up to the timeout) until every local rank has mapped the segment, then removes its
  // name. TimeoutError naming how many never mapped it; the CommError of `failed` when it
  // returns a text (polled every 50 ms: a member that could not open the segment). The name is
  // removed either way.
  void awaitMapped(const std::function<std::string()>& failed);

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t halfBytes() const { return slotBytes_ / 2; }
  char* slot(int r, int half) const;
  // The slot half the next chunk uses: alternating across chunks of all collectives, so a half
  // is refilled only after a later chunk's step, which every member reaches done reading it.
  int nextHalf() { return static_cast<int>(chunks_++ % 2); }

  // One step: arrive, then wait for every member to arrive. `what` names the collective.
  void step(const char* what);
  // Throws what broke the group, if anything did (each collective starts with it).
  void checkUsable() const;
  // Per-rank fp32 scratch (reused; grows, never shrinks). Indices 0 and 1: reduceSlice's.
  float* scratch(int index, size_t floats);

  // One step, at group creation, on every member: whether collectives may copy straight between
  // the members' buffers (cma.h). Each member probes every peer (a CMA read of the peer's record
  // in the peer's own address space, which must equal the record seen in the segment) unless
  // `wanted` is false; the path is on only when every member wants it and every probe passed.
  // Returns the reason when it is off ("" when on).
  std::string agreeOnCma(bool wanted, size_t minBytes);
  // Whether a collective on `bytes` (> 0) takes the single-copy path.
  bool cmaFor(size_t bytes) const { return cmaOn_ && bytes > 0 && bytes >= cmaMinBytes_; }
  size_t cmaMinBytes() const { return cmaMinBytes_; }
  // The single-copy reductions' chunk per peer in bytes (cmaChunkBytes in shm_collectives.h).
  void setCmaChunkBytes(size_t bytes) { cmaChunkBytes_ = bytes; }
  size_t cmaChunkBytes() const { return cmaChunkBytes_; }
  // One step pair, at group creation, on every member (after agreeOnCma): whether members may map
  // each other's registered buffers (comm/shared_host_buffer.h). Each member registers a probe page
  // holding its process id, and maps every peer's through /proc (peer_maps.h) and checks it,
  // unless `wanted` is false; on only when every member wants it and every probe passed. Works
  // where CMA is refused, e.g. by Yama's ptrace_scope 1 (it restricts attaching, not reading
  // /proc/<pid>/fd) or a container's seccomp profile. Returns the reason when off ("" when on).
  std::string agreeOnMap(bool wanted);
  // Whether the members map each other's registered buffers (agreeOnMap).
  bool mapPeers() const { return mapOn_; }
  // Whether a collective on `bytes` (> 0) may take the single-copy path with CMA off: only when
  // every member's buffer turns out registered (enterMapped decides, the same on every member).
  bool mapOnlyFor(size_t bytes) const {
    return !cmaOn_ && mapOn_ && bytes > 0 && bytes >= cmaMinBytes_;
  }
  // Publishes `first` (as publish) and takes the entry step; true when every member p published a
  // registered region holding bytesOf(p) bytes from its buffer (bytesOf(p) == 0: p's buffer is not
  // needed), so the single-copy path can map every peer; false: the copy path, on every member.
  bool enterMapped(const void* first, const std::function<size_t(int)>& bytesOf, const char* what);
  // This member's buffers for the current collective (before its entry step), and the
  // registered region of the first, if any (while mapPeers()).
  void publish(const void* first, const void* second);
  // Peer p's published buffer (0: first, 1: second), an address in p's process.
  char* peerBuffer(int peer, int which) const;
  // This process's address of peer p's first published buffer when it lies in a registered
  // region this member maps (mapped now if need be) that holds at least `bytes` from it; nullptr:
  // copy with peerRead/peerWrite (with CMA off those fail the group, naming the peer: enterMapped
  // made sure every peer is registered). Non-null also marks this member busy, as a first copy
  // does.
  char* peerMapped(int peer, size_t bytes, const char* what);
  // Regions of peers mapped now (tests).
  size_t peerRegionsMapped() const { return maps_.regionsMapped(); }
  // Copies between this process and peer p's memory; a failure records p as the culprit (every
  // member's wait fails) and throws CommError naming the collective, both ranks and the errno.
  // Each first marks this member busy (until its next step) and fails at once if the group has
  // failed, so a member that fails (fail) can wait until no live peer may still write into its
  // buffers before it throws (its caller may free them).
  void peerRead(int peer, const void* remote, void* local, size_t bytes, const char* what);
  void peerWrite(int peer, void* remote, const void* local, size_t bytes, const char* what);

  struct State;  // one member's record in the segment (shm_link.cc)

 private:
  State& state(int r) const;
  void waitFor(int peer, uint32_t target, const char* what);
  [[noreturn]] void fail(int culprit, const char* what, const std::string& detail, bool timeout);
  void wakeAll();
  std::string describe(int groupRank) const;
  int32_t abortedBy() const;              // the recorded culprit, or -1
  void beforeRemote(const char* what);    // marks this member busy; throws if the group failed
  void publishRegion(const void* first);  // the region record of publish (none: id 0)
  void quiesce();  // fail's wait for the others' remoteBusy to clear (bounded)
  [[noreturn]] void failCma(int peer, const char* what, const char* dir, size_t bytes, int err);

  ShmSegment seg_;
  int rank_;
  int size_;
  size_t slotBytes_;
  std::chrono::milliseconds timeout_;
  std::vector<int> globalRanks_;
  uint32_t seq_ = 0;
  uint64_t chunks_ = 0;
  std::exception_ptr broken_;
  std::vector<std::vector<float>> scratch_{2};
  bool cmaOn_ = false;
  bool mapOn_ = false;
  PeerMaps maps_;
  size_t cmaMinBytes_ = 0;
  size_t cmaChunkBytes_ = 256 << 10;
};

}  // namespace ds::comm::shm_impl
