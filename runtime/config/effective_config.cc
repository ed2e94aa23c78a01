// effectiveConfig: the Plan's blocks as JSON, flattened, each leaf with its origin.
#include "runtime/config/effective_config.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ds::runtime {
namespace {

using nlohmann::json;

json planBlocks(const Plan& plan) {
  json j;
  const auto& m = plan.model;
  if (m.kind == "mlp") {
    j["model"]["mlp"] = {{"sizes", m.sizes}, {"seq_len", m.seqLen}};
  } else {
    j["model"]["gpt"] = {{"n_layer", m.nLayer},       {"n_head", m.nHead},
                         {"n_embd", m.nEmbd},         {"seq_len", m.seqLen},
                         {"vocab_size", m.vocabSize}, {"padded_vocab_size", m.paddedVocab},
                         {"init_from", plan.initFrom}};
  }
  const auto& d = plan.data;
  if (d.kind == "shards") {
    j["data"] = {{"shards", d.shards}, {"val", d.val}};
  } else {
    j["data"]["synthetic"] = {{"seed", d.syntheticSeed},
                              {"tokens", d.syntheticTokens},
                              {"val_tokens", d.syntheticValTokens},
                              {"branching", d.syntheticBranching}};
  }
  const auto& t = plan.train;
  j["train"] = {{"steps", t.steps},
                {"eval_every", t.evalEvery},
                {"eval_steps", t.evalSteps},
                {"eval_tokens", t.evalTokens},
                {"weight_decay_on", t.weightDecayOn},
                {"seed", t.seed},
                {"log_every", t.logEvery},
                {"device", t.device},
                {"device_sharing", t.deviceSharing},
                {"tf32", t.tf32},
                {"memory_limit_mb", t.memoryLimitMb},
                {"threads", t.threads},
                {"checkpoint", {{"dir", t.checkpointDir}, {"every", t.checkpointEvery}}}};
  j["deepspeed"] = json::parse(plan.dsConfigJson);
  return j;
}

// Floats come from fp32 fields: print them short (0.005, not 0.004999999888241291).
std::string text(const json& v) {
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (d == std::floor(d) && std::fabs(d) < 1e15) return fmt::format("{}", int64_t(d));
    return fmt::format("{:.7g}", d);
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + text(v[i]);
    return s + "]";
  }
  return v.dump();
}

void flatten(const json& v, const std::string& path, std::vector<EffectiveKey>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
    return;
  }
  out.push_back({path, text(v), ""});
}

bool isTriangle(const std::string& path) {
  return path == "deepspeed.train_batch_size" ||
         path == "deepspeed.train_micro_batch_size_per_gpu" ||
         path == "deepspeed.gradient_accumulation_steps";
}

}  // namespace

std::vector<EffectiveKey> effectiveConfig(const Plan& plan) {
  std::vector<EffectiveKey> keys;
  flatten(planBlocks(plan), "", keys);
  std::set<std::string> shown;
  for (auto& k : keys) {
    shown.insert(k.path);
    auto alias = plan.deepspeed.aliasOf.find(k.path);
    std::string from = k.path;
    if (alias != plan.deepspeed.aliasOf.end()) {
      from = "deepspeed." + alias->second;
      shown.insert(from);
    }
    auto it = plan.origins.find(from);
    if (it != plan.origins.end()) {
      k.origin = it->second[0];
      if (it->second[0] == "auto" && isTriangle(k.path)) k.origin = "auto (derived)";
    } else {
      k.origin = isTriangle(k.path) ? "derived" : "default";
    }
    if (from != k.path) k.origin += " (as " + alias->second + ")";
  }
  std::set<std::string> noEffect;
  for (const auto& n : plan.noEffectKeys) noEffect.insert(n[0]);
  // Given keys without an effective value of their own (data_types, aio switches, ...), unless
  // a map above them is shown as accepted without effect.
  for (const auto& [path, origin] : plan.origins) {
    if (shown.count(path)) continue;
    bool covered = false;
    for (std::string p = path; !covered && p.find('.') != std::string::npos;
         p = p.substr(0, p.rfind('.')))
      covered = noEffect.count(p) > 0;
    if (covered || noEffect.count(path)) continue;
    keys.push_back({path, origin[1], origin[0] + " (validated; no setting of its own)"});
  }
  return keys;
}

std::string effectiveConfigText(const Plan& plan) {
  auto keys = effectiveConfig(plan);
  size_t width = 0, valueWidth = 0;
  for (const auto& k : keys) {
    width = std::max(width, k.path.size());
    valueWidth = std::max(valueWidth, std::min<size_t>(k.value.size(), 24));
  }
  std::string out;
  for (const auto& k : keys)
    out += fmt::format("  {:<{}}  {:<{}}  {}\n", k.path, width, k.value, valueWidth, k.origin);
  if (!plan.noEffectKeys.empty()) {
    out += "DeepSpeed keys accepted without effect:\n";
    for (const auto& n : plan.noEffectKeys) out += fmt::format("  {} = {}: {}\n", n[0], n[1], n[2]);
  }
  return out;
}

}  // namespace ds::runtime
