// Durable file writes and RAII reads (see durable_file.h).
#include "runtime/checkpoint/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/safe_file.h"

namespace ds::runtime::ckpt {

DurableWriter::DurableWriter(std::string path)
    : path_(std::move(path)), tmp_(ds::tempNameFor(path_)) {
  // Never through a planted name: a symlink or another user's file at the temp name is refused;
  // our own leftover (a killed save whose pid came round again) is replaced.
  fd_ = ds::createFile(tmp_, O_WRONLY, 0644, ds::ExistingFile::kReplace, "checkpoint: temp file");
}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void DurableWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  crc_ = ds::crc32c(p, n, crc_);
  bytes_ += n;
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("checkpoint: write to {} failed", tmp_), errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void DurableWriter::commit() {
  if (::fsync(fd_) != 0) throw SystemError(fmt::format("checkpoint: fsync {} failed", tmp_), errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw SystemError(fmt::format("checkpoint: close {} failed", tmp_), errno);
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    throw SystemError(fmt::format("checkpoint: rename {} -> {} failed", tmp_, path_), errno);
  }
  committed_ = true;
  fsyncDir(std::filesystem::path(path_).parent_path().string());
}

void writeFileDurable(const std::string& path, const std::string& text) {
  DurableWriter w(path);
  w.write(text.data(), text.size());
  w.commit();
}

void fsyncDir(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw SystemError(fmt::format("checkpoint: cannot open directory {}", d), errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw SystemError(fmt::format("checkpoint: fsync of directory {} failed", d), err);
}

void makeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SystemError(fmt::format("checkpoint: cannot create directory {}", dir), ec.value());
}

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void swapDirs(const std::string& fresh, const std::string& target) {
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    if (err != EINVAL && err != ENOSYS && err != ENOTSUP) {
      throw SystemError(fmt::format("checkpoint: exchanging {} and {} failed", fresh, target), err);
    }
    // No atomic exchange here (e.g. NFS): target is briefly absent between the two renames.
    const std::string old = target + ".old";
    removeTree(old);
    if (::rename(target.c_str(), old.c_str()) != 0 ||
        ::rename(fresh.c_str(), target.c_str()) != 0 || ::rename(old.c_str(), fresh.c_str()) != 0) {
      throw SystemError(fmt::format("checkpoint: moving {} to {} failed", fresh, target), errno);
    }
  }
  fsyncDir(std::filesystem::path(target).parent_path().string());
}

void removeTree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) throw SystemError(fmt::format("checkpoint: cannot remove {}", dir), ec.value());
}

ReadFile::ReadFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    int err = errno;
    throw ConfigError(fmt::format("{}: cannot open ({})", path_,
                                  err == ENOENT ? "file is missing" : std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw SystemError(fmt::format("checkpoint: fstat {} failed", path_), err);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

ReadFile::~ReadFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadFile::read(uint64_t offset, void* out, size_t n) const {
  char* p = static_cast<char*>(out);
  const uint64_t start = offset;
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw SystemError(fmt::format("checkpoint: read of {} failed", path_), errno);
    }
    if (r == 0) {
      throw ConfigError(fmt::format("{}: truncated: wanted {} bytes at offset {}, file has {}",
                                    path_, n + (offset - start), start, size_));
    }
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

uint32_t ReadFile::crc32c() const {
  std::vector<char> buf(1 << 22);
  uint32_t c = 0;
  for (uint64_t off = 0; off < size_; off += buf.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size_ - off));
    read(off, buf.data(), n);
    c = ds::crc32c(buf.data(), n, c);
  }
  return c;
}

std::string readTextFile(const std::string& path) {
  ReadFile f(path);
  std::string s(static_cast<size_t>(f.size()), '\0');
  if (!s.empty()) f.read(0, s.data(), s.size());
  return s;
}

}  // namespace ds::runtime::ckpt
