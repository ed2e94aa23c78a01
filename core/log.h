// Leveled logging to stderr with a "[host:rank]" prefix. Thread-safe: each line is written with
// one write(2). The level comes from DS_LOG_LEVEL (error|warn|info|debug, default info);
// DS_DEBUG=1 means debug. The prefix is set once per process by setLogIdentity().
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ds::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// The threshold in force (read from the environment on first use).
Level threshold();
void setThreshold(Level level);
// Parses "error|warn|info|debug"; throws ConfigError naming `source` otherwise.
Level parseLevel(std::string_view text, std::string_view source);

// "[host:rank]" prefix; rank < 0 prints just "[host]".
void setLogIdentity(const std::string& host, int rank);
std::string identity();

void write(Level level, std::string_view subsys, std::string_view message);

}  // namespace ds::log

#define DS_LOG(level, subsys, ...)                                           \
  do {                                                                       \
    if (static_cast<int>(level) <= static_cast<int>(::ds::log::threshold())) \
      ::ds::log::write(level, subsys, ::fmt::format(__VA_ARGS__));           \
  } while (0)
#define DS_LOG_ERROR(subsys, ...) DS_LOG(::ds::log::Level::kError, subsys, __VA_ARGS__)
#define DS_LOG_WARN(subsys, ...) DS_LOG(::ds::log::Level::kWarn, subsys, __VA_ARGS__)
#define DS_LOG_INFO(subsys, ...) DS_LOG(::ds::log::Level::kInfo, subsys, __VA_ARGS__)
#define DS_LOG_DEBUG(subsys, ...) DS_LOG(::ds::log::Level::kDebug, subsys, __VA_ARGS__)
