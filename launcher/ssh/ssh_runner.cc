// runOverSsh (launcher/runners.h): the ssh runner. One thread per host connects (all in parallel),
// and only when every host is connected and authenticated do the commands start; each thread then
// relays its host's output line by line. The first non-zero remote status, a lost host or a stop
// signal sends EOF on every channel (the remote agents take stdin EOF as "job over" and tear their
// ranks down), waits a bounded grace for them, and closes. Not a retry loop: a host that cannot be
// reached fails the job before anything runs.
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "launcher/launcher_knobs.h"
#include "launcher/restart_loop.h"
#include "launcher/runners.h"
#include "launcher/ssh/line_relay.h"
#include "launcher/ssh/ssh_connection.h"
#include "launcher/ssh/stop_signals.h"

namespace ds::launcher {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 50;

// What the host threads share. All fields under mu.
struct JobState {
  explicit JobState(size_t n) : connectErrors(n), statuses(n, -1) {}
  std::mutex mu;
  std::condition_variable cv;
  size_t connected = 0;
  size_t finished = 0;
  bool abortStart = false;  // a connect failed or a signal came before the start
  bool stop = false;        // tear the job down
  int cause = 0;            // the job's status once decided (first failure/signal)
  std::vector<std::exception_ptr> connectErrors;
  std::vector<int> statuses;
  std::mutex outMu;  // serialises relayed lines

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stop;
  }
  void fail(int status) {  // caller holds mu
    if (cause == 0) cause = status;
    stop = true;
    cv.notify_all();
  }
};

// Connect phase: returns true when every host connected (the job may start).
bool connectAndWait(ssh::SshConnection& conn, size_t i, size_t n, JobState& st) {
  try {
    conn.connect();
  } catch (...) {
    std::lock_guard<std::mutex> lock(st.mu);
    st.connectErrors[i] = std::current_exception();
    st.abortStart = true;
    st.cv.notify_all();
    return false;
  }
  std::unique_lock<std::mutex> lock(st.mu);
  ++st.connected;
  st.cv.notify_all();
  st.cv.wait(lock, [&] { return st.connected == n || st.abortStart || st.stop; });
  return st.connected == n && !st.abortStart && !st.stop;
}

// Run phase: exec, token, relay until the remote command ends; returns its status.
int runHost(ssh::SshConnection& conn, const std::string& command, const std::string& token,
            JobState& st) {
  ssh::LineRelay out(STDOUT_FILENO, &st.outMu);
  ssh::LineRelay err(STDERR_FILENO, &st.outMu, [](std::string_view line) {
    std::string where, how;  // the remote agent's own failure line, for the restart log
    if (parseAgentFailureLine(std::string(line), &where, &how)) noteRankFailure(where, how);
  });
  conn.exec(command);
  conn.writeStdin("DS_JOB_TOKEN=" + token + "\n");  // stdin then stays open: EOF = job over
  const auto grace = std::chrono::seconds(knobIntOrDefault(knobs::kSshTeardownGrace));
  bool eofSent = false;
  Clock::time_point deadline{};
  ssh::SshConnection::Chunk chunk;
  while (conn.read(kPollMs, &chunk)) {
    out.add(chunk.out);
    err.add(chunk.err);
    chunk = {};
    if (!eofSent && st.stopping()) {
      conn.sendEof();
      eofSent = true;
      deadline = Clock::now() + grace;
    }
    if (eofSent && Clock::now() > deadline) {
      DS_LOG_ERROR("ssh",
                   "{} did not end within {} s after the job was stopped; closing the "
                   "connection (its agent sees the channel close)",
                   conn.describe(), grace.count());
      return 255;
    }
  }
  int status = conn.exitStatus();
  if (status < 0) {
    DS_LOG_ERROR("ssh", "{} closed the session without an exit status", conn.describe());
    return 255;
  }
  return status;
}

