// `dsrun --rank_exec -- program [args...]` (runners.h rankExecMain): the rank wrapper that mpirun,
// hydra and srun start in place of each rank (runner_commands.h wrapRanks), so that every runner
// keeps one exit-status contract (DESIGN.md §4.4) whatever the tool itself returns:
//  - the rank runs as this process's child, in its own process group, stdio shared;
//  - the moment it fails (non-zero exit, or a signal) and no stop was asked for, one report line
//    goes to stderr (runner_failures.h rankWrapperReport): dsrun reads its real status there, and
//    stops the job at once where the tool would not (hydra);
//  - SIGTERM/SIGINT/SIGHUP from the tool go to the rank's group, SIGKILL follows DS_KILL_GRACE
//    later (a second signal: at once), so every rank gets one grace period, all in parallel;
//  - a GroupGuard kills the rank's group if this wrapper is SIGKILLed (the tool's own escalation);
//  - it ends as the rank ended: the same exit code, or the same signal (with no core of its own).
// Not a node agent: one rank, no output relay, no rank environment of its own (the tool's).
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/env.h"
#include "core/error.h"
#include "core/rank_env.h"
#include "launcher/agent/child_process.h"
#include "launcher/agent/exit_status.h"
#include "launcher/agent/group_guard.h"
#include "launcher/agent/node_agent.h"
#include "launcher/agent/signal_watch.h"
#include "launcher/agent/unique_fd.h"
#include "launcher/runner_failures.h"
#include "launcher/runners.h"

namespace ds::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> parseRankExecArgs(int argc, char** argv) {
  // argv[1] is "--rank_exec"
  if (argc < 4 || std::strcmp(argv[2], "--") != 0)
    throw ConfigError(
        "dsrun --rank_exec: expected '-- program [args...]' (the rank wrapper that dsrun puts "
        "in front of each rank under mpirun, hydra and srun)");
  return std::vector<std::string>(argv + 3, argv + argc);
}

// "vm" (gethostname), for the report only: the tool's host names are not the hostfile's.
std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

class RankExec {
 public:
  explicit RankExec(std::vector<std::string> program)
      : program_(std::move(program)), opt_(defaultAgentOptions()) {}

  // Runs the rank to its end; returns its wait status.
  int run() {
    SignalWatch signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
    // The tool's process on this host (orted, hydra's proxy, slurmstepd) dying is a stop too: the
    // rank is not left running without it.
    const pid_t parent = ::getppid();
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
      throw SystemError("prctl(PR_SET_PDEATHSIG)", errno);
    if (::getppid() != parent) throw Error("dsrun --rank_exec: the launching process is gone");
    GroupGuard guard;
    SpawnOptions sp;
    sp.argv = program_;
    sp.env = currentEnv();
    sp.stdinFd = 0;
    sp.onlyStdio = false;  // PMI_FD (hydra, Slurm's pmi2) and whatever else the tool passes on
    StartedChild child = startChild(sp);
    guard.add(child.pid);
    try {
      pid_ = awaitExec(child);
    } catch (const Error&) {
      guard.remove(child.pid);  // awaitExec reaped it
      throw;
    }
    for (;;) {
      if (auto st = tryReap(guard)) {
        if (!stopped_ && killedByStopSignal(*st)) awaitStop(signals);
        return *st;
      }
      auto now = Clock::now();
      if (killAt_ && now >= *killAt_) {
        ::kill(-pid_, SIGKILL);
        killAt_.reset();
      }
      int ms = 1000;
      if (killAt_)
        ms = static_cast<int>(
                 std::chrono::duration_cast<std::chrono::milliseconds>(*killAt_ - now).count()) +
             1;
      struct pollfd p {
        signals.fd(), POLLIN, 0
      };
      int n = ::poll(&p, 1, std::max(ms, 0));
      if (n < 0 && errno != EINTR) throw SystemError("poll in dsrun --rank_exec", errno);
      for (int sig = n > 0 ? signals.next() : 0; sig != 0; sig = signals.next())
        if (sig != SIGCHLD) onStop(sig);
    }
  }

