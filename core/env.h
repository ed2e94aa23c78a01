// The environment as a value (EnvMap, a snapshot, so derivations are testable without setenv)
// and the strict parsers shared by env, CLI and config code: a value that does not parse is a
// ConfigError naming its source and what was expected. Knobs are read through core/knobs.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ds {

using EnvMap = std::map<std::string, std::string>;

// A snapshot of this process's environment.
EnvMap currentEnv();

// DS_TIMEOUT: the default for every blocking call, in seconds (fractions allowed), default 300.
std::chrono::milliseconds defaultTimeout();

// Strict parsers. `what` names the source in the error: "WHAT='x': expected an integer in
// [lo, hi]"; bools are 0/1/true/false/yes/no/on/off (case-insensitive).
int64_t parseInt(const std::string& text, const std::string& what, int64_t lo = INT64_MIN,
                 int64_t hi = INT64_MAX);
bool parseBool(const std::string& text, const std::string& what);
double parseDouble(const std::string& text, const std::string& what);

}  // namespace ds
