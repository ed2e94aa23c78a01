// dsrt check: see check_command.h.
#include "runtime/cmd/check_command.h"

#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/env.h"
#include "core/error.h"
#include "core/rank_env.h"
#include "runtime/cmd/deepspeed_args.h"
#include "runtime/config/effective_config.h"
#include "runtime/config/plan_loader.h"
#include "runtime/device/cuda_device.h"
#include "runtime/engine/memory_fit.h"
#include "runtime/model/model.h"

namespace ds::runtime {

int checkPlan(const std::string& planPath, const std::vector<std::string>& overrides,
              int worldSize) {
  PlanRequest req;
  req.path = planPath;
  req.overrides = overrides;
  req.worldSize = worldSize;
  Plan plan = loadPlan(req);
  zero::validateZeroOptions(plan.deepspeed.zero);
  std::printf("effective config of %s for world size %d (key, value, origin):\n%s",
              plan.source.c_str(), worldSize, effectiveConfigText(plan).c_str());
  // The memory estimate needs only the parameter count (a model object records shapes; it
  // allocates nothing). Pipeline and tensor layouts split it by stage and shard: checked when
  // the ranks start. train.device auto counts as a host run where this machine sees no GPU.
  if (plan.parallel.pipeline <= 1 && plan.parallel.tensor <= 1) {
    const size_t numParams = makeModel(plan.model)->numParamsTotal();
    const bool hostRun =
        plan.train.device == "cpu" || (plan.train.device == "auto" && visibleCudaDevices() == 0);
    std::printf("%s\n", checkPlanMemory(plan, numParams, worldSize, hostRun).c_str());
  }
  std::printf("ok: the plan and its DeepSpeed config are valid for world size %d\n", worldSize);
  std::fflush(stdout);
  return 0;
}

int checkCommand(int argc, char** argv) {
  std::string plan;
  std::vector<std::string> overrides;
  int worldSize = 0;
  DeepSpeedArgs deepspeed;
  CLI::App app{
      "dsrt check: validate a plan and its DeepSpeed config for a world size and print the "
      "effective config (every key, its value and its origin: default, plan, ds_config, --set, "
      "auto, derived); exit 0 when valid, 2 otherwise. Starts nothing, writes nothing.",
      "dsrt check"};
  app.add_option("plan", plan, "plan YAML file (default: the built-in plan)");
  app.add_option("--set", overrides, "override a plan key: key.path=value (YAML value)")
      ->type_name("K=V")
      ->allow_extra_args(false);
  app.add_option("--world_size", worldSize,
                 "data-parallel ranks to check the batch triangle for (default: WORLD_SIZE from "
                 "the environment, else 1)")
      ->check(CLI::Range(1, 1 << 24));
  addDeepSpeedArgs(app, deepspeed);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    throw ConfigError(fmt::format("dsrt check: {} (see dsrt check --help)", e.what()));
  }
  applyDeepSpeedArgs(deepspeed, plan, overrides);
  if (worldSize == 0) worldSize = deriveRankEnv(currentEnv()).worldSize;
  return checkPlan(plan, overrides, worldSize);
}

}  // namespace ds::runtime
