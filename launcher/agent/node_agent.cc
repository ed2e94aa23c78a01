// The node agent (see node_agent.h): spawn, relay, reap, tear down. One poll loop over the
// signalfd, the output pipes and the watched fd; every wait in it is bounded by a deadline.
// Teardown: the stop signal to every rank's process group, killGrace, then SIGKILL.
#include "launcher/agent/node_agent.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/safe_file.h"
#include "launcher/agent/child_process.h"
#include "launcher/agent/core_binding.h"
#include "launcher/agent/exit_status.h"
#include "launcher/agent/group_guard.h"
#include "launcher/agent/output_relay.h"
#include "launcher/agent/pid_file.h"
#include "launcher/agent/rank_logs.h"
#include "launcher/agent/signal_watch.h"
#include "launcher/job_builder.h"
#include "launcher/launcher_knobs.h"
#include "launcher/rank_plan.h"
#include "launcher/restart_loop.h"
#include "launcher/runners.h"

namespace ds::launcher {
namespace {

using Clock = std::chrono::steady_clock;

struct RankProc {
  int globalRank = 0;
  int localRank = 0;
  pid_t pid = -1;  // also its process group id
  bool reaped = false;
};

class NodeAgent {
 public:
  NodeAgent(const JobSpec& spec, int node, const AgentOptions& opt)
      : spec_(spec),
        node_(node),
        opt_(opt),
        host_(spec.hosts.at(node).host),
        signals_({SIGCHLD, SIGINT, SIGTERM, SIGHUP}) {}

  int run() {
    spawnAll();
    loop();
    // A stop signal that came after the last rank ended still means "no restart".
    for (int sig = signals_.next(); sig != 0; sig = signals_.next())
      if (sig != SIGCHLD) noteStopSignal(sig);
    if (failure_) return *failure_;
    if (stopSignal_ != 0) {
      say(fmt::format("stopped {} rank(s) on host {} after {}", ranks_.size(), host_, stopCause_));
      return 128 + stopSignal_;
    }
    return 0;
  }

 private:
  void say(const std::string& line) {
    std::string text = "dsrun: " + line + "\n";
    writeAll(opt_.errFd, text.data(), text.size());
  }

  void spawnAll();
  struct PendingRank {
    RankProc proc;
    SpawnOptions opts;
    Pipe out, err;
    UniqueFd logFile;
    StartedChild child;
  };
  void prepareRank(PendingRank* p, int local, const EnvMap& base, int cores,
                   const std::vector<int>& cpus, const std::string& logStamp);
  void onSpawnFailure(const RankProc& r, const Error& e);
  void loop();
  void reap(int firstPid);
  void onRankExit(const RankProc& r, int waitStatus);
  void onStopRequest(int sig, const std::string& cause);
  void beginStop(int sig);
  void killAll(int sig);
  size_t liveRanks() const {
    size_t n = 0;
    for (const auto& r : ranks_) n += r.reaped ? 0 : 1;
    return n;
  }

