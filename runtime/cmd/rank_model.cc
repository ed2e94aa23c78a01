// loadRankModel (see rank_model.h).
#include "runtime/cmd/rank_model.h"

#include <utility>

#include "comm/bootstrap.h"

namespace ds::runtime {

RankModel loadRankModel(const EnvMap& env, const std::string& path, LoadOptions opts) {
  const RankEnv re = deriveRankEnv(env);
  std::unique_ptr<comm::ProcessGroup> group;
  if (re.worldSize > 1) {
    comm::BootstrapOptions bo;
    bo.env = env;
    group = comm::bootstrap(bo);
  }
  opts.shard = TpShard{re.rank, re.worldSize};
  std::string source;
  InferenceModel model = loadInferenceModel(path, opts, &source);
  return RankModel{re, std::move(group), std::move(model), std::move(source)};
}

}  // namespace ds::runtime
