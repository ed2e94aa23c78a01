// SignalWatch: for its lifetime, the listed signals are blocked in this thread and delivered
// through a signalfd the caller polls; SIGPIPE is ignored (a closed output is an error code, not
// death). Not a handler: nothing runs asynchronously. Single-threaded use only.
// Invariant: the destructor restores the previous mask and SIGPIPE disposition, and discards
// signals of the set still pending so they do not fire after the caller has dealt with them.
#pragma once

#include <signal.h>

#include <initializer_list>

#include "launcher/agent/unique_fd.h"

namespace ds::launcher {

class SignalWatch {
 public:
  explicit SignalWatch(std::initializer_list<int> signals);
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  int fd() const { return fd_.get(); }
  // The next pending signal number, or 0 when none is pending.
  int next();
  // The sending pid of the signal next() last returned (for SIGCHLD: the child that changed
  // state; when several die before the read, the signal is queued once, with the first's pid).
  int lastPid() const { return lastPid_; }

 private:
  sigset_t set_;
  sigset_t oldMask_;
  struct sigaction oldPipe_;
  UniqueFd fd_;
  int lastPid_ = 0;
};

}  // namespace ds::launcher