  bool stopped() const { return stopped_; }
  pid_t pid() const { return pid_; }

 private:
  static bool killedByStopSignal(int st) {
    return WIFSIGNALED(st) &&
           (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGINT || WTERMSIG(st) == SIGHUP);
  }

  // A tool that stops the job may signal every process of the step, the rank before this wrapper
  // (srun, proctrack): a rank killed by SIGTERM is a failure only if no stop reaches the wrapper
  // right after it (bounded, 200 ms).
  void awaitStop(SignalWatch& signals) {
    const auto until = Clock::now() + std::chrono::milliseconds(200);
    for (auto now = Clock::now(); now < until && !stopped_; now = Clock::now()) {
      struct pollfd p {
        signals.fd(), POLLIN, 0
      };
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
      if (::poll(&p, 1, static_cast<int>(ms)) <= 0) continue;
      for (int sig = signals.next(); sig != 0; sig = signals.next())
        if (sig != SIGCHLD) stopped_ = true;
    }
  }

  void onStop(int sig) {
    if (stopped_) {
      killAt_ = Clock::now();  // a second request: no more grace
      return;
    }
    stopped_ = true;
    ::kill(-pid_, sig == SIGINT ? SIGINT : SIGTERM);
    killAt_ = Clock::now() + opt_.killGrace;
  }

  // The rank's wait status once it has exited (what its group left behind is killed first).
  std::optional<int> tryReap(GroupGuard& guard) { return reapGroupIfExited(pid_, guard); }

  std::vector<std::string> program_;
  const AgentOptions opt_;
  pid_t pid_ = -1;
  bool stopped_ = false;
  std::optional<Clock::time_point> killAt_;
};

// Writes the rank's report line when it failed on its own.
void report(int waitStatus, pid_t pid) {
  int rank = -1;
  int localRank = -1;
  try {
    EnvMap env = currentEnv();
    env.emplace("MASTER_ADDR", "127.0.0.1");  // only the rank is wanted: no rendezvous checks
    RankEnv r = deriveRankEnv(env);
    rank = r.rank;
    localRank = r.localRank;
  } catch (const Error&) {  // no rank variables: nothing dsrun could match; say it plainly
  }
  std::string line =
      rank >= 0 ? rankWrapperReport(rank, localRank, static_cast<int>(pid), hostName(),
                                    describeWait(waitStatus))
                : fmt::format("dsrun --rank_exec: pid {} {}", pid, describeWait(waitStatus));
  line += "\n";
  writeAll(2, line.data(), line.size());
}

// Ends this process the way the rank ended: killed by the same signal, with no core dump of the
// wrapper's own (the rank already dumped one if it was going to).
[[noreturn]] void endLike(int waitStatus) {
  std::fflush(nullptr);
  if (WIFSIGNALED(waitStatus)) {
    int sig = WTERMSIG(waitStatus);
    struct rlimit none {
      0, 0
    };
    ::setrlimit(RLIMIT_CORE, &none);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
  }
  ::_exit(statusFromWait(waitStatus));
}

}  // namespace

int rankExecMain(int argc, char** argv) {
  int waitStatus = 0;
  try {
    RankExec exec(parseRankExecArgs(argc, argv));
    try {
      waitStatus = exec.run();
    } catch (const SpawnError& e) {  // the rank never ran: status 127, reported like an exit
      std::fprintf(stderr, "dsrun --rank_exec: %s\n", e.what());
      report(127 << 8, 0);
      return 127;
    }
    if (waitStatus != 0 && !exec.stopped()) report(waitStatus, exec.pid());
  } catch (const Error& e) {
    std::fprintf(stderr, "dsrun --rank_exec: %s: %s\n", e.kind(), e.what());
    return exitCodeFor(e);
  }
  endLike(waitStatus);
}

}  // namespace ds::launcher
