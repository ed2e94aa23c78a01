// PidFile (see pid_file.h).
#include "launcher/agent/pid_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/error.h"
#include "core/safe_file.h"

namespace ds::launcher {
namespace {

// The file's text when it is a small regular file (never through a symlink); "" otherwise.
std::string readOwnFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

}  // namespace

PidFile::PidFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  content_ = std::to_string(::getpid()) + "\n";
  writeFileAtomic(path_, content_, 0644, "--save_pid file");
}

PidFile::~PidFile() {
  if (path_.empty()) return;
  if (describeForeignEntry(path_).empty() && readOwnFile(path_) == content_)
    ::unlink(path_.c_str());
}

}  // namespace ds::launcher
