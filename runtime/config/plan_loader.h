// Loading a Plan: YAML file (or the built-in default plan), optional `deepspeed_config: x.json`,
// `--set key.path=value` overrides, then strict validation into the typed Plan. Not the schema
// itself (plan_schema.cc) nor the batch rules (batch_triangle.h).
// Every error is a ConfigError naming the key path (and file:line when the YAML has a position).
#pragma once

#include <string>
#include <vector>

#include "runtime/config/plan.h"

namespace ds::runtime {

struct PlanRequest {
  std::string path;                    // empty: the built-in default plan
  std::vector<std::string> overrides;  // "key.path=value", applied in order (value is YAML)
  int worldSize = 1;                   // data-parallel size for the batch triangle
};

Plan loadPlan(const PlanRequest& req);

// Same from YAML text; `name` is used in error messages (a file path or "<string>"). Every
// relative path in the plan (deepspeed_config and those resolvePlanPaths lists) resolves
// against baseDir: loadPlan passes the plan file's folder, and "." for the built-in plan.
Plan parsePlan(const std::string& yamlText, const std::string& name,
               const std::vector<std::string>& overrides = {}, int worldSize = 1,
               const std::string& baseDir = ".");

// The one rule for relative paths in a plan (docs/plan.md "Paths"): model.gpt.init_from,
// data.shards, data.val, train.checkpoint.dir, zero_optimization.offload_optimizer.nvme_path,
// offload_param.nvme_path, tensorboard.output_path and csv_monitor.output_path, when relative,
// become baseDir/path (lexically normalized); absolute and empty paths stay as they are. Values
// given with --set are part of the plan and resolve the same way.
void resolvePlanPaths(Plan& plan, const std::string& baseDir);

// The built-in default plan's YAML: a small GPT on the synthetic corpus.
const std::string& defaultPlanYaml();

}  // namespace ds::runtime
