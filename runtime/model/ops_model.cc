// makeModel(cfg, ops) (see ops_model.h): validates through makeModel(cfg), whose host model is
// only metadata until its first forward, then builds the Ops model of the same kind.
#include "runtime/model/ops_model.h"

#include "runtime/model/ops_gpt2.h"
#include "runtime/model/ops_mlp.h"

namespace ds::runtime {

std::unique_ptr<Model> makeModel(const ModelConfig& cfg, Ops& ops) {
  (void)makeModel(cfg);  // the checks and their messages
  if (cfg.kind == "mlp") return std::make_unique<OpsMlpModel>(cfg, ops);
  return std::make_unique<OpsGpt2Model>(cfg, ops);
}

}  // namespace ds::runtime
