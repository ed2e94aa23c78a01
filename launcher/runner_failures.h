// The first remote failure as pdsh, srun and mpirun report it on their stderr: pdsh prints
// "pdsh@<me>: <host>: ssh exited with exit code N" when one host's command ends non-zero, srun
// prints "srun: error: <host>: task(s) <list>: Exited with exit code K" (or a signal's
// strsignal text), Open MPI's mpirun a "Process name: [[j,1],R]" / "Exit code: N" block, a
// "process rank R ... on node H exited on signal N" line or an MPI_ABORT notice. Parsers only:
// nothing here watches a process; superviseCommand does.
// dsrun's own rank reports come first: the line a node agent (ssh, pdsh) or a rank wrapper
// (`dsrun --rank_exec` under mpirun, hydra and srun) writes on stderr the moment a rank fails,
// before any teardown, so that the launcher learns the real status and can stop every host at once.
// Invariant: a line that is not such a report gives nullopt (never a guess).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/job_spec.h"

namespace ds::launcher {

struct RemoteFailure {
  std::string host;    // as the tool names it
  int status = 0;      // the job status it implies: exit code, or 128+signal
  std::string detail;  // "ssh exited with exit code 3", "task 1: Exited with exit code 3"
  int rank = -1;       // the failing global rank when the tool names it (mpirun), else -1
};

// A rank report, found anywhere in the line (pdsh prefixes "host: ", and mpirun may join a rank's
// unterminated last line with the next one):
//   "dsrun: rank 3 (local rank 1) on host 127.0.0.3 exited with code 3; stopping ..."  (agent)
//     -> {127.0.0.3, 3, rank 3}
//   "dsrun: rank 3 (local rank 1, pid 812 on vm) was killed by signal 9 (SIGKILL)"  (wrapper)
//     -> {"", 137, rank 3}
// The wrapper does not know which hostfile entry it runs on, so its report names no host.
std::optional<RemoteFailure> parseRankReport(std::string_view line);

// The rank report a rank wrapper writes (parseRankReport's second form): `how` is describeWait's
// phrase ("exited with code 3", "was killed by signal 9 (SIGKILL)").
std::string rankWrapperReport(int rank, int localRank, int pid, const std::string& host,
                              const std::string& how);

// "pdsh@vm: 127.0.0.3: ssh exited with exit code 3" -> {127.0.0.3, 3}. pdsh reports a command
// killed by a signal as code 0 (WEXITSTATUS); that, like 255, means the host was lost: 255.
std::optional<RemoteFailure> parsePdshFailure(std::string_view line);

// "srun: error: vm: task 1: Exited with exit code 3" -> {vm, 3}; "...: tasks 0-1: Killed" ->
// {vm, 137} (the text is matched against strsignal).
std::optional<RemoteFailure> parseSrunFailure(std::string_view line);

// Open MPI 4.x mpirun's failure reports, fed line by line (the exit-code report spans two lines,
// hence the state):
//   "  Process name: [[21372,1],3]" then "  Exit code:    3"          -> {rank 3, 3}
//   "mpirun noticed that process rank 3 with PID 16892 on node 127.0.0.3 exited on signal 9
//    (Killed)."                                                       -> {rank 3, 127.0.0.3, 137}
//   "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD" then "with errorcode 5."
//                                                                      -> {rank 3, 5}
// The host is empty when mpirun does not name it.
class OpenMpiFailureParser {
 public:
  std::optional<RemoteFailure> operator()(std::string_view line);

 private:
  int exitRank_ = -1;   // from "Process name:", waiting for "Exit code:"
  int abortRank_ = -1;  // from "MPI_ABORT was invoked on rank R", waiting for "with errorcode"
};

// True when --launcher_args leave Open MPI's default placement (ranks fill the generated
// hostfile's hosts in order, slot by slot), so that rank r runs where dsrun's spec puts it.
bool openMpiDefaultPlacement(const std::vector<std::string>& launcherArgs);

// "rank 3 (local rank 1) on host 127.0.0.3 (node 1)": where `rank` runs, from the spec when
// `placedBySpec` (the host a tool named, if any, must agree), else from `host` alone
// ("rank 3 on host h", or "rank 3" when no host is known).
std::string describeJobRank(const JobSpec& spec, int rank, const std::string& host,
                            bool placedBySpec);

// "host 127.0.0.3 (node 1, ranks 2-3)": where a failing host sits in the job (the host alone
// when it is not one of spec.hosts).
std::string describeJobHost(const JobSpec& spec, const std::string& host);

}  // namespace ds::launcher