  const JobSpec& spec_;
  const int node_;
  const AgentOptions opt_;
  const std::string host_;
  SignalWatch signals_;  // first: SIGCHLD is blocked before any child exists
  GroupGuard guard_;
  OutputRelay relay_;
  std::vector<RankProc> ranks_;
  std::optional<int> failure_;  // the first failing rank's status
  int stopSignal_ = 0;          // a stop request (signal, or SIGHUP for a closed session)
  std::string stopCause_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point killAt_;
  Clock::time_point giveUpAt_;
  int watchFd_ = -1;
};

void NodeAgent::spawnAll() {
  watchFd_ = opt_.watchFd;
  const HostSlots& node = spec_.hosts[node_];
  const int localSize = static_cast<int>(node.slots.size());
  std::vector<int> allowed = allowedCpus();
  int cores = static_cast<int>(allowed.size());  // OMP_NUM_THREADS = cores / local ranks
  std::vector<std::vector<int>> slices(static_cast<size_t>(localSize));
  if (spec_.bindCoresToRank || !spec_.bindCoreList.empty()) {
    bool listed = !spec_.bindCoreList.empty();
    if (listed)
      checkCoresAvailable(parseCoreList(spec_.bindCoreList), allowed,
                          "--bind_core_list " + spec_.bindCoreList, host_);
    slices = coreSlices(listed ? parseCoreList(spec_.bindCoreList) : allowed, localSize,
                        listed ? "--bind_core_list " + spec_.bindCoreList
                               : "--bind_cores_to_rank (the CPUs this agent may use)");
    cores = static_cast<int>(slices[0].size()) * localSize;
  }
  std::string stamp;
  if (!spec_.eachRankLogDir.empty()) {
    prepareRankLogDir(spec_.eachRankLogDir);
    stamp = logTimestamp();
  }
  const EnvMap base = currentEnv();
  std::vector<PendingRank> pending(static_cast<size_t>(localSize));
  for (int local = 0; local < localSize; ++local)
    prepareRank(&pending[local], local, base, cores, slices[static_cast<size_t>(local)], stamp);
  // Fork every rank first, then confirm the execs: the ranks' start-up overlaps. Each group is
  // guarded from its fork on (both sides set the group): a rank that execs and forks before its
  // exec is confirmed here leaves no child behind if the agent is SIGKILLed meanwhile.
  for (auto& p : pending) {
    try {
      p.child = startChild(p.opts);
    } catch (const Error& e) {
      onSpawnFailure(p.proc, e);
      break;
    }
    guard_.add(p.child.pid);
  }
  for (auto& p : pending) {
    p.out.write.reset();
    p.err.write.reset();
    p.logFile.reset();
    if (p.child.pid < 0) continue;
    try {
      p.proc.pid = awaitExec(p.child);
    } catch (const Error& e) {
      guard_.remove(p.child.pid);  // awaitExec reaped it
      onSpawnFailure(p.proc, e);
      continue;
    }
    ranks_.push_back(p.proc);
    if (stamp.empty()) {
      std::string prefix = fmt::format("[{}] ", p.proc.globalRank);
      relay_.add(std::move(p.out.read), prefix, opt_.outFd);
      relay_.add(std::move(p.err.read), prefix, opt_.errFd);
    }
  }
  if (failure_) {
    if (!ranks_.empty()) say(fmt::format("stopping the other {} rank(s)", ranks_.size()));
    beginStop(SIGTERM);
  }
}

void NodeAgent::prepareRank(PendingRank* p, int local, const EnvMap& base, int cores,
                            const std::vector<int>& cpus, const std::string& logStamp) {
  p->proc.localRank = local;
  p->proc.globalRank = spec_.firstRank(node_) + local;
  SpawnOptions& so = p->opts;
  so.argv = rankArgv(spec_, local);
  so.env = base;
  for (auto& [k, v] : rankEnvironment(spec_, node_, local, base, cores)) so.env[k] = std::move(v);
  so.cwd = spec_.cwd;
  so.cpus = cpus;
  if (!logStamp.empty()) {
    std::string path = rankLogPath(spec_.eachRankLogDir, logStamp, p->proc.globalRank);
    p->logFile.reset(createFile(path, O_WRONLY | O_APPEND, 0644, ExistingFile::kAppend,
                                "--enable_each_rank_log: rank log"));
    so.stdoutFd = so.stderrFd = p->logFile.get();
  } else {
    p->out = makePipe("rank stdout");
    p->err = makePipe("rank stderr");
    so.stdoutFd = p->out.write.get();
    so.stderrFd = p->err.write.get();
  }
}

void NodeAgent::onSpawnFailure(const RankProc& r, const Error& e) {
  if (failure_) return;
  failure_ = dynamic_cast<const SpawnError*>(&e) != nullptr ? 127 : 1;
  noteRankFailure(fmt::format("rank {} on host {}", r.globalRank, host_),
                  fmt::format("could not start: {}", e.what()));
  say(fmt::format("rank {} on host {} could not start: {}", r.globalRank, host_, e.what()));
}

void NodeAgent::loop() {
  std::optional<Clock::time_point> drainUntil;
  for (;;) {
    const auto now = Clock::now();
    if (liveRanks() == 0) {
      if (relay_.openCount() == 0) return;
      if (!drainUntil) drainUntil = now + opt_.drainTimeout;
      if (now >= *drainUntil) {  // a descendant that left the group still holds a pipe
        relay_.closeAll();
        return;
      }
    }
    if (stopping_ && !killed_ && now >= killAt_) {
      killAll(SIGKILL);
      killed_ = true;
      giveUpAt_ = now + opt_.reapTimeout;
    }
    if (killed_ && liveRanks() > 0 && now >= giveUpAt_) {
      say(fmt::format("{} rank(s) on host {} still not reaped {} ms after SIGKILL; giving up",
                      liveRanks(), host_, opt_.reapTimeout.count()));
      relay_.closeAll();
      return;
    }
    auto wake = now + std::chrono::seconds(1);
    if (drainUntil) wake = std::min(wake, *drainUntil);
    if (stopping_) wake = std::min(wake, killed_ ? giveUpAt_ : killAt_);
    int timeoutMs = static_cast<int>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count()) +
                    1;

    std::vector<struct pollfd> fds{{signals_.fd(), POLLIN, 0}};
    if (watchFd_ >= 0) fds.push_back({watchFd_, POLLIN, 0});
    relay_.pollFds(&fds);
    int n = ::poll(fds.data(), fds.size(), std::max(timeoutMs, 0));
    if (n < 0 && errno != EINTR) throw SystemError("poll in the node agent", errno);
    if (n <= 0) continue;
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == signals_.fd()) {
        for (int sig = signals_.next(); sig != 0; sig = signals_.next()) {
          if (sig == SIGCHLD) reap(signals_.lastPid());
          else onStopRequest(sig, "receiving " + signalName(sig));
        }
      } else if (p.fd == watchFd_) {
        char buf[256];
        ssize_t r = ::read(watchFd_, buf, sizeof(buf));
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
          watchFd_ = -1;
          onStopRequest(SIGHUP, "the launching session closed (EOF on stdin)");
        }
      } else {
        relay_.onReady(p.fd);
      }
    }
  }
}

