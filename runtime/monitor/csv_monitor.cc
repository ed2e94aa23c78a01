// DeepSpeed-layout CSV files; see csv_monitor.h.
#include "runtime/monitor/csv_monitor.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

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
    FILE* f = std::fopen(path.c_str(), "a");
    if (!f) throw SystemError(fmt::format("csv_monitor: open '{}'", path), errno);
    std::string text;
    if (started_.insert(file).second) text = fmt::format("step,{}\n", header);
    text += fmt::format("{},{}\n", e.step, e.value);
    size_t n = std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    if (n != text.size()) throw SystemError(fmt::format("csv_monitor: write '{}'", path), errno);
  }
}

}  // namespace ds::runtime
