// The DeepSpeed ds_config keys that dsrun accepts without effect or refuses, as a table (the keys
// it implements are read by ds_config_schema.cc), and Hugging Face's "auto" values. Both run on
// the raw deepspeed block before the schema reads it: accepted keys are taken out of the tree
// (listed for `dsrt check`), refusals and unresolvable "auto"s are added to the error list, so
// one run names every one. The table is docs/plan.md's "DeepSpeed keys" table.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/config/yaml_reader.h"

namespace ds::runtime {

enum class KeyRule {
  kNoEffect,       // any value; changes nothing here (why says why)
  kOnly,           // accepted (no effect) when the value is `allowed`; refused otherwise
  kUnlessEnabled,  // a block: refused when its `enabled` is true; otherwise no effect
  kRefused,        // refused whenever given
};

struct DsKeyRule {
  const char* path;  // under the deepspeed block, '.'-separated
  KeyRule rule;
  const char* allowed;  // kOnly: the accepted value (true/false/number/text, case-insensitive)
  const char* why;
};

// Every DeepSpeed key (or whole feature block) the schema does not read.
const std::vector<DsKeyRule>& dsKeyRules();

// A key accepted without effect, for the effective-config listing.
struct NoEffectKey {
  std::string path;   // full key path (deepspeed....)
  std::string value;  // as written
  std::string why;
};

// Applies dsKeyRules() to the block at `prefix` (e.g. "deepspeed"): removes the keys it covers,
// appending refusals to errors and accepted keys to noEffect.
void applyKeyRules(YAML::Node ds, const std::string& prefix, const ReadContext& ctx,
                   std::vector<std::string>& errors, std::vector<NoEffectKey>& noEffect);

// Marks the rule keys directly inside r's block (r.path() under the deepspeed block) as known,
// so unknown-key messages list them and suggest them for a misspelling.
void acceptRuleKeys(NodeReader& r);

// What "auto" resolves from: the model's width (GPT n_embd, the MLP's widest layer) and
// train.steps.
struct AutoInputs {
  int64_t width = 0;
  int64_t steps = 0;
};

// Replaces every "auto" value the plan determines (batch triangle, optimizer lr/betas/eps/
// weight_decay, scheduler warmup and total steps, ZeRO bucket sizes, the precision switches) and
// lists the others in errors. resolved: full key path -> the value it became ("" = the key's
// default or, for the batch triangle, what the triangle derives).
void resolveAuto(YAML::Node ds, const std::string& prefix, const ReadContext& ctx,
                 const AutoInputs& in, std::vector<std::string>& errors,
                 std::map<std::string, std::string>& resolved);

}  // namespace ds::runtime
