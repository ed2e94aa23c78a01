// pdsh/srun/mpirun failure-line parsers (see runner_failures.h).
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
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
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

std::string_view trimStart(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// Removes `prefix` from *s; false (s untouched) when s does not start with it.
bool eat(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

// The decimal (1-9 digits) at the start of *s, removed; or -1 (s untouched).
int eatNumber(std::string_view* s) {
  size_t n = 0;
  int v = 0;
  while (n < s->size() && (*s)[n] >= '0' && (*s)[n] <= '9') v = v * 10 + ((*s)[n++] - '0');
  if (n == 0 || n > 9) return -1;
  s->remove_prefix(n);
  return v;
}

std::string signalDetail(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? fmt::format("was killed by signal {} (SIG{})", sig, abbrev)
                : fmt::format("was killed by signal {}", sig);
}

// "<tool> noticed that process rank R with PID P on node H exited on signal N (Name)."
std::optional<RemoteFailure> parseMpirunSignal(std::string_view line) {
  auto at = line.find(" noticed that process rank ");
  if (at == std::string_view::npos || at == 0 || line.substr(0, at).find(' ') != line.npos)
    return std::nullopt;
  std::string_view rest = line.substr(at + 27);
  int rank = eatNumber(&rest);
  if (rank < 0 || !eat(&rest, " with PID ") || eatNumber(&rest) < 0 || !eat(&rest, " on node "))
    return std::nullopt;
  constexpr std::string_view kSig = " exited on signal ";
  auto sigAt = rest.find(kSig);
  if (sigAt == std::string_view::npos || sigAt == 0) return std::nullopt;
  std::string_view host = rest.substr(0, sigAt);
  rest.remove_prefix(sigAt + kSig.size());
  int sig = eatNumber(&rest);
  if (sig <= 0 || sig > 64 || host.find(' ') != std::string_view::npos) return std::nullopt;
  RemoteFailure f;
  f.host = std::string(host);
  f.rank = rank;
  f.status = 128 + sig;
  f.detail = signalDetail(sig);
  return f;
}

// "exited with code N" / "was killed by signal N (SIGX)...": the job status, or -1.
int reportedStatus(std::string_view how) {
  if (eat(&how, "exited with code ")) {
    int code = eatNumber(&how);
    return code > 0 && code < 256 && (how.empty() || how[0] == ';') ? code : -1;
  }
  if (eat(&how, "was killed by signal ")) {
    int sig = eatNumber(&how);
    return sig > 0 && sig < 65 && eat(&how, " (") ? 128 + sig : -1;
  }
  return -1;
}

// The report's wording up to the "; ..." tail the agent adds.
std::string_view reportDetail(std::string_view how) { return how.substr(0, how.find(';')); }

}  // namespace

std::optional<RemoteFailure> parseRankReport(std::string_view line) {
  line = trimEnd(line);
  constexpr std::string_view kHead = "dsrun: rank ";
  for (size_t at = line.find(kHead); at != std::string_view::npos; at = line.find(kHead, at + 1)) {
    std::string_view t = line.substr(at + kHead.size());
    int rank = eatNumber(&t);
    if (rank < 0 || !eat(&t, " (local rank ") || eatNumber(&t) < 0) continue;
    std::string host;
    if (eat(&t, ")")) {  // the agent's form: " on host H "
      if (!eat(&t, " on host ")) continue;
      auto sp = t.find(' ');
      if (sp == std::string_view::npos || sp == 0) continue;
      host = std::string(t.substr(0, sp));
      t.remove_prefix(sp + 1);
    } else {  // the wrapper's form: ", pid P on H) "
      if (!eat(&t, ", pid ") || eatNumber(&t) < 0 || !eat(&t, " on ")) continue;
      auto close = t.find(") ");
      if (close == std::string_view::npos) continue;
      t.remove_prefix(close + 2);
    }
    int status = reportedStatus(t);
    if (status < 0) continue;
    RemoteFailure f;
    f.host = host;
    f.rank = rank;
    f.status = status;
    f.detail = std::string(reportDetail(t));
    return f;
  }
  return std::nullopt;
}

std::string rankWrapperReport(int rank, int localRank, int pid, const std::string& host,
                              const std::string& how) {
  return fmt::format("dsrun: rank {} (local rank {}, pid {} on {}) {}", rank, localRank, pid, host,
                     how);
}

std::optional<RemoteFailure> OpenMpiFailureParser::operator()(std::string_view line) {
  line = trimEnd(line);
  std::string_view t = trimStart(line);
  if (eat(&t, "Process name:")) {  // "[[21372,1],3]"
    t = trimStart(t);
    auto comma = t.rfind("],");
    exitRank_ = -1;
    if (t.substr(0, 2) == "[[" && comma != std::string_view::npos && t.back() == ']') {
      std::string_view r = t.substr(comma + 2, t.size() - comma - 3);
      int rank = eatNumber(&r);
      if (r.empty()) exitRank_ = rank;
    }
    return std::nullopt;
  }
  if (exitRank_ >= 0 && eat(&t, "Exit code:")) {
    t = trimStart(t);
    int code = eatNumber(&t);
    int rank = exitRank_;
    exitRank_ = -1;
    if (code <= 0 || !t.empty()) return std::nullopt;
    RemoteFailure f;
    f.rank = rank;
    f.status = code;
    f.detail = fmt::format("exited with code {}", code);
    return f;
  }
  if (eat(&t, "MPI_ABORT was invoked on rank ")) {  // "... in communicator MPI_COMM_WORLD"
    abortRank_ = eatNumber(&t);
    if (!eat(&t, " in communicator ")) abortRank_ = -1;
    return std::nullopt;
  }
  if (abortRank_ >= 0 && eat(&t, "with errorcode ")) {  // "5."
    int code = eatNumber(&t);
    int rank = abortRank_;
    abortRank_ = -1;
    if (code <= 0 || t != ".") return std::nullopt;  // MPI_Abort(comm, 0): mpirun exits 0
    RemoteFailure f;
    f.rank = rank;
    f.status = code;
    f.detail = fmt::format("called MPI_Abort with error code {}", code);
    return f;
  }
  return parseMpirunSignal(t);
}

bool openMpiDefaultPlacement(const std::vector<std::string>& args) {
  for (std::string a : args) {
    while (!a.empty() && a[0] == '-') a.erase(0, 1);
    a = a.substr(0, a.find('='));
    for (const char* opt :
         {"map-by", "rank-by", "rankfile", "rf", "npernode", "N", "pernode", "npersocket", "ppr",
          "bynode", "byslot", "cpus-per-proc", "cpus-per-rank", "H", "host", "hostfile",
          "machinefile", "default-hostfile", "app"})
      if (a == opt) return false;
    if (a == "mca" || a == "gmca") continue;
    if (a.rfind("rmaps", 0) == 0 || a.rfind("orte_rankfile", 0) == 0) return false;
  }
  return true;
}

std::string describeJobRank(const JobSpec& spec, int rank, const std::string& host,
                            bool placedBySpec) {
  if (placedBySpec && rank >= 0 && rank < spec.worldSize()) {
    int node = 0;
    while (rank >= spec.firstRank(node + 1)) ++node;
    const std::string& h = spec.hosts[static_cast<size_t>(node)].host;
    if (host.empty() || host == h)
      return fmt::format("rank {} (local rank {}) on host {} (node {})", rank,
                         rank - spec.firstRank(node), h, node);
  }
  return host.empty() ? fmt::format("rank {}", rank)
                      : fmt::format("rank {} on host {}", rank, host);
}

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
  int status =
      what.rfind(kExit, 0) == 0 ? parseCode(what.substr(kExit.size())) : signalStatus(what);
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
    std::string ranks =
        n == 1 ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, first + n - 1);
    return fmt::format("host {} (node {}, {})", host, i, ranks);
  }
  return "host " + host;
}

}  // namespace ds::launcher
