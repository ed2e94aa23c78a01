// Files created without following planted names (see safe_file.h).
#include "core/safe_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ds {
namespace {

std::string userName(uid_t uid) {
  struct passwd pwd;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pwd, buf, sizeof(buf), &found) != 0 || found == nullptr) return "";
  return found->pw_name;
}

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

std::string describeStat(const std::string& path, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX + 1] = {};
    ssize_t n = ::readlink(path.c_str(), target, PATH_MAX);
    return fmt::format("a symbolic link to '{}'", n > 0 ? std::string(target, size_t(n)) : "?");
  }
  if (!S_ISREG(st.st_mode)) return kindOf(st.st_mode);
  if (st.st_uid != ::geteuid()) {
    std::string name = userName(st.st_uid);
    return fmt::format("a file owned by uid {}{}", st.st_uid,
                       name.empty() ? "" : " (" + name + ")");
  }
  if (st.st_nlink > 1) return fmt::format("a file with {} hard links", st.st_nlink);
  return "";
}

[[noreturn]] void refuse(const std::string& what, const std::string& path,
                         const std::string& found) {
  throw ConfigError(fmt::format(
      "{} {}: refusing to write through {} there (planted by someone else, or left by another "
      "program?); remove it or choose another path",
      what, path, found));
}

int openRetry(const std::string& path, int flags, mode_t mode) {
  for (;;) {
    int fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

// kAppend: O_NONBLOCK so that a planted FIFO cannot block the open; checked with fstat after.
int openForAppend(const std::string& path, int flags, mode_t mode, const std::string& what) {
  int fd = openRetry(path, flags | O_NONBLOCK, mode);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENXIO) refuse(what, path, describeForeignEntry(path));
    throw SystemError(fmt::format("{} {}: cannot open for writing", what, path), err);
  }
  struct stat st;
  std::string found = ::fstat(fd, &st) != 0 ? "an entry we cannot inspect" : describeStat(path, st);
  if (!found.empty()) {
    ::close(fd);
    refuse(what, path, found);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

std::string describeForeignEntry(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "";
  return describeStat(path, st);
}

int createFile(const std::string& path, int flags, mode_t mode, ExistingFile existing,
               const std::string& what) {
  const int base = flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
  if (existing == ExistingFile::kAppend) return openForAppend(path, base, mode, what);
  for (int attempt = 0; attempt < 8; ++attempt) {
    int fd = openRetry(path, base | O_EXCL, mode);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw SystemError(fmt::format("{} {}: cannot create", what, path), errno);
    std::string found = describeForeignEntry(path);
    if (!found.empty()) refuse(what, path, found);
    if (existing == ExistingFile::kRefuse)
      throw ConfigError(
          fmt::format("{} {}: already exists (a file of ours, left by an earlier run?); remove it",
                      what, path));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw SystemError(fmt::format("{} {}: cannot remove the old file", what, path), errno);
  }
  throw ConfigError(
      fmt::format("{} {}: the name keeps being re-created by someone else", what, path));
}

void makePrivateDir(const std::string& path, const std::string& what) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw SystemError(fmt::format("{} {}: cannot create the folder", what, path), errno);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    throw SystemError(fmt::format("{} {}: cannot inspect the folder", what, path), errno);
  std::string found;
  if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
    found = S_ISLNK(st.st_mode) ? describeStat(path, st) : kindOf(st.st_mode);
  } else if (st.st_uid != ::geteuid()) {
    std::string name = userName(st.st_uid);
    found =
        fmt::format("a folder owned by uid {}{}", st.st_uid, name.empty() ? "" : " (" + name + ")");
  } else if ((st.st_mode & 077) != 0) {
    found = fmt::format("a folder others may use (mode {:04o}; expected 0700: chmod 700 it)",
                        st.st_mode & 07777);
  }
  if (!found.empty())
    throw ConfigError(fmt::format(
        "{} {}: refusing to use {} as a private folder; remove it or fix its owner and mode", what,
        path, found));
}

std::string tempNameFor(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, ::getpid());
}

void writeFileAtomic(const std::string& path, const std::string& text, mode_t mode,
                     const std::string& what) {
  std::string found = describeForeignEntry(path);
  if (!found.empty()) refuse(what, path, found);
  const std::string tmp = tempNameFor(path);
  int fd = createFile(tmp, O_WRONLY, mode, ExistingFile::kReplace, what + " (temp file)");
  size_t done = 0;
  int err = 0;
  while (done < text.size() && err == 0) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += size_t(n);
    if (n < 0 && errno != EINTR) err = errno;
    if (n == 0) err = EIO;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw SystemError(fmt::format("{} {}: cannot write", what, path), err);
  }
}

std::vector<std::string> removeStaleTemps(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  std::vector<std::string> removed;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return removed;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    const std::string full = (slash == std::string::npos ? "" : dir) + name;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    if (::unlink(full.c_str()) == 0) removed.push_back(full);
  }
  ::closedir(listing);
  return removed;
}

}  // namespace ds
