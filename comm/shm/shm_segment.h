// ShmSegment: one POSIX shared-memory segment of the local ranks of a group (comm/shm). Created
// by one rank, private to this user (O_CREAT|O_EXCL, mode 0600; glibc's shm_open adds O_NOFOLLOW,
// so a planted symlink is refused), with its pages reserved by fallocate so a full /dev/shm is an
// error here rather than a SIGBUS later; opened by the others by name (owner, mode and size
// checked). Invariant: the name lives only until every local rank has mapped it (unlink()); one
// left by a kill -9 in that window carries its creator's pid and is removed by the next
// creation on this host (removeStaleSegments). Not thread-safe; move-only RAII (munmap, close).
#pragma once

#include <cstddef>
#include <string>

namespace ds::comm::shm_impl {

class ShmSegment {
 public:
  // Creates `name` ("/dsrun...") of `bytes`, mapped. An existing name of this user whose creator
  // is gone is removed and creation retried once; one of another user, or a live one, is a
  // ConfigError naming the file and its owner; no room in /dev/shm is a CommError naming the
  // sizes. Nothing is left in /dev/shm when it throws.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Opens and maps an existing segment; CommError unless it is a regular file of this user,
  // not readable by others, of exactly `bytes`.
  static ShmSegment open(const std::string& name, size_t bytes);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Removes the name (the mapping stays); idempotent, and an already-removed name is fine.
  void unlink();
  char* data() const { return data_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void reset() noexcept;
  std::string name_;
  char* data_ = nullptr;
  size_t bytes_ = 0;
  bool named_ = false;  // this object created the name and has not unlinked it yet
};

// The name the next segment created by this process gets, "/dsrun.<uid>.<pid ns>.<pid>.<serial>"
// (nextSegmentName advances the serial; peekNextSegmentName does not: a test hook).
std::string nextSegmentName();
std::string peekNextSegmentName();

// Removes this user's "dsrun.<uid>.<pid ns>.*" entries in `dir` whose creator process (same pid
// namespace) no longer exists: segments a kill -9 left before they were unlinked. Returns how
// many it removed.
int removeStaleSegments(const std::string& dir = "/dev/shm");

}  // namespace ds::comm::shm_impl
