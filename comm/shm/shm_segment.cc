// Creation, opening, unlinking and stale cleanup of the shared-memory segments (shm_segment.h).
// The syscalls (shm_open, fallocate, mmap, statvfs, readdir) are wrapped here and nowhere else.
#include "comm/shm/shm_segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ds::comm::shm_impl {
namespace {

std::atomic<uint64_t> gSerial{0};

std::string pidNamespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? std::to_string(st.st_ino) : "0";
}

// "dsrun.<uid>.<pid ns>." : the prefix of this user's segments in this pid namespace.
std::string ownPrefix() { return fmt::format("dsrun.{}.{}.", ::getuid(), pidNamespace()); }

std::string nameFor(uint64_t serial) {
  return fmt::format("/{}{}.{}", ownPrefix(), ::getpid(), serial);
}

std::string path(const std::string& name) { return "/dev/shm" + name; }

std::string sysError(int err) { return std::strerror(err); }

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// Whether the process with this pid (in our namespace) is gone or a zombie.
bool pidGone(long pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return false;
  return errno == ESRCH;
}

// The creator pid of one of our names ("dsrun.<uid>.<ns>.<pid>.<serial>"), or -1.
long creatorPid(const std::string& entry, const std::string& prefix) {
  if (entry.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string rest = entry.substr(prefix.size());
  auto dot = rest.find('.');
  if (dot == std::string::npos || dot == 0) return -1;
  try {
    return std::stol(rest.substr(0, dot));
  } catch (const std::exception&) {
    return -1;
  }
}

char* mapFd(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    throw CommError(fmt::format("shared memory: cannot map {} ({}): {}", path(name), mib(bytes),
                                sysError(errno)));
  }
  return static_cast<char*>(p);
}

// The ConfigError for a name that exists and is not a stale segment of ours.
[[noreturn]] void existsError(const std::string& name, const struct stat& st) {
  if (st.st_uid != ::getuid()) {
    throw ConfigError(fmt::format(
        "shared memory: {} already exists and belongs to uid {}, not this job's user (uid {}); "
        "remove it, or turn the shared-memory transport off with DS_COMM_SHM=0",
        path(name), st.st_uid, ::getuid()));
  }
  throw ConfigError(fmt::format(
      "shared memory: {} already exists (mode {:o}) and its creator is still running; remove it, "
      "or turn the shared-memory transport off with DS_COMM_SHM=0",
      path(name), st.st_mode & 07777));
}

// Reserves the pages now: tmpfs allocates on first touch, and a full /dev/shm would then kill
// the rank with SIGBUS in the middle of a collective.
void reserve(int fd, size_t bytes, const std::string& name) {
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err == 0) return;
  struct statvfs vfs {};
  std::string room = ::statvfs("/dev/shm", &vfs) == 0
                         ? mib(static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize) + " free"
                         : "free space unknown";
  throw CommError(fmt::format(
      "shared memory: cannot reserve {} for {} ({}; /dev/shm has {}): free space in /dev/shm, "
      "lower DS_COMM_SHM_SLOT_BYTES, or set DS_COMM_SHM=0",
      mib(bytes), path(name), sysError(err), room));
}

}  // namespace

std::string nextSegmentName() { return nameFor(gSerial.fetch_add(1)); }
std::string peekNextSegmentName() { return nameFor(gSerial.load()); }

int removeStaleSegments(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  std::string prefix = ownPrefix();
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string entry = e->d_name;
    long pid = creatorPid(entry, prefix);
    if (pid < 0 || !pidGone(pid)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid()) continue;
    if (::unlinkat(::dirfd(d), entry.c_str(), 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  removeStaleSegments();
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) break;
    int err = errno;
    struct stat st {};
    if (err != EEXIST || ::lstat(path(name).c_str(), &st) != 0) {
      throw CommError(
          fmt::format("shared memory: cannot create {}: {}", path(name), sysError(err)));
    }
    // Our own name carries our pid: an entry of ours under it is a dead predecessor's.
    bool stale = S_ISREG(st.st_mode) && st.st_uid == ::getuid() && attempt == 0;
    if (!stale) existsError(name, st);
    ::shm_unlink(name.c_str());
  }
  ShmSegment s;
  s.name_ = name;
  s.named_ = true;
  try {
    if (::fchmod(fd, 0600) != 0) throw CommError("shared memory: fchmod: " + sysError(errno));
    reserve(fd, bytes, name);
    s.data_ = mapFd(fd, bytes, name);
    s.bytes_ = bytes;
  } catch (...) {
    ::close(fd);
    s.unlink();
    throw;
  }
  ::close(fd);
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    throw CommError(fmt::format("shared memory: cannot open {}: {}", path(name), sysError(errno)));
  }
  struct stat st {};
  std::string bad;
  if (::fstat(fd, &st) != 0) {
    bad = sysError(errno);
  } else if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
    bad = fmt::format("owner uid {} mode {:o} (expected uid {}, mode 600)", st.st_uid,
                      st.st_mode & 07777, ::getuid());
  } else if (static_cast<size_t>(st.st_size) != bytes) {
    bad = fmt::format("{} bytes, expected {}", st.st_size, bytes);
  }
  if (!bad.empty()) {
    ::close(fd);
    throw CommError(
        fmt::format("shared memory: {} is not this group's segment: {}", path(name), bad));
  }
  ShmSegment s;
  s.name_ = name;
  try {
    s.data_ = mapFd(fd, bytes, name);
    s.bytes_ = bytes;
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return s;
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    reset();
    name_ = std::move(o.name_);
    data_ = o.data_;
    bytes_ = o.bytes_;
    named_ = o.named_;
    o.data_ = nullptr;
    o.bytes_ = 0;
    o.named_ = false;
  }
  return *this;
}

ShmSegment::~ShmSegment() { reset(); }

void ShmSegment::reset() noexcept {
  if (named_) unlink();
  if (data_) ::munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
}

void ShmSegment::unlink() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());  // ENOENT: another rank removed it already
  named_ = false;
}

}  // namespace ds::comm::shm_impl
