// PeerMaps (peer_maps.h).
#include "comm/shm/peer_maps.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace ds::comm::shm_impl {

PeerMaps::~PeerMaps() {
  for (Peer& p : peers_) dropAll(p);
}

void PeerMaps::dropAll(Peer& p) {
  for (auto& [id, m] : p.byId)
    if (m.base) ::munmap(m.base, m.bytes);
  p.byId.clear();
}

size_t PeerMaps::regionsMapped() const {
  size_t n = 0;
  for (const Peer& p : peers_)
    for (const auto& [id, m] : p.byId) n += m.base ? 1 : 0;
  return n;
}

PeerMaps::Mapping PeerMaps::open(int peer, pid_t pid, const SharedRegion& region) {
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, region.fd);
  std::string why;
  Mapping m;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat st {};
  if (fd < 0) {
    why = fmt::format("open: {}", std::strerror(errno));
  } else if (::fstat(fd, &st) != 0) {
    why = fmt::format("fstat: {}", std::strerror(errno));
  } else if (static_cast<uint64_t>(st.st_ino) != region.inode ||
             static_cast<uint64_t>(st.st_dev) != region.device ||
             static_cast<uint64_t>(st.st_size) < region.bytes) {
    why = "another file than the one the peer registered";
  } else {
    void* p = ::mmap(nullptr, region.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      why = fmt::format("mmap: {}", std::strerror(errno));
    } else {
      m.base = static_cast<char*>(p);
      m.bytes = region.bytes;
    }
  }
  if (fd >= 0) ::close(fd);
  if (!why.empty() && !loggedFailure_) {
    loggedFailure_ = true;
    DS_LOG_DEBUG("comm", "shm: cannot map group rank {}'s buffer ({}: {}); copying with CMA", peer,
                 path, why);
  }
  return m;
}

char* PeerMaps::resolve(int peer, pid_t pid, const SharedRegion& region, uint64_t released,
                        size_t bytes) {
  if (region.id == 0 || region.offset > region.bytes || bytes > region.bytes - region.offset)
    return nullptr;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (released != p.released) {
    dropAll(p);
    p.released = released;
  }
  auto it = p.byId.find(region.id);
  if (it == p.byId.end()) it = p.byId.emplace(region.id, open(peer, pid, region)).first;
  const Mapping& m = it->second;
  if (!m.base || region.offset + bytes > m.bytes) return nullptr;
  return m.base + region.offset;
}

}  // namespace ds::comm::shm_impl
