// loadRankModel: what `dsrt generate` and `dsrt serve` do first on every rank dsrun starts: read
// the rank environment, bootstrap the process group when there are several ranks (they are the
// tensor-parallel group, docs/inference.md), and load this rank's shard of the model.
// Why: both commands need the same steps in the same order (the group before the load, so a
// rank that fails to load still fails its peers' collectives instead of leaving them waiting).
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.h"
#include "core/env.h"
#include "core/rank_env.h"
#include "runtime/inference/inference_model.h"

namespace ds::runtime {

struct RankModel {
  RankEnv rank;                               // this process's rank environment
  std::unique_ptr<comm::ProcessGroup> group;  // null for one rank
  InferenceModel model;                       // this rank's tensor-parallel shard
  std::string source;                         // what was loaded, for messages
};

// opts.shard is set here from the rank environment; the rest is the caller's.
RankModel loadRankModel(const EnvMap& env, const std::string& path, LoadOptions opts);

}  // namespace ds::runtime
