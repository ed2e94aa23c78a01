// ShmLink's single-copy part (shm_link.h): the probe every member runs at group creation, the
// per-collective buffer addresses (and registered regions: peer_maps.h), and the CMA copies
// (cma.h) whose failure breaks the group like any other (ShmLink::fail: every member's wait fails
// at once, naming the culprit).
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "comm/shared_host_buffer.h"
#include "comm/shm/cma.h"
#include "comm/shm/shm_link.h"
#include "comm/shm/shm_link_state.h"

namespace ds::comm::shm_impl {
namespace {

// "<boot id>|<pid namespace>" of a localProcessId() (pids are comparable only within it).
std::string hostOf(const char* procId) {
  std::string id(procId, strnlen(procId, kIdBytes));
  auto bar = id.rfind('|');
  return bar == std::string::npos ? std::string() : id.substr(0, bar);
}

std::string errnoText(int err) {
  const char* name = strerrorname_np(err);
  return fmt::format("{} ({})", name ? name : "errno " + std::to_string(err), std::strerror(err));
}

}  // namespace

std::string ShmLink::agreeOnCma(bool wanted, size_t minBytes) {
  State& me = state(rank_);
  int32_t verdict = wanted ? 0 : kCmaOff;
  int32_t culprit = -1;
  const std::string myHost = hostOf(me.procId);
  for (int k = 1; wanted && verdict == 0 && k < size_; ++k) {
    const int peer = (rank_ + k) % size_;
    const State& rec = state(peer);
    culprit = peer;
    if (myHost.empty() || hostOf(rec.procId) != myHost) {
      verdict = kCmaOtherNs;
      break;
    }
    // The peer's record, read through its own mapping, must be the one this member sees.
    char seen[kIdBytes] = {};
    const auto idOffset = static_cast<uint64_t>(rec.procId - reinterpret_cast<const char*>(&rec));
    const int err =
        cma::read(rec.pid, reinterpret_cast<const void*>(rec.self + idOffset), seen, kIdBytes);
    if (err != 0) {
      verdict = err;
    } else if (std::memcmp(seen, rec.procId, kIdBytes) != 0) {
      verdict = kCmaMismatch;
    }
  }
  me.cmaPeer = culprit;
  me.cmaVerdict = verdict;
  step("setup (single-copy probe)");
  std::string why;
  for (int member = 0; member < size_ && why.empty(); ++member) {
    const State& rec = state(member);
    const std::string who = describe(member), peer = describe(rec.cmaPeer);
    switch (rec.cmaVerdict) {
      case 0: break;
      case kCmaOff: why = fmt::format("DS_COMM_SHM_CMA=0 at {}", who); break;
      case kCmaOtherNs:
        why = fmt::format("{} and {} run in different pid namespaces", who, peer);
        break;
      case kCmaMismatch:
        why = fmt::format("{} found another process at the pid of {}", who, peer);
        break;
      default:
        why = fmt::format("{} may not read the memory of {}: {}{}", who, peer,
                          errnoText(rec.cmaVerdict),
                          rec.cmaVerdict == EPERM
                              ? " (ptrace access refused: Yama ptrace_scope, a seccomp filter, "
                                "or a non-dumpable process)"
                              : "");
        break;
    }
  }
  cmaOn_ = why.empty();
  cmaMinBytes_ = minBytes;
  return why;
}

void ShmLink::publish(const void* first, const void* second) {
  State& me = state(rank_);
  me.buffers[0] = reinterpret_cast<uint64_t>(first);
  me.buffers[1] = reinterpret_cast<uint64_t>(second);
  if (mapOn_) publishRegion(first);
}

void ShmLink::publishRegion(const void* first) {
  State& me = state(rank_);
  me.region = (first ? findSharedRegion(first) : std::nullopt).value_or(SharedRegion{});
  me.regionsReleased = sharedRegionsReleased();
}

char* ShmLink::peerBuffer(int peer, int which) const {
  return reinterpret_cast<char*>(state(peer).buffers[which]);
}

char* ShmLink::peerMapped(int peer, size_t bytes, const char* what) {
  const State& rec = state(peer);
  if (!mapOn_ || rec.region.id == 0) return nullptr;
  char* at = maps_.resolve(peer, rec.pid, rec.region, rec.regionsReleased, bytes);
  if (at) beforeRemote(what);
  return at;
}

bool ShmLink::enterMapped(const void* first, const std::function<size_t(int)>& bytesOf,
                          const char* what) {
  publish(first, nullptr);
  step(what);
  for (int member = 0; member < size_; ++member) {
    const size_t need = bytesOf(member);
    if (need == 0) continue;
    const State& rec = state(member);
    const SharedRegion& region = rec.region;
    if (region.id == 0 || region.offset > region.bytes || need > region.bytes - region.offset)
      return false;
  }
  return true;
}

std::string ShmLink::agreeOnMap(bool wanted) {
  State& me = state(rank_);
  int32_t verdict = wanted ? 0 : kMapOff;
  int32_t culprit = -1;
  SharedHostBuffer probe;
  if (wanted) {
    probe = SharedHostBuffer(kIdBytes);
    if (probe.shared()) std::memcpy(probe.data(), me.procId, kIdBytes);
    else verdict = kMapNoRegion;
  }
  publishRegion(verdict == 0 ? probe.data() : nullptr);
  step("setup (peer mapping probe)");
  for (int k = 1; verdict == 0 && k < size_; ++k) {
    const int peer = (rank_ + k) % size_;
    const State& rec = state(peer);
    if (rec.region.id == 0) continue;  // that member's own verdict says why
    culprit = peer;
    const char* seen = maps_.resolve(peer, rec.pid, rec.region, rec.regionsReleased, kIdBytes);
    if (!seen) verdict = kMapFailed;
    else if (std::memcmp(seen, rec.procId, kIdBytes) != 0) verdict = kMapMismatch;
  }
  me.mapPeer = culprit;
  me.mapVerdict = verdict;
  step("setup (peer mapping verdicts)");
  maps_.clear();  // the probes are freed on return
  me.region = SharedRegion{};
  std::string why;
  for (int member = 0; member < size_ && why.empty(); ++member) {
    const State& rec = state(member);
    const std::string who = describe(member), peer = describe(rec.mapPeer);
    switch (rec.mapVerdict) {
      case 0: break;
      case kMapOff:
        why = fmt::format("off at {}: DS_COMM_SHM_MAP=0, or a host's group in a hierarchical one",
                          who);
        break;
      case kMapNoRegion: why = fmt::format("{} could not make shared memory (memfd)", who); break;
      case kMapFailed:
        why = fmt::format("{} could not map the memory of {} through /proc", who, peer);
        break;
      default: why = fmt::format("{} mapped other memory than {}'s", who, peer); break;
    }
  }
  mapOn_ = why.empty();
  return why;
}

void ShmLink::beforeRemote(const char* what) {
  state(rank_).remoteBusy.store(1, std::memory_order_seq_cst);
  const int32_t culprit = abortedBy();
  if (culprit >= 0) fail(culprit, what, "failed (recorded by a member of the group)", false);
}

void ShmLink::peerRead(int peer, const void* remote, void* local, size_t bytes, const char* what) {
  beforeRemote(what);
  const int err = cma::read(state(peer).pid, remote, local, bytes);
  if (err != 0) failCma(peer, what, "read", bytes, err);
}

void ShmLink::peerWrite(int peer, void* remote, const void* local, size_t bytes, const char* what) {
  beforeRemote(what);
  const int err = cma::write(state(peer).pid, remote, local, bytes);
  if (err != 0) failCma(peer, what, "write", bytes, err);
}

void ShmLink::failCma(int peer, const char* what, const char* dir, size_t bytes, int err) {
  fail(peer, what,
       fmt::format("could not be reached: a cross-memory {} of {} bytes failed with {}", dir, bytes,
                   errnoText(err)),
       false);
}

}  // namespace ds::comm::shm_impl
