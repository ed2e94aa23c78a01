// The watchdog process behind GroupGuard (see group_guard.h). Records on the pipe are 8 bytes
// ({op, pgid}), below PIPE_BUF, so each write is atomic. On EOF it collects the leaders'
// descendants (those that left the group: pdsh's setsid'd ssh clients), stops every registered
// group, collects them again, and SIGKILLs all of them; then, unless the owner said "normal end"
// first, it starts the owner-death command (argv built before the fork: nothing is allocated in
// the watchdog).
#include "launcher/agent/group_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "launcher/agent/process_tree.h"

namespace ds::launcher {
namespace {

constexpr int kMaxGroups = 4096;

struct Record {
  char op;  // '+' register, '-' unregister, 'q' normal end (no owner-death command)
  char pad[3];
  int32_t pgid;
};

// Forks and execs argv (stdio on /dev/null, own session) without waiting: the watchdog exits
// next and init reaps the command.
void startDetached(char* const* argv) {
  pid_t pid = ::fork();
  if (pid != 0) return;
  ::setsid();
  int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd)
    if (null >= 0 && null != fd) ::dup2(null, fd);
  ::close_range(3, ~0U, 0);
  ::execvp(argv[0], argv);
  ::_exit(127);
}

[[noreturn]] void watchdogMain(int readFd, char* const* onOwnerDeath) {
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
    ::signal(s, SIG_IGN);
  ::prctl(PR_SET_NAME, "dsrun-guard");
  ::setpgid(0, 0);  // out of the terminal's foreground group: Ctrl-C is the agent's to handle
  // No allocation after fork (the parent may have had other threads): a fixed table.
  static pid_t groups[kMaxGroups];
  int count = 0;
  bool normalEnd = false;
  Record r;
  for (;;) {
    ssize_t n = ::read(readFd, &r, sizeof(r));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(r))) break;  // EOF: the parent is gone or done
    if (r.op == 'q') {
      normalEnd = true;
    } else if (r.op == '+') {
      if (count < kMaxGroups) groups[count++] = r.pgid;
    } else {
      for (int i = 0; i < count; ++i)
        if (groups[i] == r.pgid) groups[i] = groups[--count];
    }
  }
  // The trees are collected twice. Before the stop: the owner may still be exiting, and a group
  // it leaves orphaned while one of its members is stopped gets SIGHUP (then SIGCONT) from the
  // kernel; a leader dying of that hands its setsid'd children to init before a later scan could
  // see them. After the stop: the leaders can neither fork nor reap while it runs. A pid in the
  // first set that exited in between (microseconds) could in principle have been reused.
  static ProcTable table;
  static pid_t before[ProcTable::kMax];
  static pid_t after[ProcTable::kMax];
  const auto nGroups = static_cast<size_t>(count);
  size_t nBefore =
      count > 0 ? findDescendants(groups, nGroups, &table, before, ProcTable::kMax) : 0;
  for (int i = 0; i < count; ++i) ::kill(-groups[i], SIGSTOP);
  size_t nAfter = count > 0 ? findDescendants(groups, nGroups, &table, after, ProcTable::kMax) : 0;
  for (size_t i = 0; i < nAfter; ++i) ::kill(after[i], SIGKILL);
  for (size_t i = 0; i < nBefore; ++i) ::kill(before[i], SIGKILL);
  for (int i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
  if (!normalEnd && onOwnerDeath != nullptr) startDetached(onOwnerDeath);
  ::_exit(0);
}

}  // namespace

GroupGuard::GroupGuard(const std::vector<std::string>& onOwnerDeath) {
  std::vector<std::string> words = onOwnerDeath;  // the child's argv lives in these copies
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  Pipe p = makePipe("process group guard");
  pid_t pid = DS_SYS_CHECK(::fork(), "fork the process group guard");
  if (pid == 0) {
    int fd = ::dup(p.read.get());  // not CLOEXEC; then drop everything else we inherited
    ::close_range(0, static_cast<unsigned>(fd - 1), 0);
    ::close_range(static_cast<unsigned>(fd + 1), ~0U, 0);
    watchdogMain(fd, words.empty() ? nullptr : argv.data());
  }
  pid_ = pid;
  write_ = std::move(p.write);
}

GroupGuard::~GroupGuard() {
  send('q', 0);
  write_.reset();
  // The watchdog exits right after EOF; wait on its pidfd, bounded at 2 s.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  if (pidfd.valid()) {
    struct pollfd p {
      pidfd.get(), POLLIN, 0
    };
    while (::poll(&p, 1, 2000) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < 200; ++i) {  // no pidfd (old kernel), or the poll timed out
    pid_t r = ::waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) return;
    struct timespec ts {
      0, 10 * 1000 * 1000
    };
    ::nanosleep(&ts, nullptr);
  }
  DS_LOG_WARN("agent", "process group guard {} did not exit; killing it", pid_);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

void GroupGuard::send(char op, pid_t pgid) {
  Record r{op, {0, 0, 0}, static_cast<int32_t>(pgid)};
  if (!writeAll(write_.get(), reinterpret_cast<const char*>(&r), sizeof(r)))
    DS_LOG_WARN("agent", "process group guard unreachable ({}); group {} is unguarded",
                std::strerror(errno), pgid);
}

void GroupGuard::add(pid_t pgid) { send('+', pgid); }
void GroupGuard::remove(pid_t pgid) { send('-', pgid); }

std::optional<int> reapGroupIfExited(pid_t leader, GroupGuard& guard) {
  siginfo_t si{};
  if (::waitid(P_PID, static_cast<id_t>(leader), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      si.si_pid != leader)
    return std::nullopt;
  ::kill(-leader, SIGKILL);
  guard.remove(leader);
  int st = 0;
  while (::waitpid(leader, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

}  // namespace ds::launcher
