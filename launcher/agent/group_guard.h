// GroupGuard: a small watchdog process, forked before any rank, that SIGKILLs every registered
// process group as soon as its parent (the agent, or dsrun) dies, however it dies: it blocks on a
// pipe whose only write end the parent holds, and the kernel closes that end on SIGKILL too.
// The group leaders' descendants in other groups or sessions (pdsh's ssh clients) die with them.
// Optionally it then starts one command (detached, stdio on /dev/null) when the owner died
// without ending normally: what killing the groups cannot reach (srun's Slurm step, which runs
// under slurmstepd, is cancelled by scancel). Not a reaper (rank leaders die by PDEATHSIG, init
// reaps them); not the normal teardown path.
// Invariant: a group is registered right after its leader's fork (both sides set the group, so
// it exists from then on) and removed only while its leader is an unreaped zombie, or at once
// after a failed exec was reaped, so a group id the watchdog kills cannot have been reused.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/agent/unique_fd.h"

namespace ds::launcher {

class GroupGuard {
 public:
  // Forks the watchdog. Thread-compatible: call from the thread that spawns the children.
  // onOwnerDeath (argv, PATH searched; empty: none) runs only when the owner dies without this
  // destructor having run.
  explicit GroupGuard(const std::vector<std::string>& onOwnerDeath = {});
  // Normal end: tells the watchdog so (no onOwnerDeath), closes the pipe (the watchdog kills what
  // is still registered, then exits) and reaps the watchdog within a bounded time.
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

// A group leader's wait status once it has exited, else nullopt (never blocks): what its group
// left behind is SIGKILLed and the group unregistered from `guard` while the leader is still an
// unreaped zombie (the invariant above), then the leader is reaped.
std::optional<int> reapGroupIfExited(pid_t leader, GroupGuard& guard);

}  // namespace ds::launcher
