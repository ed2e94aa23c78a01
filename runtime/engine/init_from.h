// Starting weights for a fresh run from an llm.c gpt2_*.bin (plan key model.gpt.init_from). Not
// the resume path (that is the Trainer's own checkpoint format) and not a converter: the file's
// header must describe the plan's model (seq_len may be smaller than the file's maxT: the first
// seq_len positions of wpe are taken, as llm.c does), or the run is refused naming file and
// field.
#pragma once

#include <vector>

#include "runtime/config/plan.h"

namespace ds::runtime {

// Reads plan.initFrom into flat (params() order, fp32, the plan's shapes). ConfigError
// "model.gpt.init_from <file>: header <field> = <x> but the plan's model.gpt.<key> = <y>" on the
// first shape that differs (maxT: that is smaller than seq_len).
std::vector<float> loadInitWeights(const Plan& plan);

}  // namespace ds::runtime
