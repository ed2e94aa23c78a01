// dsrun's main: parses the flags, builds the job and hands it to its runner (local node agent,
// libssh, pdsh, mpirun, hydra or srun). `dsrun --agent ...` is the node agent on a host. Not the
// runners themselves (runners.h). Only this main and dsrt's exit: every error below is a
// ds::Error, printed as one line, exit status exitCodeFor() (2 for bad input).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "launcher/check_mode.h"
#include "launcher/cli.h"
#include "launcher/dry_run.h"
#include "launcher/job_builder.h"
#include "launcher/local_host.h"
#include "launcher/restart_loop.h"
#include "launcher/runner_commands.h"
#include "launcher/runners.h"
#include "launcher/shell_quote.h"
#include "launcher/temp_hostfile.h"

namespace ds::launcher {
namespace {

std::string currentDir() {
  char buf[PATH_MAX + 1] = {};
  if (!::getcwd(buf, PATH_MAX)) throw SystemError("getcwd", errno);
  return buf;
}

// pdsh, mpirun, srun must exist before anything starts (DeepSpeed: "launcher 'X' not installed.").
void requireTool(const std::string& tool, const char* launcher, const EnvMap& env) {
  if (findOnPath(tool, env).empty())
    throw ConfigError(
        fmt::format("--launcher {}: '{}' not found on PATH (launcher '{}' not "
                    "installed; install it or choose another --launcher)",
                    launcher, tool, launcher));
}

// --launcher mpich falls back to plain `mpirun`; on Debian that is usually Open MPI's, which
// does not understand hydra's -ppn/-genv.
void requireHydra(const std::string& mpiexec, const EnvMap& env) {
  if (mpiexec != "mpirun") return;
  char real[PATH_MAX + 1] = {};
  if (!::realpath(findOnPath(mpiexec, env).c_str(), real)) return;
  std::string base = std::string(real).substr(std::string(real).rfind('/') + 1);
  bool openMpi =
      base.find("openmpi") != std::string::npos || base == "orterun" || base == "prterun";
  if (!openMpi) return;
  throw ConfigError(fmt::format(
      "--launcher mpich: no MPICH hydra launcher on PATH (mpiexec.hydra, mpirun.mpich, "
      "mpiexec.mpich), and mpirun is Open MPI's ({}): install MPICH or use --launcher openmpi",
      real));
}

// A dsrt command (train, ...) needs the dsrt built next to this dsrun.
void requireDsrt(const CliOptions& opts, const JobSpec& spec) {
  if (opts.program.empty() || !isDsrtCommand(opts.program[0])) return;
  if (::access(spec.program[0].c_str(), X_OK) != 0)
    throw ConfigError(
        fmt::format("'{}' is a dsrt command, but {} is missing: build the dsrt "
                    "target next to dsrun",
                    opts.program[0], spec.program[0]));
}

// Where the tool puts rank r when launcher_args leave its placement alone: host by host, slot by
// slot, as dsrun's spec does (mpirun fills its hostfile in order, hydra -ppn and srun
// --ntasks-per-node place blocks).
bool placedBySpec(const JobSpec& spec, RunnerKind kind) {
  std::vector<std::string> args = shellSplit(spec.launcherArgs, "--launcher_args");
  if (kind == RunnerKind::kOpenMpi) return openMpiDefaultPlacement(args);
  if (kind == RunnerKind::kPdsh) return true;  // the agents place the ranks
  return args.empty();
}

// The first rank report (runner_failures.h parseRankReport: the node agent's under pdsh, the rank
// wrapper's under mpirun, hydra and srun) decides the job status; each tool's own failure lines
// are the fallback (a wrapper that could not start). pdsh does not stop the other hosts when one
// fails, and leaves its ssh clients (each in its own session) behind when it is killed: dsrun
// stops them itself on the first report. hydra does not stop the job when a rank exits non-zero:
// dsrun stops it. mpirun and srun --kill-on-bad-exit stop the job themselves.
SuperviseOptions watchFailures(const JobSpec& spec, RunnerKind kind) {
  SuperviseOptions o;
  bool placed = placedBySpec(spec, kind);
  o.describe = [&spec, placed](const RemoteFailure& f) {
    return f.rank >= 0 ? describeJobRank(spec, f.rank, f.host, placed)
                       : describeJobHost(spec, f.host);
  };
  std::function<std::optional<RemoteFailure>(std::string_view)> tool;
  if (kind == RunnerKind::kPdsh) {
    tool = parsePdshFailure;
    o.watchStdout = true;  // ssh -tt: the agents' reports come on the pty
    o.stopOnFailure = true;
    o.signalDescendants = true;
  } else if (kind == RunnerKind::kOpenMpi) {
    tool = OpenMpiFailureParser();
  } else if (kind == RunnerKind::kSlurm) {
    tool = parseSrunFailure;
  } else {
    o.stopOnFailure = true;  // hydra
  }
  o.failureLine = [tool](std::string_view line) mutable -> std::optional<RemoteFailure> {
    if (auto f = parseRankReport(line)) return f;
    return tool ? tool(line) : std::nullopt;
  };
  return o;
}

// One attempt of the job; `spec` is plan.spec, or its copy for a restart (restart_loop.h).
int runJob(const JobPlan& plan, const JobSpec& spec, const BuildContext& ctx) {
  // mpirun, hydra and srun start each rank through dsrun's rank wrapper (runner_commands.h).
  const JobSpec wrapped = wrapRanks(spec, ctx.dsrunPath);
  switch (spec.runner) {
    case RunnerKind::kLocal: return runNodeAgent(spec, plan.nodeRank);
    case RunnerKind::kSsh: return runOverSsh(spec, sshCommands(spec, ctx.dsrunPath));
    case RunnerKind::kPdsh: {
      requireTool("pdsh", "pdsh", ctx.env);
      Invocation inv = pdshInvocation(spec, ctx.dsrunPath, ctx.env);
      return superviseCommand(inv.argv, inv.env, watchFailures(spec, RunnerKind::kPdsh));
    }
    case RunnerKind::kOpenMpi: {
      requireTool("mpirun", "openmpi", ctx.env);
      Invocation inv =
          openMpiInvocation(wrapped, openMpiHostfilePath(spec, ctx.env), ::geteuid() == 0);
      TempHostfile hostfile(inv.hostfilePath, inv.hostfileText);
      return superviseCommand(inv.argv, inv.env, watchFailures(spec, RunnerKind::kOpenMpi));
    }
    case RunnerKind::kMpich: {
      std::string mpiexec = mpichExecutable(ctx.env);
      requireTool(mpiexec, "mpich", ctx.env);
      requireHydra(mpiexec, ctx.env);
      Invocation inv = mpichInvocation(wrapped, mpiexec);
      return superviseCommand(inv.argv, inv.env, watchFailures(spec, RunnerKind::kMpich));
    }
    case RunnerKind::kSlurm: {
      requireTool("srun", "slurm", ctx.env);
      Invocation inv = slurmInvocation(wrapped, plan.hostfileGiven);
      SuperviseOptions o = watchFailures(spec, RunnerKind::kSlurm);
      o.onAbandon = inv.cancelArgv;
      return superviseCommand(inv.argv, inv.env, o);
    }
  }
  throw InternalError("unknown runner kind");
}

int dsrunMain(int argc, char** argv) {
  CliOptions opts;
  std::string printed;
  int done = parseCli(std::vector<std::string>(argv, argv + argc), &opts, &printed);
  if (done >= 0) {
    std::fputs(printed.c_str(), stdout);
    return done;
  }
  BuildContext ctx;
  ctx.env = currentEnv();
  ctx.cwd = currentDir();
  ctx.dsrunPath = selfExePath();
  ctx.pid = static_cast<int>(::getpid());
  ctx.gpuCount = localGpuCount();
  checkMaxRestarts(opts.maxRestarts, opts.noSsh);
  JobPlan plan = buildJobPlan(opts, ctx);
  for (const auto& n : plan.notices) std::fprintf(stderr, "dsrun: %s\n", n.c_str());
  if (opts.dryRun) {
    std::fputs(dryRunText(plan, ctx.dsrunPath, ctx.env).c_str(), stdout);
    return 0;
  }
  requireDsrt(opts, plan.spec);
  if (isTrainCheck(opts.program)) execTrainCheck(plan.spec);  // validate only: no rank starts
  std::fflush(stdout);
  return runWithRestarts(plan.spec, opts.maxRestarts,
                         [&](const JobSpec& spec) { return runJob(plan, spec, ctx); });
}

}  // namespace
}  // namespace ds::launcher

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--agent") == 0) return ds::launcher::agentMain(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "--rank_exec") == 0)
    return ds::launcher::rankExecMain(argc, argv);
  try {
    return ds::launcher::dsrunMain(argc, argv);
  } catch (const ds::ConfigError& e) {
    std::fprintf(stderr, "dsrun: error: %s\n", e.what());
    return ds::exitCodeFor(e);
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "dsrun: %s: %s\n", e.kind(), e.what());
    return ds::exitCodeFor(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsrun: unexpected error: %s\n", e.what());
    return 1;
  }
}
