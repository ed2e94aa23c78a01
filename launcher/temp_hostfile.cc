// The mpirun hostfile in a private per-user folder (see temp_hostfile.h).
#include "launcher/temp_hostfile.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "core/error.h"
#include "core/knobs.h"
#include "core/log.h"
#include "core/safe_file.h"
#include "launcher/launcher_knobs.h"

namespace ds::launcher {
namespace {

constexpr const char* kSuffix = ".hostfile";

// The dsrun pid a name "<pid>-<job id>.hostfile" carries; 0 when the name is not of that form.
pid_t pidOfHostfileName(const std::string& name) {
  const size_t dash = name.find('-');
  const size_t suffix = std::char_traits<char>::length(kSuffix);
  if (dash == 0 || dash == std::string::npos || name.size() <= suffix ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return 0;
  if (name.find_first_not_of("0123456789") != dash || dash > 9) return 0;
  return static_cast<pid_t>(std::stol(name.substr(0, dash)));
}

bool processGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

std::string privateTempDir(const EnvMap& env) {
  std::string base = knobString(knobs::kTmpDir, env).value_or("");
  if (base.empty()) base = "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return fmt::format("{}/dsrun-{}", base, ::geteuid());
}

std::string tempHostfilePath(const EnvMap& env, const std::string& jobId) {
  return fmt::format("{}/{}-{}{}", privateTempDir(env), ::getpid(), jobId, kSuffix);
}

std::vector<std::string> removeStaleHostfiles(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return removed;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const pid_t pid = pidOfHostfileName(name);
    if (pid <= 0 || pid == ::getpid() || !processGone(pid)) continue;
    const std::string full = dir + "/" + name;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    if (::unlink(full.c_str()) == 0) removed.push_back(full);
  }
  ::closedir(listing);
  for (const auto& path : removed)
    DS_LOG_INFO("launcher", "removed {}, left by a dsrun that is no longer running", path);
  return removed;
}

TempHostfile::TempHostfile(const std::string& path, const std::string& text) : path_(path) {
  const std::string dir = path.substr(0, path.rfind('/'));
  makePrivateDir(dir, "dsrun's private temp folder");
  removeStaleHostfiles(dir);
  int fd = createFile(path, O_WRONLY, 0600, ExistingFile::kRefuse, "mpirun hostfile");
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    ::unlink(path.c_str());
    throw SystemError(fmt::format("write the mpirun hostfile {}", path), n < 0 ? err : EIO);
  }
}

TempHostfile::~TempHostfile() { ::unlink(path_.c_str()); }

}  // namespace ds::launcher
