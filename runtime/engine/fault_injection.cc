// DS_FAULT_KILL (see fault_injection.h).
#include "runtime/engine/fault_injection.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/env.h"
#include "core/error.h"
#include "core/knobs.h"
#include "runtime/tensor/tensor_knobs.h"

namespace ds::runtime {

namespace {

constexpr const char* kExpected =
    "expected 'rank=R,step=S[,at=step|save][,attempt=A|any]' (S >= 1)";

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw ConfigError(fmt::format("DS_FAULT_KILL='{}': {}; {}", text, why, kExpected));
}

}  // namespace

FaultKill parseFaultKill(const std::string& text) {
  FaultKill f;
  bool haveRank = false, haveStep = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    size_t eq = part.find('=');
    if (eq == std::string::npos) bad(text, fmt::format("'{}' is not key=value", part));
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    const std::string what = "DS_FAULT_KILL " + key;
    if (key == "rank") {
      f.rank = static_cast<int>(parseInt(value, what, 0, 1 << 20));
      haveRank = true;
    } else if (key == "step") {
      f.step = parseInt(value, what, 1, INT64_MAX);
      haveStep = true;
    } else if (key == "at") {
      if (value != "step" && value != "save")
        bad(text, fmt::format("at={} is not step or save", value));
      f.at = value == "save" ? FaultPoint::kSave : FaultPoint::kStep;
    } else if (key == "attempt") {
      f.attempt = value == "any" ? -1 : static_cast<int>(parseInt(value, what, 0, 1000000));
    } else {
      bad(text, fmt::format("unknown key '{}'", key));
    }
  }
  if (!haveRank || !haveStep) bad(text, "rank and step are required");
  return f;
}

std::optional<FaultKill> faultKillFromEnv(int rank) {
  auto text = knobString(knobs::kFaultKill);
  if (!text || text->empty()) return std::nullopt;
  FaultKill f = parseFaultKill(*text);
  const int attempt = static_cast<int>(knobIntOrDefault(knobs::kRestartAttempt));
  if (f.rank != rank || (f.attempt >= 0 && f.attempt != attempt)) return std::nullopt;
  return f;
}

void maybeFaultKill(const std::optional<FaultKill>& f, FaultPoint at, int rank, int64_t step) {
  if (!f || f->at != at || f->rank != rank || f->step != step) return;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::string line =
      fmt::format("dsrt: DS_FAULT_KILL: rank {} sends itself SIGKILL {} step {} (time {}.{:06d})\n",
                  rank, at == FaultPoint::kSave ? "while saving the checkpoint of" : "before", step,
                  now.tv_sec, now.tv_nsec / 1000);
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), SIGKILL);
  ::pause();
}

}  // namespace ds::runtime
