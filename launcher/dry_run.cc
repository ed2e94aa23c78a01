// --dry_run text (see dry_run.h).
#include "launcher/dry_run.h"

#include <unistd.h>

#include <sstream>

#include "core/error.h"
#include "launcher/job_spec_codec.h"
#include "launcher/local_host.h"
#include "launcher/rank_plan.h"
#include "launcher/runner_commands.h"
#include "launcher/shell_quote.h"
#include "launcher/temp_hostfile.h"

namespace ds::launcher {

namespace {
std::string slotList(const std::vector<int>& slots) {
  std::string s;
  for (int x : slots) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}
// Per host, which ranks the MPI launcher or srun will start there (they read their rank from
// OMPI_COMM_WORLD_*, PMI_* or SLURM_*, see core/rank_env.h).
std::string mpiHostLines(const JobSpec& spec, const char* starter) {
  std::string out;
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    int first = spec.firstRank(static_cast<int>(i));
    int n = static_cast<int>(spec.hosts[i].slots.size());
    out += fmt::format("# {} (node {}): ranks {}..{} started by {}: {}\n", spec.hosts[i].host, i,
                       first, first + n - 1, starter, shellJoin(spec.program));
  }
  return out;
}
}  // namespace

std::string openMpiHostfilePath(const JobSpec& spec, const EnvMap& env) {
  return tempHostfilePath(env, spec.jobId);
}

std::string mpichExecutable(const EnvMap& env) {
  for (const char* n : {"mpiexec.hydra", "mpirun.mpich", "mpiexec.mpich"})
    if (!findOnPath(n, env).empty()) return n;
  return "mpirun";
}

std::string rankLines(const JobSpec& spec, int node) {
  std::string out;
  const HostSlots& h = spec.hosts.at(node);
  for (size_t l = 0; l < h.slots.size(); ++l) {
    ds::RankEnv r = rankEnvFor(spec, node, static_cast<int>(l));
    out += fmt::format("#   rank {} (LOCAL_RANK {}, CROSS_RANK {}, slot {}{}): {}\n", r.rank,
                       r.localRank, r.crossRank, h.slots[l],
                       spec.gpuHost ? ", CUDA_VISIBLE_DEVICES=" + slotList(h.slots) : "",
                       shellJoin(rankArgv(spec, static_cast<int>(l))));
  }
  return out;
}

std::string dryRunText(const JobPlan& plan, const std::string& dsrunPath, const EnvMap& env) {
  const JobSpec& spec = plan.spec;
  std::string out = fmt::format(
      "# dsrun dry run: job {}, launcher {}, {} host{}, world size {}, master {}:{}\n", spec.jobId,
      runnerName(spec.runner), spec.hosts.size(), spec.hosts.size() == 1 ? "" : "s",
      spec.worldSize(), spec.masterAddr, spec.masterPort);
  switch (spec.runner) {
    case RunnerKind::kLocal: {
      out += plan.noSsh ? fmt::format(
                              "# --no_ssh: this dsrun runs node {} only; run the same command "
                              "with --node_rank 0..{} on the other hosts\n",
                              plan.nodeRank, spec.hosts.size() - 1)
                        : "# local: the node agent runs inside this dsrun process\n";
      out += fmt::format("{} (node {}): ranks started by this dsrun\n",
                         spec.hosts[plan.nodeRank].host, plan.nodeRank);
      out += rankLines(spec, plan.nodeRank);
      break;
    }
    case RunnerKind::kSsh: {
      out +=
          "# ssh (libssh), one channel per host; DS_JOB_TOKEN is written on the channel's "
          "stdin, never on a command line\n";
      std::vector<std::string> cmds = sshCommands(spec, dsrunPath);
      for (size_t i = 0; i < cmds.size(); ++i) {
        out += fmt::format("{} (node {}): {}\n", spec.hosts[i].host, i, cmds[i]);
        out += rankLines(spec, static_cast<int>(i));
      }
      break;
    }
    case RunnerKind::kPdsh: {
      out +=
          "# pdsh; DS_JOB_TOKEN reaches the agents by ssh SendEnv (sshd needs AcceptEnv "
          "DS_JOB_TOKEN)\n";
      out += "pdsh: " + describeInvocation(pdshInvocation(spec, dsrunPath, env)) + "\n";
      AgentCommand c = agentCommand(spec, dsrunPath, false);
      for (size_t i = 0; i < spec.hosts.size(); ++i) {
        out +=
            fmt::format("{} (node {}): {}\n", spec.hosts[i].host, i, c.forNode(std::to_string(i)));
        out += rankLines(spec, static_cast<int>(i));
      }
      break;
    }
    case RunnerKind::kOpenMpi: {
      Invocation inv = openMpiInvocation(wrapRanks(spec, dsrunPath), openMpiHostfilePath(spec, env),
                                         ::geteuid() == 0);
      out += "mpirun: " + describeInvocation(inv) + "\n";
      out += "# hostfile " + inv.hostfilePath + ":\n";
      std::istringstream in(inv.hostfileText);
      for (std::string line; std::getline(in, line);) out += "#   " + line + "\n";
      out += mpiHostLines(spec, "mpirun");
      break;
    }
    case RunnerKind::kMpich:
      out += "mpich: " +
             describeInvocation(mpichInvocation(wrapRanks(spec, dsrunPath), mpichExecutable(env))) +
             "\n";
      out += mpiHostLines(spec, "hydra");
      break;
    case RunnerKind::kSlurm:
      out += "srun: " +
             describeInvocation(slurmInvocation(wrapRanks(spec, dsrunPath), plan.hostfileGiven)) +
             "\n";
      out += mpiHostLines(spec, "srun");
      break;
  }
  return out;
}

}  // namespace ds::launcher
