// pdsh/srun failure-line parsers (see runner_failures.h).
#include "launcher/runner_failures.h"

#include <cstring>

#include <fmt/format.h>

namespace ds::launcher {
namespace {

// Non-negative decimal filling all of s, or -1.
int parseCode(std::string_view s) {
  if (s.empty() || s.size() > 4) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string_view trimEnd(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

// 128+signal for a strsignal() text ("Killed", "Terminated", "Segmentation fault (core dumped)").
int signalStatus(std::string_view text) {
  constexpr std::string_view kCore = " (core dumped)";
  if (text.size() > kCore.size() && text.substr(text.size() - kCore.size()) == kCore)
    text.remove_suffix(kCore.size());
  for (int sig = 1; sig < 65; ++sig) {
    const char* name = ::strsignal(sig);
    if (name && text == name) return 128 + sig;
  }
  return -1;
}

}  // namespace

std::optional<RemoteFailure> parsePdshFailure(std::string_view line) {
  line = trimEnd(line);
  constexpr std::string_view kTail = ": ssh exited with exit code ";
  if (line.rfind("pdsh@", 0) != 0) return std::nullopt;
  auto first = line.find(": ");
  auto tail = line.rfind(kTail);
  if (first == std::string_view::npos || tail == std::string_view::npos || tail <= first + 2)
    return std::nullopt;
  int code = parseCode(line.substr(tail + kTail.size()));
  if (code < 0) return std::nullopt;
  RemoteFailure f;
  f.host = std::string(line.substr(first + 2, tail - first - 2));
  f.status = code == 0 ? 255 : code;
  f.detail = fmt::format("ssh exited with exit code {}", code);
  return f;
}

std::optional<RemoteFailure> parseSrunFailure(std::string_view line) {
  line = trimEnd(line);
  constexpr std::string_view kHead = "srun: error: ";
  if (line.rfind(kHead, 0) != 0) return std::nullopt;
  std::string_view rest = line.substr(kHead.size());
  auto hostEnd = rest.find(": task");
  if (hostEnd == std::string_view::npos || hostEnd == 0) return std::nullopt;
  std::string_view tasks = rest.substr(hostEnd + 2);  // "task 1: ..." or "tasks 0-1: ..."
  auto colon = tasks.find(": ");
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view what = tasks.substr(colon + 2);
  constexpr std::string_view kExit = "Exited with exit code ";
  int status = what.rfind(kExit, 0) == 0 ? parseCode(what.substr(kExit.size()))
                                         : signalStatus(what);
  if (status <= 0) return std::nullopt;
  RemoteFailure f;
  f.host = std::string(rest.substr(0, hostEnd));
  f.status = status;
  f.detail = std::string(tasks);
  return f;
}

std::string describeJobHost(const JobSpec& spec, const std::string& host) {
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    if (spec.hosts[i].host != host) continue;
    int first = spec.firstRank(static_cast<int>(i));
    int n = static_cast<int>(spec.hosts[i].slots.size());
    std::string ranks = n == 1 ? fmt::format("rank {}", first)
                               : fmt::format("ranks {}-{}", first, first + n - 1);
    return fmt::format("host {} (node {}, {})", host, i, ranks);
  }
  return "host " + host;
}

}  // namespace ds::launcher
