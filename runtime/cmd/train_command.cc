// `dsrt train [plan.yaml] [--set k=v ...] [--comm_backend X] [--local_rank=N] [--resume T]`:
// derive this rank from the environment, load the plan (the built-in default without a file),
// bootstrap the process group (none for a single rank without MASTER_ADDR), run the Trainer.
// Not the training loop (runtime/engine) nor the bootstrap (comm/bootstrap.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "comm/bootstrap.h"
#include "comm/process_group.h"
#include "core/env.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/log.h"
#include "core/rank_env.h"
#include "runtime/cmd/check_command.h"
#include "runtime/cmd/deepspeed_args.h"
#include "runtime/cmd/train_command.h"
#include "runtime/config/plan_loader.h"
#include "runtime/engine/fault_injection.h"
#include "runtime/engine/trainer.h"
#include "runtime/tensor/tensor_knobs.h"
#include "runtime/tensor/thread_policy.h"

namespace ds::runtime {

namespace {

std::string localHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool hasLatestCheckpoint(const std::string& dir) {
  struct stat st;
  return !dir.empty() && ::stat((dir + "/latest").c_str(), &st) == 0;
}

// What to resume from: --resume (a tag, latest, or auto: latest when one exists); on a restart by
// dsrun --max_restarts (DS_RESTART_ATTEMPT > 0) the latest checkpoint whenever one exists, since
// it is at least as new as anything the command line names.
std::string resumeChoice(const std::string& flag, const std::string& dir, int64_t attempt) {
  const bool latest = hasLatestCheckpoint(dir);
  if (attempt > 0 && latest) return "latest";
  if (flag == "auto") return latest ? "latest" : "";
  return flag;
}

// Rank 0's line for a restart: the attempt and the step it resumed from (the launcher's line
// before it names the failure).
void logRestart(int64_t attempt, const std::string& dir, const std::string& choice, int64_t step) {
  std::string what;
  if (!choice.empty()) what = fmt::format("resumed from step {} ({} in {})", step, choice, dir);
  else if (dir.empty()) what = "the plan sets no train.checkpoint.dir; starting from step 0";
  else what = fmt::format("no checkpoint in {} yet; starting from step 0", dir);
  std::printf("dsrt train: restart attempt %lld: %s\n", static_cast<long long>(attempt),
              what.c_str());
  std::fflush(stdout);
}

struct TrainArgs {
  std::string plan;
  std::vector<std::string> overrides;
  std::string commBackend;
  int localRank = -1;
  std::string resume;
  std::string summary;
  bool check = false;
  DeepSpeedArgs deepspeed;
};

// CLI11 exits only through us: parse errors become ConfigError (exit 2) with CLI11's message.
bool parseArgs(int argc, char** argv, TrainArgs& a) {
  CLI::App app{"dsrt train: run a training plan on this rank (the built-in plan without a file)",
               "dsrt train"};
  app.add_option("plan", a.plan, "plan YAML file (default: the built-in plan)");
  app.add_option(
         "--set", a.overrides,
         "override a plan key: key.path=value (a YAML value; null removes the key, an empty "
         "value is an error)")
      ->type_name("K=V")
      ->allow_extra_args(false);
  app.add_option("--comm_backend", a.commBackend,
                 "gloo | mpi | nccl (default: dsrun's flag, the plan, DS_COMM_BACKEND, auto)");
  app.add_option("--local_rank", a.localRank, "set by the launcher (informational)");
  app.add_option("--resume", a.resume,
                 "resume from a checkpoint tag under train.checkpoint.dir: a tag, 'latest', or "
                 "'auto' (latest when one exists, else start fresh); a restart by dsrun "
                 "--max_restarts (DS_RESTART_ATTEMPT > 0) takes latest whenever it exists");
  app.add_option(
      "--summary", a.summary,
      "write the run summary JSON here (default: <train.checkpoint.dir>/run_summary.json)");
  addDeepSpeedArgs(app, a.deepspeed);
  app.add_flag("--check", a.check,
               "validate the plan for this world size, print the effective config and exit "
               "(as dsrt check; nothing is trained or written)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return false;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("dsrt train: {} (see dsrt train --help)", e.what()));
  }
  applyDeepSpeedArgs(a.deepspeed, a.plan, a.overrides);
  return true;
}

}  // namespace

int trainCommand(int argc, char** argv) {
  TrainArgs a;
  if (!parseArgs(argc, argv, a)) return 0;
  const EnvMap env = currentEnv();
  RankEnv re = deriveRankEnv(env);
  log::setLogIdentity(localHostName(), re.rank);
  if (a.localRank >= 0 && a.localRank != re.localRank)
    DS_LOG_WARN("train", "--local_rank={} differs from the environment's LOCAL_RANK={}",
                a.localRank, re.localRank);

  if (a.check) return checkPlan(a.plan, a.overrides, re.worldSize);

  PlanRequest req;
  req.path = a.plan;
  req.overrides = a.overrides;
  req.worldSize = re.worldSize;
  Plan plan = loadPlan(req);
  // Before any kernel runs: one OpenMP team per rank, OpenBLAS at 1 thread (thread_policy.h).
  setupThreads(env, plan.train.threads, "train.threads");

  // A single rank needs no store and no MASTER_ADDR. Otherwise the backend is dsrt's
  // --comm_backend, dsrun's --comm_backend, the plan's comm_backend, DS_COMM_BACKEND, the default
  // (comm::resolveBackend).
  std::unique_ptr<comm::ProcessGroup> group;
  if (re.worldSize > 1) {
    comm::BootstrapOptions bo;
    bo.backend = a.commBackend;
    bo.planBackend = plan.deepspeed.commBackend;
    bo.env = env;
    group = comm::bootstrap(bo);
  }

  TrainerOptions opts;
  const int64_t attempt = knobIntOrDefault(knobs::kRestartAttempt);
  const std::string ckptDir = plan.train.checkpointDir;
  opts.resume = resumeChoice(a.resume, ckptDir, attempt);
  opts.faultKill = faultKillFromEnv(re.rank);
  // Where this rank sits on its host: its GPU (cuda:<LOCAL_RANK>) and its share of the host's
  // memory in the memory-fit check (MemAvailable / LOCAL_SIZE).
  opts.localRank = re.localRank;
  opts.localSize = re.localSize;
  opts.progressBar = ::isatty(STDOUT_FILENO) == 1;  // a person at a terminal, not a pipe or file
  opts.summaryPath = a.summary;
  if (opts.summaryPath.empty() && !plan.train.checkpointDir.empty())
    opts.summaryPath = plan.train.checkpointDir + "/run_summary.json";
  Trainer trainer(std::move(plan), group.get(), opts);
  if (attempt > 0 && re.rank == 0) logRestart(attempt, ckptDir, opts.resume, trainer.step());
  trainer.run();
  return 0;
}

}  // namespace ds::runtime
