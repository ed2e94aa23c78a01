// The `deepspeed` block (ds_config.json) schema: reads every supported key with DeepSpeed's
// documented defaults into DsConfig, rejecting unknown keys and bad values. Not the batch
// triangle resolution (batch_triangle.h), which needs the world size.
#pragma once

#include "runtime/config/plan.h"
#include "runtime/config/yaml_reader.h"

namespace ds::runtime {

// defaultTotalSteps: train.steps, used when a scheduler needing total_num_steps omits it.
// errors: when given, every part's first error and every refused or unknown key is added there
// (the caller throws them together); otherwise the first one throws.
DsConfig readDsConfig(NodeReader& r, int64_t defaultTotalSteps,
                      std::vector<std::string>* errors = nullptr);

// The effective config as JSON (every key with its resolved value), for manifests and docs.
std::string dsConfigToJson(const DsConfig& c);

}  // namespace ds::runtime
