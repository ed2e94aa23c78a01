// MappedFloats; see mapped_floats.h.
#include "zero/mapped_floats.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "zero/bulk_ops.h"

namespace ds::zero {
namespace {

int openUnnamed(const std::string& dir, const std::string& what, const std::string& key) {
  int descriptor = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (descriptor >= 0) return descriptor;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    throw ConfigError(fmt::format("{} '{}': cannot create the {} file: {}", key, dir, what,
                                  std::strerror(errno)));
  // No O_TMPFILE on this file system: a fresh name, never following or reusing an entry.
  const std::string path = fmt::format("{}/zero_pid{}_{}.map", dir, ::getpid(),
                                       reinterpret_cast<uintptr_t>(&descriptor));
  descriptor = ::open(path.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
  if (descriptor < 0)
    throw ConfigError(fmt::format("{} '{}': cannot create the {} file {}: {}", key, dir, what, path,
                                  std::strerror(errno)));
  ::unlink(path.c_str());
  return descriptor;
}

}  // namespace

MappedFloats::MappedFloats(const std::string& dir, size_t count, const std::string& what,
                           const std::string& key)
    : count_(count) {
  descriptor_ = openUnnamed(dir, what, key);
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  if (::ftruncate(descriptor_, off_t(bytes)) != 0) {
    const int err = errno;
    ::close(descriptor_);
    throw ConfigError(fmt::format("{} '{}': cannot size the {} file to {} bytes: {}", key, dir,
                                  what, bytes, std::strerror(err)));
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor_, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(descriptor_);
    throw SystemError(fmt::format("mmap of the {} file ({} bytes) in '{}'", what, bytes, dir), err);
  }
  data_ = static_cast<float*>(map);
}

MappedFloats::~MappedFloats() {
  if (data_) ::munmap(data_, std::max<size_t>(count_, 1) * sizeof(float));
  if (descriptor_ >= 0) ::close(descriptor_);
}

void MappedFloats::zero() {
  const size_t bytes = count_ * sizeof(float);
  if (bytes == 0) return;
  if (punchHoles_ &&
      ::fallocate(descriptor_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(bytes)) == 0)
    return;
  punchHoles_ = false;  // not supported here: write zeros from now on
  bulkZero(data_, count_);
}

}  // namespace ds::zero
