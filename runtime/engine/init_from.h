// Starting weights for a fresh run from an llm.c gpt2_*.bin (plan key model.gpt.init_from). Not
// the resume path (that is the Trainer's own checkpoint format) and not a converter: the file's
// header must describe the plan's model (seq_len may be smaller than the file's maxT: the first
// seq_len positions of wpe are taken, as llm.c does), or the run is refused naming file and
// field. Read by ranges (partitioned construction: a stage-3 rank reads only its shard).
#pragma once

#include <memory>
#include <vector>

#include "runtime/config/plan.h"
#include "runtime/model/llmc_file.h"

namespace ds::runtime {

class InitWeights {
 public:
  // Opens plan.initFrom. ConfigError "model.gpt.init_from <file>: header <field> = <x> but the
  // plan's model.gpt.<key> = <y>" on the first shape that differs (maxT: that is smaller than
  // seq_len).
  explicit InitWeights(const Plan& plan);
  // Elements [offset, offset + count) of the plan's flat space (params() order, fp32).
  void read(size_t offset, size_t count, float* out) const;

 private:
  std::unique_ptr<LlmcFile> file_;
  // Per plan parameter: its offset in the plan's flat space and in the file's.
  std::vector<size_t> planOffset_, fileOffset_;
};

}  // namespace ds::runtime
