// The environment snapshot and the strict parsers (see env.h).
#include "core/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "core/core_knobs.h"
#include "core/error.h"

extern char** environ;

namespace ds {

EnvMap currentEnv() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

int64_t parseInt(const std::string& text, const std::string& what, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (text.empty() || ec != std::errc() || p != e || v < lo || v > hi) {
    if (lo == INT64_MIN && hi == INT64_MAX)
      throw ConfigError(fmt::format("{}='{}': expected an integer", what, text));
    throw ConfigError(fmt::format("{}='{}': expected an integer in [{}, {}]", what, text, lo, hi));
  }
  return v;
}

bool parseBool(const std::string& text, const std::string& what) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  throw ConfigError(
      fmt::format("{}='{}': expected a boolean (1/0, true/false, yes/no, on/off)", what, text));
}

double parseDouble(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw ConfigError(fmt::format("{}='{}': expected a number", what, text));
  return v;
}

std::chrono::milliseconds defaultTimeout() { return knobSecondsOrDefault(knobs::kTimeout); }

}  // namespace ds
