// superviseCommand (runners.h): pdsh, mpirun or srun as one supervised child in its own process
// group. SIGINT/SIGTERM/SIGHUP to dsrun are forwarded to the whole group (SIGINT, then SIGTERM:
// pdsh and srun only abort on a second SIGINT), then after the grace period SIGKILL; a GroupGuard
// kills the group, and the leader's descendants, if dsrun itself is SIGKILLed. With a failure-line
// parser the child's stderr (and with watchStdout its stdout) passes through dsrun line by line and
// the first reported remote failure decides the job's status (and, for pdsh and hydra, stops the
// job). With signalDescendants every
// signal also reaches the child's descendants in other sessions (pdsh's ssh clients: their exit
// closes the remote pty, whose hangup stops the remote agent). options.onAbandon goes to the guard.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>

#include <fmt/format.h>

#include "core/env.h"
#include "core/error.h"
#include "launcher/agent/child_process.h"
#include "launcher/agent/exit_status.h"
#include "launcher/agent/group_guard.h"
#include "launcher/agent/line_prefixer.h"
#include "launcher/agent/node_agent.h"
#include "launcher/agent/process_tree.h"
#include "launcher/agent/signal_watch.h"
#include "launcher/restart_loop.h"
#include "launcher/runners.h"

namespace ds::launcher {
namespace {

using Clock = std::chrono::steady_clock;

void say(const std::string& line) {
  std::string text = "dsrun: " + line + "\n";
  writeAll(2, text.data(), text.size());
}

class Supervisor {
 public:
  Supervisor(const std::vector<std::string>& argv, const SuperviseOptions& so)
      : argv_(argv), so_(so), opt_(defaultAgentOptions()) {}

  int run(const EnvMap& extraEnv) {
    SignalWatch signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
    GroupGuard guard(so_.onAbandon);
    SpawnOptions sp;
    sp.argv = argv_;
    sp.env = currentEnv();
    for (const auto& [k, v] : extraEnv) sp.env[k] = v;
    Pipe err, out;
    if (so_.failureLine) {
      err = makePipe("the launcher's stderr");
      sp.stderrFd = err.write.get();
      if (so_.watchStdout) {
        out = makePipe("the launcher's stdout");
        sp.stdoutFd = out.write.get();
      }
    }
    // pdsh: no PDEATHSIG. Killed at once with dsrun, pdsh would orphan its ssh clients before
    // the guard had collected them as its descendants; the guard kills pdsh itself. It is
    // registered from the fork on (the parent sets the group too), so no gap is left.
    sp.dieWithParent = !so_.signalDescendants;
    StartedChild child;
    try {
      child = startChild(sp);
      guard.add(child.pid);
      pid_ = awaitExec(child);
    } catch (const SpawnError& e) {
      if (child.pid > 0) guard.remove(child.pid);  // awaitExec reaped it
      say(e.what());
      return 127;
    }
    err.write.reset();
    out.write.reset();
    // stdout first: under pdsh a remote agent's report (on the pty, so pdsh's stdout) is written
    // before pdsh's own "ssh exited" line (stderr); read together, the report is seen first.
    streams_[0].fd = std::move(out.read);
    streams_[0].target = 1;
    streams_[1].fd = std::move(err.read);
    streams_[1].target = 2;
    const int status = loop(signals, guard);
    // A stop signal that came after the child ended still means "no restart".
    for (int sig = signals.next(); sig != 0; sig = signals.next())
      if (sig != SIGCHLD) noteStopSignal(sig);
    return status;
  }

 private:
  int loop(SignalWatch& signals, GroupGuard& guard) {
    for (;;) {
      if (auto st = tryReap(guard)) return finish(*st);
      auto now = Clock::now();
      if (stopping_ && !killed_ && now >= killAt_) {
        signalAll(SIGKILL);
        killed_ = true;
        giveUpAt_ = now + opt_.reapTimeout;
      }
      if (killed_ && now >= giveUpAt_) {
        say(fmt::format("{} (pid {}) not reaped {} ms after SIGKILL; giving up", argv_[0], pid_,
                        opt_.reapTimeout.count()));
        return failure_ ? failure_->status : 128 + (stopSignal_ != 0 ? stopSignal_ : SIGKILL);
      }
      auto wake = now + std::chrono::seconds(1);
      if (stopping_) wake = std::min(wake, killed_ ? giveUpAt_ : killAt_);
      int ms = static_cast<int>(
                   std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count()) +
               1;
      // An invalid fd (-1) is skipped by poll.
      struct pollfd p[3] = {{signals.fd(), POLLIN, 0},
                            {streams_[0].fd.get(), POLLIN, 0},
                            {streams_[1].fd.get(), POLLIN, 0}};
      int n = ::poll(p, 3, std::max(ms, 0));
      if (n < 0 && errno != EINTR) throw SystemError("poll while supervising " + argv_[0], errno);
      if (n <= 0) continue;
      for (size_t i = 0; i < streams_.size(); ++i)
        if (streams_[i].fd.valid() && p[i + 1].revents != 0) readStream(streams_[i]);
      if (p[0].revents == 0) continue;
      for (int sig = signals.next(); sig != 0; sig = signals.next()) {
        if (sig == SIGCHLD) continue;
        noteStopSignal(sig);
        if (!stopping_) {
          stopSignal_ = sig;
          say(fmt::format("received {}; stopping {}", signalName(sig), argv_[0]));
          beginStop(sig);
        } else if (!killed_) {
          killAt_ = Clock::now();
        }
      }
    }
  }

