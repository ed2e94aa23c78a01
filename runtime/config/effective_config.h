// The effective configuration of a loaded Plan, key by key, with where each value came from:
// default, plan, ds_config (the deepspeed_config file), --set, auto (a Hugging Face "auto"
// resolved), derived (a batch-triangle member computed from the others). What `dsrt check`
// prints. Not validation (loadPlan did that).
#pragma once

#include <string>
#include <vector>

#include "runtime/config/plan.h"

namespace ds::runtime {

struct EffectiveKey {
  std::string path;    // e.g. deepspeed.zero_optimization.stage
  std::string value;   // JSON text of the value
  std::string origin;  // default | plan | ds_config | --set | auto | derived, "(as <key>)" for
                       // an alias or legacy form
};

// Every key of the model, data, train and deepspeed blocks with its value, then keys that were
// given and validated but have no single effective value of their own (e.g. data_types).
std::vector<EffectiveKey> effectiveConfig(const Plan& plan);

// The listing: one aligned line per key, then the DeepSpeed keys accepted without effect.
std::string effectiveConfigText(const Plan& plan);

}  // namespace ds::runtime
