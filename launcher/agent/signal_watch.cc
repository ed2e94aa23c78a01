// SignalWatch (see signal_watch.h).
#include "launcher/agent/signal_watch.h"

#include <sys/signalfd.h>
#include <time.h>

#include "core/error.h"

namespace ds::launcher {

SignalWatch::SignalWatch(std::initializer_list<int> signals) {
  sigemptyset(&set_);
  for (int s : signals) sigaddset(&set_, s);
  int rc = ::pthread_sigmask(SIG_BLOCK, &set_, &oldMask_);
  if (rc != 0) throw SystemError("pthread_sigmask", rc);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &oldPipe_);
  int fd = ::signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
    ::sigaction(SIGPIPE, &oldPipe_, nullptr);
    throw SystemError("signalfd", err);
  }
  fd_.reset(fd);
}

SignalWatch::~SignalWatch() {
  struct timespec zero {
    0, 0
  };
  while (::sigtimedwait(&set_, nullptr, &zero) > 0) {
  }
  fd_.reset();
  ::pthread_sigmask(SIG_SETMASK, &oldMask_, nullptr);
  ::sigaction(SIGPIPE, &oldPipe_, nullptr);
}

int SignalWatch::next() {
  struct signalfd_siginfo info;
  for (;;) {
    ssize_t n = ::read(fd_.get(), &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) {
      lastPid_ = static_cast<int>(info.ssi_pid);
      return static_cast<int>(info.ssi_signo);
    }
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

}  // namespace ds::launcher