// Reaps every rank that has exited, `firstPid` (the child whose SIGCHLD woke us: the first to die
// when several did before the agent ran) before the others, so the job's status and the restart
// log name the rank that failed first, not one that failed because of it.
void NodeAgent::reap(int firstPid) {
  std::vector<RankProc*> order;
  for (auto& r : ranks_)
    if (r.pid == firstPid) order.push_back(&r);
  for (auto& r : ranks_)
    if (r.pid != firstPid) order.push_back(&r);
  for (RankProc* rp : order) {
    RankProc& r = *rp;
    if (r.reaped) continue;
    siginfo_t si{};
    if (::waitid(P_PID, static_cast<id_t>(r.pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        si.si_pid != r.pid)
      continue;
    // The leader is a zombie, so its group id is still reserved: kill what it left behind, then
    // unregister and reap.
    ::kill(-r.pid, SIGKILL);
    guard_.remove(r.pid);
    int st = 0;
    while (::waitpid(r.pid, &st, 0) < 0 && errno == EINTR) {
    }
    r.reaped = true;
    onRankExit(r, st);
  }
}

void NodeAgent::onRankExit(const RankProc& r, int st) {
  if (stopping_ && !killed_ && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
    // Not our SIGKILL (that comes after the grace): killed from outside, and its sockets closed
    // before it could be reaped, so a peer failing on the broken connection exited first. It
    // failed first: its 137 replaces the peer's exit code (restart_loop.h names it too).
    const std::string where =
        fmt::format("rank {} (local rank {}) on host {}", r.globalRank, r.localRank, host_);
    if (failure_ && *failure_ < 128) failure_ = statusFromWait(st);
    noteRankFailure(where, describeWait(st));
    say(fmt::format("{} {} while the job was stopping", where, describeWait(st)));
    return;
  }
  if (st == 0 || stopping_) return;
  failure_ = statusFromWait(st);
  noteRankFailure(
      fmt::format("rank {} (local rank {}) on host {}", r.globalRank, r.localRank, host_),
      describeWait(st));
  size_t others = liveRanks();
  say(fmt::format("rank {} (local rank {}) on host {} {}{}", r.globalRank, r.localRank, host_,
                  describeWait(st),
                  others > 0 ? fmt::format("; stopping the other {} rank(s)", others) : ""));
  beginStop(SIGTERM);
}

void NodeAgent::onStopRequest(int sig, const std::string& cause) {
  noteStopSignal(sig);
  if (!stopping_) {
    stopSignal_ = sig;
    stopCause_ = cause;
    beginStop(sig == SIGINT ? SIGINT : SIGTERM);
  } else if (!killed_ && sig != SIGHUP) {
    // A second SIGINT/SIGTERM: no more grace. A hangup or EOF of the launching session is not
    // one: the launcher closes every host's session when one host's rank fails, also the
    // failing host's, whose ranks are already in their grace period.
    killAt_ = Clock::now();
  }
}

void NodeAgent::beginStop(int sig) {
  if (stopping_) return;
  stopping_ = true;
  killAll(sig);
  killAt_ = Clock::now() + opt_.killGrace;
}

void NodeAgent::killAll(int sig) {
  for (const auto& r : ranks_)
    if (!r.reaped) ::kill(-r.pid, sig);
}

}  // namespace

AgentOptions defaultAgentOptions() {
  AgentOptions o;
  o.killGrace = knobSecondsOrDefault(knobs::kKillGrace);
  return o;
}

int runNodeAgent(const JobSpec& spec, int nodeRank, const AgentOptions& options) {
  rankEnvFor(spec, nodeRank, 0);  // ConfigError naming the node when it is not in the job
  if (spec.program.empty()) throw ConfigError("the job has no program to run");
  if (spec.jobToken.empty())
    throw InternalError("runNodeAgent: the job token is not set (the front end sets it)");
  PidFile pidFile(spec.savePidFile);
  NodeAgent agent(spec, nodeRank, options);
  return agent.run();
}

int runNodeAgent(const JobSpec& spec, int nodeRank) {
  return runNodeAgent(spec, nodeRank, defaultAgentOptions());
}

}  // namespace ds::launcher
