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
#include "core/log.h"
#include "core/rank_env.h"
#include "runtime/cmd/train_command.h"
#include "runtime/config/plan_loader.h"
#include "runtime/engine/trainer.h"

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

struct TrainArgs {
  std::string plan;
  std::vector<std::string> overrides;
  std::string commBackend;
  int localRank = -1;
  std::string resume;
  std::string summary;
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
                 "'auto' (latest when one exists, else start fresh)");
  app.add_option(
      "--summary", a.summary,
      "write the run summary JSON here (default: <train.checkpoint.dir>/run_summary.json)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return false;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("dsrt train: {} (see dsrt train --help)", e.what()));
  }
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

  PlanRequest req;
  req.path = a.plan;
  req.overrides = a.overrides;
  req.worldSize = re.worldSize;
  Plan plan = loadPlan(req);

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
  opts.resume = a.resume;
  if (opts.resume == "auto") {
    opts.resume = hasLatestCheckpoint(plan.train.checkpointDir) ? "latest" : "";
  }
  opts.summaryPath = a.summary;
  if (opts.summaryPath.empty() && !plan.train.checkpointDir.empty())
    opts.summaryPath = plan.train.checkpointDir + "/run_summary.json";
  Trainer trainer(std::move(plan), group.get(), opts);
  trainer.run();
  return 0;
}

}  // namespace ds::runtime
