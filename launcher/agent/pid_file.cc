// PidFile (see pid_file.h).
#include "launcher/agent/pid_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
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

bool isPidText(const std::string& text) {
  return text.size() > 1 && text.size() <= 11 && text.back() == '\n' &&
         text.find_first_not_of("0123456789") == text.size() - 1;
}

}  // namespace

std::vector<std::string> removeStalePidFiles(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return removed;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const size_t dot = name.find('.');
    if (dot == 0 || dot == std::string::npos || name.substr(dot) != ".dsrun" ||
        name.find_first_not_of("0123456789") != dot)
      continue;
    const std::string full = dir + "/" + name;
    if (!describeForeignEntry(full).empty()) continue;  // not a plain file of ours
    const std::string text = readOwnFile(full);
    if (!isPidText(text)) continue;
    const long pid = std::stol(text);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::unlink(full.c_str()) == 0) removed.push_back(full);
  }
  ::closedir(listing);
  return removed;
}

PidFile::PidFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  content_ = std::to_string(::getpid()) + "\n";
  const size_t slash = path_.rfind('/');
  removeStalePidFiles(slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash));
  writeFileAtomic(path_, content_, 0644, "--save_pid file");
}

PidFile::~PidFile() {
  if (path_.empty()) return;
  if (describeForeignEntry(path_).empty() && readOwnFile(path_) == content_)
    ::unlink(path_.c_str());
}

}  // namespace ds::launcher
