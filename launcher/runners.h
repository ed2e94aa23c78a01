// The execution side of dsrun, as seen by the front end: the node agent, command supervision and
// the libssh runner. Declared here (front end owns the contract); implemented in launcher/agent/
// and launcher/ssh/. Every function returns the job's exit status per DESIGN.md §4.4.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "launcher/job_spec.h"
#include "launcher/runner_failures.h"

namespace ds::launcher {

// Spawns and supervises node `nodeRank`'s ranks of `spec` on this machine (spec.jobToken must be
// set); returns the job status (0, the first failing rank's code, or 128+signal).
int runNodeAgent(const JobSpec& spec, int nodeRank);

// How superviseCommand watches a launcher that reports remote failures on its stderr.
struct SuperviseOptions {
  // Set: the child's stderr is piped through dsrun (each line forwarded unchanged) and given to
  // this; the first RemoteFailure (before any stop) becomes the job's status.
  std::function<std::optional<RemoteFailure>(std::string_view)> failureLine;
  // Names where a failure happened in the summary line ("host h (node 1, ranks 2-3)", "rank 3
  // (local rank 1) on host h (node 1)"); unset: "host <f.host>".
  std::function<std::string(const RemoteFailure&)> describe;
  // The child's stdout is piped and parsed too (pdsh: under ssh -tt the remote agent's stderr
  // arrives on the pty, so on pdsh's stdout).
  bool watchStdout = false;
  // A failure line stops the job (pdsh and hydra do not stop the other ranks; mpirun and srun -K
  // do it themselves).
  bool stopOnFailure = false;
  // Stop signals also go to the child's descendants outside its group (pdsh's setsid'd ssh
  // clients), SIGTERM instead of pdsh's status-printing SIGINT.
  bool signalDescendants = false;
  // Run by dsrun's guard when dsrun dies without tearing the job down (SIGKILL), after it killed
  // the launcher: stops what the launcher's death leaves running (srun's Slurm step). Empty: none.
  std::vector<std::string> onAbandon;
};

// Runs argv (pdsh, mpirun, srun) as a supervised child with `extraEnv` added to dsrun's
// environment; forwards SIGINT/SIGTERM/SIGHUP, tears the child's tree down, returns its status
// (or the first failure `options` recognised).
int superviseCommand(const std::vector<std::string>& argv, const EnvMap& extraEnv,
                     const SuperviseOptions& options = {});

// `dsrun --agent --job <b64> --node_rank N [--token_stdin]`: decodes the job and runs the node
// agent. argv[1] is "--agent".
int agentMain(int argc, char** argv);

// `dsrun --rank_exec -- program [args...]`: the rank wrapper mpirun, hydra and srun start for each
// rank (runner_commands.h wrapRanks). Runs the program as its child, reports its failure on stderr
// (runner_failures.h parseRankReport), gives it DS_KILL_GRACE on a stop and ends with its status.
// argv[1] is "--rank_exec".
int rankExecMain(int argc, char** argv);

// Runs perHostCommands[i] (a complete shell command line, already quoted) on spec.hosts[i] over
// ssh, writing "DS_JOB_TOKEN=<token>\n" on each channel's stdin first; returns the job status.
int runOverSsh(const JobSpec& spec, const std::vector<std::string>& perHostCommands);

}  // namespace ds::launcher