void hostMain(const JobSpec& spec, const std::string& command, const ssh::SshOptions& opts,
              size_t i, JobState& st) {
  const size_t n = spec.hosts.size();
  std::unique_ptr<ssh::SshConnection> conn;
  try {
    conn = std::make_unique<ssh::SshConnection>(spec.hosts[i].host, opts);
  } catch (...) {
    std::lock_guard<std::mutex> lock(st.mu);
    st.connectErrors[i] = std::current_exception();
    st.abortStart = true;
    st.cv.notify_all();
    ++st.finished;
    return;
  }
  int status = 0;
  if (connectAndWait(*conn, i, n, st)) {
    try {
      status = runHost(*conn, command, spec.jobToken, st);
    } catch (const std::exception& e) {
      DS_LOG_ERROR("ssh", "node {}: {}", i, e.what());
      status = 255;
    }
    if (status != 0) {
      std::lock_guard<std::mutex> lock(st.mu);
      if (!st.stop)
        DS_LOG_ERROR("ssh", "node {} on {} ended with status {}; stopping the job on every host", i,
                     conn->describe(), status);
      st.fail(status);
    }
    if (status != 0)  // when the agent printed no rank failure line (a lost host)
      noteRankFailure(describeJobHost(spec, spec.hosts[i].host),
                      fmt::format("ended with status {}", status));
  }
  std::lock_guard<std::mutex> lock(st.mu);
  st.statuses[i] = status;
  ++st.finished;
  st.cv.notify_all();
}

// Blocks the stop signals in the calling thread for its lifetime (threads it starts inherit the
// mask), so that only the supervising thread sees them and libssh's poll() is never interrupted.
class ScopedSignalBlock {
 public:
  ScopedSignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~ScopedSignalBlock() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

}  // namespace

int runOverSsh(const JobSpec& spec, const std::vector<std::string>& perHostCommands) {
  DS_CHECK_EQ(spec.hosts.size(), perHostCommands.size());
  DS_CHECK(!spec.hosts.empty(), "ssh runner needs at least one host");
  DS_CHECK(!spec.jobToken.empty(), "ssh runner needs the job token");
  const size_t n = spec.hosts.size();
  const ssh::SshOptions opts = ssh::sshOptionsFromEnv(spec.sshPort);
  ssh::ScopedStopSignals signals;
  JobState st(n);
  std::vector<std::thread> threads;
  {
    ScopedSignalBlock block;
    for (size_t i = 0; i < n; ++i)
      threads.emplace_back(hostMain, std::cref(spec), std::cref(perHostCommands[i]),
                           std::cref(opts), i, std::ref(st));
  }
  // Supervise: turn a stop signal into a teardown, wait for every host thread.
  for (;;) {
    std::unique_lock<std::mutex> lock(st.mu);
    if (st.finished == n) break;
    const int sig = signals.caught();
    if (sig != 0) noteStopSignal(sig);  // also during a teardown: no restart after it
    if (sig != 0 && !st.stop) {
      DS_LOG_ERROR("ssh", "dsrun got signal {}; stopping the job on every host", sig);
      st.abortStart = true;
      st.fail(128 + sig);
    }
    st.cv.wait_for(lock, std::chrono::milliseconds(kPollMs));
  }
  for (auto& t : threads) t.join();
  if (int sig = signals.caught(); sig != 0) noteStopSignal(sig);

  std::exception_ptr first;
  for (size_t i = 0; i < n; ++i) {
    if (!st.connectErrors[i]) continue;
    if (!first) {
      first = st.connectErrors[i];
      continue;
    }
    try {
      std::rethrow_exception(st.connectErrors[i]);
    } catch (const std::exception& e) {
      DS_LOG_ERROR("ssh", "{}", e.what());
    }
  }
  if (first && st.cause == 0) std::rethrow_exception(first);
  if (first) {
    try {
      std::rethrow_exception(first);
    } catch (const std::exception& e) {
      DS_LOG_ERROR("ssh", "{}", e.what());
    }
  }
  return st.cause;
}

}  // namespace ds::launcher
