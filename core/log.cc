// Logging implementation: one formatted line per call, written atomically with write(2).
#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>

#include "core/core_knobs.h"
#include "core/error.h"

namespace ds::log {
namespace {

std::atomic<int> gThreshold{-1};
std::mutex gIdentityMu;
std::string gIdentity;  // guarded by gIdentityMu

Level levelFromEnv() {
  if (auto lvl = knobString(knobs::kLogLevel); lvl && !lvl->empty())
    return parseLevel(*lvl, knobs::kLogLevel.name);
  return knobFlag(knobs::kDebug) ? Level::kDebug : Level::kInfo;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kError: return "ERROR";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kDebug: return "DEBUG";
  }
  return "?";
}

}  // namespace

Level threshold() {
  int t = gThreshold.load(std::memory_order_relaxed);
  if (t < 0) {
    Level l = Level::kInfo;
    try {
      l = levelFromEnv();
    } catch (const Error&) {
      l = Level::kInfo;  // a bad DS_LOG_LEVEL is reported by the mains, not by every log line
    }
    t = static_cast<int>(l);
    gThreshold.store(t, std::memory_order_relaxed);
  }
  return static_cast<Level>(t);
}

void setThreshold(Level level) { gThreshold.store(static_cast<int>(level)); }

Level parseLevel(std::string_view text, std::string_view source) {
  if (text == "error") return Level::kError;
  if (text == "warn") return Level::kWarn;
  if (text == "info") return Level::kInfo;
  if (text == "debug") return Level::kDebug;
  throw ConfigError(fmt::format("{}: unknown log level '{}' (expected error, warn, info or debug)",
                                source, text));
}

void setLogIdentity(const std::string& host, int rank) {
  std::lock_guard<std::mutex> lock(gIdentityMu);
  gIdentity = rank < 0 ? fmt::format("[{}]", host) : fmt::format("[{}:{}]", host, rank);
}

std::string identity() {
  std::lock_guard<std::mutex> lock(gIdentityMu);
  return gIdentity;
}

void write(Level level, std::string_view subsys, std::string_view message) {
  std::string line = identity();
  if (!line.empty()) line += ' ';
  line += fmt::format("{} {}: {}\n", levelName(level), subsys, message);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;  // nowhere left to report a logging failure
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace ds::log