  void beginStop(int sig) {
    stopping_ = true;
    if (so_.signalDescendants) {
      signalAll(SIGTERM);  // pdsh: SIGINT only prints its status
    } else {
      if (sig == SIGINT) ::kill(-pid_, SIGINT);
      ::kill(-pid_, SIGTERM);
    }
    killAt_ = Clock::now() + opt_.killGrace;
  }

  void signalAll(int sig) {
    if (so_.signalDescendants) signalDescendants(pid_, sig);
    ::kill(-pid_, sig);
  }

  // Reaps the child if it has exited (after killing what its group left behind).
  std::optional<int> tryReap(GroupGuard& guard) { return reapGroupIfExited(pid_, guard); }

  int finish(int waitStatus) {
    for (auto& st : streams_) drain(st);
    int status = statusFromWait(waitStatus);
    if (failure_) return failure_->status;
    if (status != 0) say(fmt::format("{} {}", argv_[0], describeWait(waitStatus)));
    // Stopped by a signal to dsrun: 128+signal, whatever the tool makes of it (mpirun 1, hydra
    // 15, srun 137, pdsh is stopped with SIGTERM whatever the signal was).
    if (stopSignal_ != 0) return 128 + stopSignal_;
    return status;
  }

  // A piped output of the child: its lines go on to `target` and through the failure parser.
  struct Stream {
    UniqueFd fd;
    LinePrefixer lines{""};
    int target = 2;
  };

  void readStream(Stream& st) {
    char buf[4096];
    ssize_t r = ::read(st.fd.get(), buf, sizeof(buf));
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (r <= 0) {
      flushLines(st);
      st.fd.reset();
      return;
    }
    std::string out;
    st.lines.feed(buf, static_cast<size_t>(r), &out);
    onLines(out, st.target);
  }

  // The child has exited: what it wrote is in the pipe (a descendant may hold it open: no wait).
  void drain(Stream& st) {
    if (!st.fd.valid()) return;
    ::fcntl(st.fd.get(), F_SETFL, ::fcntl(st.fd.get(), F_GETFL) | O_NONBLOCK);
    while (st.fd.valid()) {
      struct pollfd p {
        st.fd.get(), POLLIN, 0
      };
      if (::poll(&p, 1, 0) <= 0) break;
      readStream(st);
    }
    flushLines(st);
  }

  // The pipe ended: a last line without '\n' still counts.
  void flushLines(Stream& st) {
    std::string out;
    st.lines.finish(&out);
    onLines(out, st.target);
  }

  // Forwards complete lines to dsrun's stdout/stderr; the first failure line decides the status.
  void onLines(const std::string& text, int target) {
    if (text.empty()) return;
    writeAll(target, text.data(), text.size());
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      std::string_view line(text.data() + start, nl - start);
      start = nl + 1;
      std::string agentWhere, agentHow;  // a node agent's own failure line (pdsh relays it)
      if (parseAgentFailureLine(std::string(line), &agentWhere, &agentHow))
        noteRankFailure(agentWhere, agentHow);
      if (failure_ || stopping_) continue;
      auto f = so_.failureLine(line);
      if (!f) continue;
      failure_ = *f;
      std::string where = so_.describe ? so_.describe(*f) : "host " + f->host;
      noteRankFailure(where, f->detail);
      say(fmt::format("{} failed ({}): job status {}{}", where, f->detail, f->status,
                      so_.stopOnFailure ? "; stopping the job on every host" : ""));
      if (so_.stopOnFailure) beginStop(SIGTERM);
    }
  }

  const std::vector<std::string>& argv_;
  const SuperviseOptions& so_;
  const AgentOptions opt_;
  pid_t pid_ = -1;
  std::array<Stream, 2> streams_;  // stdout, stderr
  std::optional<RemoteFailure> failure_;
  int stopSignal_ = 0;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point killAt_, giveUpAt_;
};

}  // namespace

int superviseCommand(const std::vector<std::string>& argv, const EnvMap& extraEnv,
                     const SuperviseOptions& options) {
  Supervisor s(argv, options);
  return s.run(extraEnv);
}

}  // namespace ds::launcher
