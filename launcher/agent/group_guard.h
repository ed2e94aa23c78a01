// GroupGuard: a small watchdog process, forked before any rank, that SIGKILLs every registered
// process group as soon as its parent (the agent, or dsrun) dies, however it dies: it blocks on a
// pipe whose only write end the parent holds, and the kernel closes that end on SIGKILL too.
// The group leaders' descendants in other groups or sessions (pdsh's ssh clients) die with them.
// Not a reaper (rank leaders die by PDEATHSIG, init reaps them); not the normal teardown path.
// Invariant: a group is registered right after its leader exec'd (before that gap closes the
// leader is covered by its PDEATHSIG) and removed only while its leader is an unreaped zombie,
// so a group id the watchdog kills cannot have been reused.
#pragma once

#include <sys/types.h>

#include "launcher/agent/unique_fd.h"

namespace ds::launcher {

class GroupGuard {
 public:
  // Forks the watchdog. Thread-compatible: call from the thread that spawns the children.
  GroupGuard();
  // Normal end: closes the pipe (the watchdog kills what is still registered, then exits) and
  // reaps the watchdog within a bounded time.
  ~GroupGuard();
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;

  void add(pid_t pgid);
  void remove(pid_t pgid);
  pid_t pid() const { return pid_; }

 private:
  void send(char op, pid_t pgid);

  UniqueFd write_;
  pid_t pid_ = -1;
};

}  // namespace ds::launcher
