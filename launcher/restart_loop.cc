// The restart loop and the attempt notes (see restart_loop.h).
#include "launcher/restart_loop.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::launcher {
namespace {

std::mutex notesMu;
AttemptNotes notes;  // under notesMu

void say(const std::string& line) {
  std::string text = "dsrun: " + line + "\n";
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// "rank 1 (local rank 1) on host h was killed by signal 9 (SIGKILL) (job status 137)".
std::string describeEnd(const AttemptNotes& n, int status) {
  if (n.where.empty()) return fmt::format("the job ended with status {}", status);
  return fmt::format("{} {} (job status {})", n.where, n.how.empty() ? "failed" : n.how, status);
}

}  // namespace

void noteRankFailure(const std::string& where, const std::string& how) {
  std::lock_guard<std::mutex> lock(notesMu);
  // A later SIGKILL beats an earlier exit with a code: a rank killed from outside (kill -9, the
  // OOM killer) closes its sockets before it is reaped, so a peer failing on the broken
  // connection can exit first.
  const bool outranks =
      how.find("(SIGKILL)") != std::string::npos && notes.how.rfind("exited with code ", 0) == 0;
  if (!notes.where.empty() && !outranks) return;
  notes.where = where;
  notes.how = how;
}

void noteStopSignal(int sig) {
  std::lock_guard<std::mutex> lock(notesMu);
  if (notes.stopSignal == 0) notes.stopSignal = sig;
}

AttemptNotes attemptNotes() {
  std::lock_guard<std::mutex> lock(notesMu);
  return notes;
}

void resetAttemptNotes() {
  std::lock_guard<std::mutex> lock(notesMu);
  notes = {};
}

bool parseAgentFailureLine(const std::string& lineIn, std::string* where, std::string* how) {
  std::string_view line = lineIn;
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  constexpr std::string_view kHead = "dsrun: rank ";
  size_t at = line.find(kHead);
  // Only at the start, or behind pdsh's "host: " prefix (no space in the host).
  if (at == std::string_view::npos) return false;
  if (at != 0 && (at < 3 || line.substr(at - 2, 2) != ": " ||
                  line.substr(0, at - 2).find(' ') != std::string_view::npos))
    return false;
  std::string_view rest = line.substr(at + 7);  // "rank 1 (local rank 1) on host h <how>"
  constexpr std::string_view kOnHost = ") on host ";
  size_t on = rest.find(kOnHost);
  if (on == std::string_view::npos || rest.find(" (local rank ") == std::string_view::npos)
    return false;
  size_t hostEnd = rest.find(' ', on + kOnHost.size());
  if (hostEnd == std::string_view::npos) return false;
  std::string_view tail = rest.substr(hostEnd + 1);
  if (tail.rfind("exited with code ", 0) != 0 && tail.rfind("was killed by signal ", 0) != 0 &&
      tail.rfind("could not start", 0) != 0)
    return false;
  *where = std::string(rest.substr(0, hostEnd));
  tail = tail.substr(0, tail.find(';'));
  constexpr std::string_view kStopping = " while the job was stopping";
  if (tail.size() > kStopping.size() && tail.substr(tail.size() - kStopping.size()) == kStopping)
    tail.remove_suffix(kStopping.size());
  *how = std::string(tail);
  return true;
}

void checkMaxRestarts(int maxRestarts, bool noSsh) {
  if (maxRestarts < 0)
    throw ConfigError(
        fmt::format("--max_restarts {}: expected a number of restarts >= 0", maxRestarts));
  if (maxRestarts > 0 && noSsh)
    throw ConfigError(
        fmt::format("--max_restarts {} needs one dsrun that starts every host; with --no_ssh "
                    "each node's dsrun runs only its own ranks (let the orchestrator restart "
                    "the pods, or drop --no_ssh)",
                    maxRestarts));
}

int runWithRestarts(const JobSpec& spec, int maxRestarts,
                    const std::function<int(const JobSpec&)>& attempt) {
  if (maxRestarts <= 0) return attempt(spec);
  JobSpec run = spec;
  for (int k = 0;; ++k) {
    run.exports[kRestartAttemptVar] = std::to_string(k);
    resetAttemptNotes();
    std::fflush(stdout);
    const int status = attempt(run);
    if (status == 0) {
      if (k > 0) say(fmt::format("the job succeeded on attempt {} of {}", k + 1, maxRestarts + 1));
      return 0;
    }
    const AttemptNotes n = attemptNotes();
    if (n.stopSignal != 0) return status;  // dsrun was told to stop: no restart
    if (k == maxRestarts) {
      say(fmt::format("no restarts left ({} of {} used): {}", k, maxRestarts,
                      describeEnd(n, status)));
      return status;
    }
    say(fmt::format(
        "restart {} of {}: {}; starting every rank again on the same hosts ({}={}; dsrt "
        "train resumes from the latest checkpoint)",
        k + 1, maxRestarts, describeEnd(n, status), kRestartAttemptVar, k + 1));
  }
}

}  // namespace ds::launcher
