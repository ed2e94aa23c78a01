// Command builders for every runner: the node-agent command line (ssh, pdsh, --dry_run) and the
// pdsh/mpirun/srun invocations. Pure functions of the JobSpec; what --dry_run prints is exactly
// what runs. Invariant: DS_JOB_TOKEN never appears in any argv or shell command built here; it
// travels in an Invocation's env (pdsh SendEnv, mpirun -x, srun --export=ALL, hydra -genvlist)
// or on the ssh channel's stdin.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "launcher/job_spec.h"

namespace ds::launcher {

// A command dsrun runs itself: argv exec'd without a shell, env added to dsrun's environment.
struct Invocation {
  std::vector<std::string> argv;
  EnvMap env;                // may hold DS_JOB_TOKEN: never print it (describeInvocation masks)
  std::string hostfilePath;  // openmpi: dsrun writes hostfileText there first
  std::string hostfileText;
  // slurm: a command that cancels this job's step (srun --job-name=<DS_JOB_ID>), for when dsrun
  // dies with srun (the tasks run under slurmstepd, which srun's death does not stop).
  std::vector<std::string> cancelArgv;
};

// The agent command with the node rank split out: prefix + <node rank> + suffix is
// `cd <cwd> && exec env <K=V...> <dsrun> --agent --job <b64> --node_rank N [--token_stdin]`.
struct AgentCommand {
  std::string prefix;
  std::string suffix;
  std::string forNode(const std::string& nodeRank) const { return prefix + nodeRank + suffix; }
};
AgentCommand agentCommand(const JobSpec& spec, const std::string& dsrunPath, bool tokenStdin);

// ssh runner: one command per host (node rank = index), the token read from stdin.
std::vector<std::string> sshCommands(const JobSpec& spec, const std::string& dsrunPath);

// pdsh -S -f 1024 -R ssh -w h1,h2 <launcher_args> '<agent command, --node_rank %n>', with
// PDSH_SSH_ARGS_APPEND = <caller's value> -tt -o SendEnv=DS_JOB_TOKEN [-p port]. `env` is
// dsrun's environment (its PDSH_SSH_ARGS_APPEND is kept, not overwritten).
Invocation pdshInvocation(const JobSpec& spec, const std::string& dsrunPath, const EnvMap& env);
// '%' doubled so that pdsh's own %h/%n/%u substitution leaves the text intact.
std::string pdshEscape(const std::string& s);

// The job with every rank started through the rank wrapper (runners.h rankExecMain): program
// becomes `<dsrun> --rank_exec -- program...`. dsrun runs its openmpi, mpich and slurm jobs so
// (dsrun must then be at the same path on every host, as for ssh and pdsh): the wrapper reports
// each rank's real status and gives it one DS_KILL_GRACE on a stop (unless the tool SIGKILLs it
// sooner: Open MPI's orted does after odls_base_sigkill_timeout, 1 s by default).
JobSpec wrapRanks(const JobSpec& spec, const std::string& dsrunPath);

// mpirun -n W --hostfile <hostfilePath> [--allow-run-as-root] [--mca btl ^openib]
// [--mca plm_rsh_args '-p <ssh port>'] -x K... <launcher_args> program. The two --mca defaults
// are left out when launcher_args sets that parameter.
Invocation openMpiInvocation(const JobSpec& spec, const std::string& hostfilePath, bool asRoot);
// <mpiexec> -n W -ppn P -hosts h1,h2 -genv K V ... -genvlist DS_JOB_TOKEN program (equal slots).
Invocation mpichInvocation(const JobSpec& spec, const std::string& mpiexec);
// srun -n W --nodes N --ntasks-per-node P [--nodelist h1,h2] --export=ALL --kill-on-bad-exit=1
// <launcher_args> program (equal slots; a --kill-on-bad-exit in launcher_args comes later, wins).
Invocation slurmInvocation(const JobSpec& spec, bool withNodelist);

// The variables every rank of an mpirun/srun job gets besides spec.exports.
EnvMap jobEnv(const JobSpec& spec);

// `K=V ... argv` shell-quoted, DS_JOB_TOKEN shown as <hidden>.
std::string describeInvocation(const Invocation& inv);

}  // namespace ds::launcher
