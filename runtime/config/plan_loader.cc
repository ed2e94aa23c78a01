// loadPlan: YAML text -> tree (+ deepspeed_config JSON, + --set) -> strict schema -> Plan.
#include "runtime/config/plan_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "runtime/config/batch_triangle.h"
#include "runtime/config/config_text.h"
#include "runtime/config/ds_config_keys.h"
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

// The width "auto" bucket sizes follow (Hugging Face uses the model's hidden size).
int64_t modelWidth(const ModelConfig& m) {
  if (m.kind == "mlp") {
    int64_t w = 0;
    for (int s : m.sizes) w = std::max<int64_t>(w, s);
    return w;
  }
  return m.nEmbd;
}

// Every leaf key of the tree with where its value came from: --set (the key or a map above it
// was set), ds_config (inside the deepspeed block read from deepspeed_config), else plan.
void recordOrigins(const YAML::Node& node, const std::string& path,
                   const std::set<std::string>& setPaths, bool dsFromFile,
                   std::map<std::string, std::array<std::string, 2>>& out) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string key = it->first.as<std::string>();
      recordOrigins(it->second, path.empty() ? key : path + "." + key, setPaths, dsFromFile, out);
    }
    return;
  }
  if (!node.IsDefined() || node.IsNull()) return;
  std::string text = node.IsScalar() ? node.Scalar() : YAML::Dump(node);
  for (std::string p = path;; p = p.substr(0, p.rfind('.'))) {
    if (setPaths.count(p)) {
      out[path] = {"--set", text};
      return;
    }
    if (p.find('.') == std::string::npos) break;
  }
  out[path] = {dsFromFile && path.rfind("deepspeed.", 0) == 0 ? "ds_config" : "plan", text};
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
      if (c["deepspeed_config"].IsMap())
        top.fail("deepspeed_config",
                 "a path to a DeepSpeed JSON file; for the keys inline, write them under "
                 "`deepspeed:` instead");
      std::string file = top.getString("deepspeed_config", "");
      if (c["deepspeed"] && !c["deepspeed"].IsNull())
        top.fail("deepspeed_config", "give either deepspeed or deepspeed_config");
      std::filesystem::path p(file);
      if (p.is_relative()) p = std::filesystem::path(baseDir) / p;
      dsCtx.source = p.string();
      root["deepspeed"] =
          parseYaml(readConfigFile(p.string(), name + ": deepspeed_config"), p.string(),
                    configFormatFor(p.string()), "DeepSpeed config keys");
      root.remove("deepspeed_config");
      setPaths.erase("deepspeed");  // a `deepspeed=null` override made way for the file's keys
    }
  }
  setPaths.merge(applyOverrides(root, dsSets));
  ctx.overridden = dsCtx.overridden = setPaths;
  std::map<std::string, std::array<std::string, 2>> origins;
  recordOrigins(root, "", setPaths, dsCtx.source != name, origins);

  NodeReader top(root, "", &ctx);
  Plan plan;
  plan.origins = std::move(origins);
  plan.source = name;
  plan.worldSize = worldSize;
  auto model = top.child("model");
  if (!model) top.fail("model", "required (model.gpt or model.mlp)");
  plan.model = readModel(*model, &plan.initFrom);
  NodeReader data = top.child("data").value_or(NodeReader(YAML::Node(), "data", &ctx));
  plan.data = readData(data, plan.model);
  NodeReader train = top.child("train").value_or(NodeReader(YAML::Node(), "train", &ctx));
  plan.train = readTrain(train);
  NodeReader par = top.child("parallel").value_or(NodeReader(YAML::Node(), "parallel", &ctx));
  plan.parallel = readParallel(par, plan.model, worldSize);
  {
    const YAML::Node& c = root;
    YAML::Node dsNode = c["deepspeed"];
    top.accept("deepspeed");
    if (dsNode && !dsNode.IsNull() && !dsNode.IsMap())
      top.fail("deepspeed", "expected a map of DeepSpeed config keys");
    // Every refused key, unresolvable "auto" and bad value of the block is reported in one run.
    std::vector<std::string> errors;
    std::vector<NoEffectKey> noEffect;
    std::map<std::string, std::string> autoResolved;
    dsCtx.errors = &errors;
    applyKeyRules(dsNode, "deepspeed", dsCtx, errors, noEffect);
    resolveAuto(dsNode, "deepspeed", dsCtx, {modelWidth(plan.model), plan.train.steps}, errors,
                autoResolved);
    NodeReader ds(dsNode, "deepspeed", &dsCtx);
    plan.deepspeed = readDsConfig(ds, plan.train.steps, &errors);
    dsCtx.errors = nullptr;
    if (errors.size() == 1) throw ConfigError(errors[0]);
    if (!errors.empty())
      throw ConfigError(fmt::format("{} problems in the DeepSpeed config:\n{}", errors.size(),
                                    fmt::join(errors, "\n")));
    for (const auto& [path, value] : autoResolved) plan.origins[path] = {"auto", "auto"};
    for (const auto& k : noEffect) plan.noEffectKeys.push_back({k.path, k.value, k.why});
    try {
      auto b = resolveBatchTriangle({plan.deepspeed.trainBatchSize, plan.deepspeed.microBatchPerGpu,
                                     plan.deepspeed.gradientAccumulationSteps},
                                    plan.dataParallel());
      plan.deepspeed.trainBatchSize = b.train;
      plan.deepspeed.microBatchPerGpu = b.micro;
      plan.deepspeed.gradientAccumulationSteps = b.gas;
    } catch (const ConfigError& e) {
      std::vector<std::string> autos;
      bool set = false;  // name --set when it gave one of the three
      for (const char* k :
           {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}) {
        if (autoResolved.count(std::string("deepspeed.") + k)) autos.push_back(k);
        set = set || fromSet(dsCtx, std::string("deepspeed.") + k);
      }
      std::string hint = autos.empty()
                             ? ""
                             : fmt::format(
                                   "; \"auto\" {} {} derived from the others (Hugging Face's "
                                   "Trainer sets them from its arguments): give "
                                   "train_micro_batch_size_per_gpu or train_batch_size",
                                   fmt::join(autos, ", "), autos.size() > 1 ? "are" : "is");
      const std::string ranks = plan.dataParallel() == worldSize
                                    ? fmt::format("world size {}", worldSize)
                                    : fmt::format("{} data-parallel ranks of world size {}",
                                                  plan.dataParallel(), worldSize);
      throw ConfigError(fmt::format("{}: deepspeed: {} ({}){}", set ? "--set" : dsCtx.source,
                                    e.what(), ranks, hint));
    }
    checkPipelineTraining(dsCtx.source, plan.parallel, plan.deepspeed.zero.stage,
                          plan.deepspeed.gradientAccumulationSteps);
  }
  top.finish();
  resolvePlanPaths(plan, baseDir);
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
