// Output checks before the first step; see preflight.h.
#include "runtime/engine/preflight.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

namespace fs = std::filesystem;

bool isDir(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool pathExists(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

// Creates and removes a file in dir; "" when that worked, else the reason.
std::string probe(const fs::path& dir) {
  std::string name = (dir / ".dsrt-write-check-XXXXXX").string();
  int fd = ::mkstemp(name.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(name.c_str());
  return "";
}

// The folder that exists nearest to p (p itself when it exists), for a path still to be created.
fs::path nearestExisting(fs::path p) {
  p = p.lexically_normal();
  if (p.empty()) return ".";
  while (!pathExists(p)) {
    fs::path up = p.parent_path();
    if (up.empty() || up == p) return p.is_absolute() ? p.root_path() : fs::path(".");
    p = up;
  }
  return p;
}

}  // namespace

void checkWritable(const std::string& what, const std::string& path, bool isFile,
                   const std::string& createdDir) {
  if (path.empty()) return;
  const fs::path p(path);
  fs::path dir = p;
  if (isFile) {
    if (isDir(p))
      throw ConfigError(fmt::format("{} '{}': is a folder, expected a file", what, path));
    dir = p.parent_path();
    if (dir.empty()) dir = ".";
    const bool created =
        !createdDir.empty() && fs::path(createdDir).lexically_normal() == dir.lexically_normal();
    if (!pathExists(dir) && !created)
      throw ConfigError(
          fmt::format("{} '{}': folder '{}' does not exist", what, path, dir.string()));
  }
  const fs::path at = nearestExisting(dir);
  if (!isDir(at))
    throw ConfigError(fmt::format("{} '{}': '{}' is not a folder", what, path, at.string()));
  const std::string why = probe(at);
  if (!why.empty())
    throw ConfigError(
        fmt::format("{} '{}': cannot create files in '{}': {}", what, path, at.string(), why));
}

void checkOutputsWritable(const Plan& plan, const std::string& summaryPath, int rank) {
  const std::string& ckpt = plan.train.checkpointDir;
  checkWritable("train.checkpoint.dir", ckpt, false);
  if (rank != 0) return;
  checkWritable("--summary", summaryPath, true, ckpt);
  auto monitorDir = [](const MonitorConfig& m) {
    return m.outputPath.empty() ? m.jobName : (fs::path(m.outputPath) / m.jobName).string();
  };
  const auto& ds = plan.deepspeed;
  if (ds.csvMonitor.enabled)
    checkWritable("deepspeed.csv_monitor.output_path", monitorDir(ds.csvMonitor), false);
  if (ds.tensorboard.enabled)
    checkWritable("deepspeed.tensorboard.output_path", monitorDir(ds.tensorboard), false);
}

}  // namespace ds::runtime
