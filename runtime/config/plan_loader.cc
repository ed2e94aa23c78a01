// loadPlan: YAML text -> tree (+ deepspeed_config JSON, + --set) -> strict schema -> Plan.
#include "runtime/config/plan_loader.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/config/batch_triangle.h"
#include "runtime/config/config_text.h"
#include "runtime/config/ds_config_schema.h"
#include "runtime/config/plan_overrides.h"
#include "runtime/config/plan_schema.h"

namespace ds::runtime {
namespace {

YAML::Node parseYaml(const std::string& text, const std::string& name, ConfigFormat format,
                     const char* top) {
  YAML::Node n = loadConfigText(text, name, format);
  if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!n.IsMap()) throw ConfigError(fmt::format("{}: expected a map of {} at the top", name, top));
  return n;
}

}  // namespace

int64_t Plan::tokensPerStep() const { return deepspeed.trainBatchSize * int64_t(model.seqLen); }

Plan parsePlan(const std::string& yamlText, const std::string& name,
               const std::vector<std::string>& overrides, int worldSize,
               const std::string& baseDir) {
  YAML::Node root = parseYaml(yamlText, name, configFormatFor(name), "plan blocks");
  ReadContext ctx{name, {}};
  ReadContext dsCtx{name, {}};
  // Overrides outside the deepspeed block first (one may name deepspeed_config), the deepspeed
  // ones after the JSON file is merged in, so they apply to it.
  std::vector<std::string> planSets, dsSets;
  for (const auto& o : overrides) (o.rfind("deepspeed.", 0) == 0 ? dsSets : planSets).push_back(o);
  std::set<std::string> setPaths = applyOverrides(root, planSets);
  {
    const YAML::Node& c = root;
    if (c["deepspeed_config"]) {
      NodeReader top(root, "", &ctx);
      std::string file = top.getString("deepspeed_config", "");
      if (c["deepspeed"]) top.fail("deepspeed_config", "give either deepspeed or deepspeed_config");
      std::filesystem::path p(file);
      if (p.is_relative()) p = std::filesystem::path(baseDir) / p;
      dsCtx.source = p.string();
      root["deepspeed"] =
          parseYaml(readConfigFile(p.string(), name + ": deepspeed_config"), p.string(),
                    configFormatFor(p.string()), "DeepSpeed config keys");
      root.remove("deepspeed_config");
    }
  }
  setPaths.merge(applyOverrides(root, dsSets));
  ctx.overridden = dsCtx.overridden = setPaths;

  NodeReader top(root, "", &ctx);
  Plan plan;
  plan.source = name;
  plan.worldSize = worldSize;
  auto model = top.child("model");
  if (!model) top.fail("model", "required (model.gpt or model.mlp)");
  plan.model = readModel(*model, &plan.initFrom);
  if (!plan.initFrom.empty() && std::filesystem::path(plan.initFrom).is_relative())
    plan.initFrom = (std::filesystem::path(baseDir) / plan.initFrom).lexically_normal().string();
  NodeReader data = top.child("data").value_or(NodeReader(YAML::Node(), "data", &ctx));
  plan.data = readData(data, plan.model);
  NodeReader train = top.child("train").value_or(NodeReader(YAML::Node(), "train", &ctx));
  plan.train = readTrain(train);
  {
    const YAML::Node& c = root;
    YAML::Node dsNode = c["deepspeed"];
    top.accept("deepspeed");
    if (dsNode && !dsNode.IsNull() && !dsNode.IsMap())
      top.fail("deepspeed", "expected a map of DeepSpeed config keys");
    NodeReader ds(dsNode, "deepspeed", &dsCtx);
    plan.deepspeed = readDsConfig(ds, plan.train.steps);
    try {
      auto b = resolveBatchTriangle({plan.deepspeed.trainBatchSize, plan.deepspeed.microBatchPerGpu,
                                     plan.deepspeed.gradientAccumulationSteps},
                                    worldSize);
      plan.deepspeed.trainBatchSize = b.train;
      plan.deepspeed.microBatchPerGpu = b.micro;
      plan.deepspeed.gradientAccumulationSteps = b.gas;
    } catch (const ConfigError& e) {
      bool set = false;  // name --set when it gave one of the three
      for (const char* k :
           {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
        set = set || fromSet(dsCtx, std::string("deepspeed.") + k);
      throw ConfigError(fmt::format("{}: deepspeed: {} (world size {})",
                                    set ? "--set" : dsCtx.source, e.what(), worldSize));
    }
  }
  top.finish();
  plan.model.compute = plan.deepspeed.bf16 ? DType::kBF16 : DType::kF32;
  plan.model.activationCheckpointing = plan.deepspeed.activationCheckpointing;
  plan.dsConfigJson = dsConfigToJson(plan.deepspeed);
  return plan;
}

Plan loadPlan(const PlanRequest& req) {
  if (req.path.empty())
    return parsePlan(defaultPlanYaml(), "<built-in default plan>", req.overrides, req.worldSize);
  std::string dir = std::filesystem::path(req.path).parent_path().string();
  return parsePlan(readConfigFile(req.path, "plan"), req.path, req.overrides, req.worldSize,
                   dir.empty() ? "." : dir);
}

}  // namespace ds::runtime
