// Per-rank log file names (see rank_logs.h).
#include "launcher/agent/rank_logs.h"

#include <time.h>

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::launcher {

void prepareRankLogDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError(fmt::format(
        "--enable_each_rank_log {}: should not be a file, it should be a directory", dir));
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw ConfigError(
        fmt::format("--enable_each_rank_log {}: unable to create directory for "
                    "each rank log ({})",
                    dir, ec ? ec.message() : "not a directory"));
}

std::string logTimestamp() {
  time_t now = ::time(nullptr);
  struct tm tm;
  ::localtime_r(&now, &tm);
  char buf[32];
  ::strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
  return buf;
}

std::string rankLogPath(const std::string& dir, const std::string& stamp, int globalRank) {
  return fmt::format("{}/{}_rank{}.log", dir, stamp, globalRank);
}

}  // namespace ds::launcher
