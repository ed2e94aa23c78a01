// DeepSpeed-layout CSV files; see csv_monitor.h.
#include "runtime/monitor/csv_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/safe_file.h"

namespace ds::runtime {

CsvMonitor::CsvMonitor(const MonitorConfig& cfg) {
  std::filesystem::path dir = cfg.outputPath.empty()
                                  ? std::filesystem::path(cfg.jobName)
                                  : std::filesystem::path(cfg.outputPath) / cfg.jobName;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw ConfigError(
        fmt::format("csv_monitor: cannot create '{}': {}", dir.string(), ec.message()));
  logDir_ = dir.string();
}

void CsvMonitor::write(const std::vector<MonitorEvent>& events) {
  for (const auto& e : events) {
    size_t slash = e.name.rfind('/');
    std::string header = slash == std::string::npos ? e.name : e.name.substr(slash + 1);
    std::string file = e.name;
    for (auto& c : file)
      if (c == '/' || c == ' ') c = '_';
    std::string path = logDir_ + "/" + file + ".csv";
    // Appended to if it is our own file; a symlink or another user's file is refused.
    int fd = createFile(path, O_WRONLY | O_APPEND, 0644, ExistingFile::kAppend, "csv_monitor file");
    std::string text;
    if (started_.insert(file).second) text = fmt::format("step,{}\n", header);
    text += fmt::format("{},{}\n", e.step, e.value);
    ssize_t n = ::write(fd, text.data(), text.size());
    const int err = errno;
    ::close(fd);
    if (n != ssize_t(text.size()))
      throw SystemError(fmt::format("csv_monitor: write '{}'", path), n < 0 ? err : EIO);
  }
}

}  // namespace ds::runtime
