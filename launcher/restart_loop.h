// Restarts (`dsrun --max_restarts N`): the job loop that runs a whole job again on the same hosts
// after a rank failed, and the notes the runners leave about how an attempt ended (which rank, on
// which host, how; or that dsrun itself was told to stop). Not the runners (runners.h) and not the
// resume itself: every attempt after the first gets DS_RESTART_ATTEMPT=k, and dsrt train resumes
// from the latest complete checkpoint when it sees k > 0 (docs/launcher.md, "Restarts").
// Invariant: an attempt is restarted only when it failed and dsrun was not signalled.
#pragma once

#include <functional>
#include <string>

#include "launcher/job_spec.h"

namespace ds::launcher {

// The variable every rank gets when restarts are on: the attempt, 0 for the first run.
inline constexpr const char* kRestartAttemptVar = "DS_RESTART_ATTEMPT";

// How the current attempt ended, as the runners saw it. Thread-safe (the ssh runner notes from
// its host threads); the first rank failure of an attempt wins, later ones are ignored.
struct AttemptNotes {
  std::string where;   // "rank 1 (local rank 1) on host h", "host h (node 1, ranks 2-3)", or ""
  std::string how;     // "was killed by signal 9 (SIGKILL)", "exited with code 3", or ""
  int stopSignal = 0;  // a signal that told dsrun (or this agent) to stop the job; 0 none
};

// Called by the runners (node agent, ssh runner, command supervisor). A SIGKILL noted after an
// exit with a code replaces it (the killed rank is the cause, the other failed because of it).
void noteRankFailure(const std::string& where, const std::string& how);
void noteStopSignal(int sig);
AttemptNotes attemptNotes();
void resetAttemptNotes();

// "dsrun: rank 1 (local rank 1) on host h exited with code 3; ..." as the node agent prints it
// (possibly behind pdsh's "host: " prefix): {where, how}; false for any other line.
bool parseAgentFailureLine(const std::string& line, std::string* where, std::string* how);

// Checks --max_restarts against the rest of the job (ConfigError naming the flag): it must be
// >= 0, and with --no_ssh (each node's dsrun runs only its own ranks) it must be 0.
void checkMaxRestarts(int maxRestarts, bool noSsh);

// Runs `attempt(spec_k)` up to maxRestarts + 1 times; spec_k is `spec` with DS_RESTART_ATTEMPT=k
// exported to every rank (only when maxRestarts > 0; 0 runs `spec` untouched, once). Between
// attempts it logs the restart on stderr (failing rank, host, status, what happens next). Returns
// the last attempt's status. Exceptions from `attempt` (bad input, a host that cannot be reached)
// propagate: they are not restarted.
int runWithRestarts(const JobSpec& spec, int maxRestarts,
                    const std::function<int(const JobSpec&)>& attempt);

}  // namespace ds::launcher
