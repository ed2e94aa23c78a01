// fork/exec with a CLOEXEC error pipe (see child_process.h). Everything the child needs is
// prepared before fork; after fork the child only makes syscalls.
#include "launcher/agent/child_process.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "launcher/agent/unique_fd.h"

namespace ds::launcher {
namespace {

enum Stage : int { kPgid = 1, kDeath, kFds, kChdir, kAffinity, kExec };

const char* stageName(int stage) {
  switch (stage) {
    case kPgid: return "create a process group for";
    case kDeath: return "set the parent-death signal for";
    case kFds: return "redirect the standard streams of";
    case kChdir: return "change directory for";
    case kAffinity: return "set the CPU affinity of";
    default: return "execute";
  }
}

struct ChildFailure {
  int stage;
  int err;
};

[[noreturn]] void childFail(int errFd, int stage) {
  ChildFailure f{stage, errno};
  ssize_t ignored = ::write(errFd, &f, sizeof(f));
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void runChild(const SpawnOptions& o, char* const* argv, char* const* envp,
                           const cpu_set_t* cpus, pid_t parent, int nullFd, int errFd) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::signal(s, SIG_DFL);
  if (o.newProcessGroup && ::setpgid(0, 0) != 0) childFail(errFd, kPgid);
  if (o.dieWithParent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) childFail(errFd, kDeath);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  }
  int in = o.stdinFd >= 0 ? o.stdinFd : nullFd;
  if (::dup2(in, 0) < 0) childFail(errFd, kFds);
  if (o.stdoutFd >= 0 && ::dup2(o.stdoutFd, 1) < 0) childFail(errFd, kFds);
  if (o.stderrFd >= 0 && ::dup2(o.stderrFd, 2) < 0) childFail(errFd, kFds);
  // Nothing but 0-2 crosses exec (close_fds, as Python's Popen); failure (old kernel) is benign.
  if (o.onlyStdio) ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) childFail(errFd, kChdir);
  if (cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0)
    childFail(errFd, kAffinity);
  ::execvpe(argv[0], argv, envp);
  childFail(errFd, kExec);
}

}  // namespace

StartedChild startChild(const SpawnOptions& o) {
  if (o.argv.empty()) throw InternalError("startChild: empty argv");
  std::vector<char*> argv;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> envText;
  envText.reserve(o.env.size());
  for (const auto& [k, v] : o.env) envText.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : envText) envp.push_back(e.data());
  envp.push_back(nullptr);
  cpu_set_t cpuSet;
  CPU_ZERO(&cpuSet);
  for (int c : o.cpus) CPU_SET(c, &cpuSet);

  UniqueFd devNull(DS_SYS_CHECK(::open("/dev/null", O_RDWR | O_CLOEXEC), "open /dev/null"));
  Pipe err = makePipe("exec status");
  const pid_t parent = ::getpid();
  pid_t pid = DS_SYS_CHECK(::fork(), "fork for '{}'", o.argv[0]);
  if (pid == 0)
    runChild(o, argv.data(), envp.data(), o.cpus.empty() ? nullptr : &cpuSet, parent, devNull.get(),
             err.write.get());
  if (o.newProcessGroup) ::setpgid(pid, pid);  // both sides set it: no race with a quick kill
  return StartedChild{pid, std::move(err.read), o.argv[0]};
}

pid_t awaitExec(StartedChild& c) {
  // The pipe closes at exec (CLOEXEC) or carries the failure; the child does no blocking work
  // before exec, so the deadline only guards against a wedged kernel.
  ChildFailure f{0, 0};
  struct pollfd pfd {
    c.execStatus.get(), POLLIN, 0
  };
  int ready = 0;
  do ready = ::poll(&pfd, 1, 30000);
  while (ready < 0 && errno == EINTR);
  ssize_t n = 0;
  if (ready > 0) {
    do n = ::read(c.execStatus.get(), &f, sizeof(f));
    while (n < 0 && errno == EINTR);
  }
  c.execStatus.reset();
  if (ready == 0) {
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    throw TimeoutError(fmt::format("starting '{}' (pid {}): no exec after 30 s", c.program, c.pid));
  }
  if (n == static_cast<ssize_t>(sizeof(f))) {
    ::waitpid(c.pid, nullptr, 0);
    throw SpawnError(fmt::format("cannot {} '{}'", stageName(f.stage), c.program), f.err);
  }
  return c.pid;
}

pid_t spawnChild(const SpawnOptions& o) {
  StartedChild c = startChild(o);
  return awaitExec(c);
}

}  // namespace ds::launcher
