// spawnChild: fork + exec of one supervised child (a rank, or pdsh/mpirun/srun) with a complete
// environment, its own process group, SIGKILL on the parent's death, optional CPU affinity.
// Not a supervisor: waiting, signalling and reaping belong to the caller (node_agent, supervise).
// Invariant: when spawnChild returns, the child has exec'd (or a SpawnError says why not and the
// child is reaped); all work after fork in the child is async-signal-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "launcher/agent/unique_fd.h"

namespace ds::launcher {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] searched in PATH
  EnvMap env;                     // the complete environment
  std::string cwd;                // empty: inherit
  int stdinFd = -1;               // -1: /dev/null
  int stdoutFd = -1;              // -1: inherit
  int stderrFd = -1;              // -1: inherit
  std::vector<int> cpus;          // non-empty: sched_setaffinity to these CPUs
  bool newProcessGroup = true;    // setpgid(0, 0): the child leads its own group
  bool dieWithParent = true;      // PR_SET_PDEATHSIG(SIGKILL), re-checked against getppid()
  // false: every descriptor dsrun holds without CLOEXEC crosses exec too (the rank wrapper: hydra
  // and Slurm's PMI hand the rank its PMI_FD that way).
  bool onlyStdio = true;
};

// The child could not be started (exec or a setup step failed); exit status 127 by convention.
class SpawnError : public SystemError {
 public:
  using SystemError::SystemError;
};

// A forked child whose exec has not been confirmed yet.
struct StartedChild {
  pid_t pid = -1;
  UniqueFd execStatus;  // closes at exec; carries the failure otherwise
  std::string program;
};

// Forks the child (which sets itself up and execs) without waiting for the exec: start several,
// then awaitExec each, and their execs overlap. Must be called from a thread that outlives the
// child (PDEATHSIG follows the forking thread).
StartedChild startChild(const SpawnOptions& opts);
// Waits (bounded, 30 s) until the child has exec'd; returns its pid (also its process group id
// when newProcessGroup). On failure the child is reaped and SpawnError says why.
pid_t awaitExec(StartedChild& child);

// startChild + awaitExec.
pid_t spawnChild(const SpawnOptions& opts);

}  // namespace ds::launcher
