// makeModel(cfg, ops) (see ops_model.h): validates through makeModel(cfg), whose host model is
// only metadata until its first forward, then builds the Ops model of the same kind.
#include "runtime/model/ops_model.h"

#include "runtime/model/ops_gpt2.h"
#include "runtime/model/ops_mlp.h"

namespace ds::runtime {

std::unique_ptr<Model> makeModel(const ModelConfig& cfg, Ops& ops) {
  // The checks and their messages. fp16 compute exists only over an Ops (the host models emulate
  // fp16 on fp32 kernels: runtime/engine/fp16_hooks.h), so the host check sees it as fp32.
  ModelConfig checked = cfg;
  if (checked.compute == DType::kF16) checked.compute = DType::kF32;
  (void)makeModel(checked);
  if (cfg.kind == "mlp") return std::make_unique<OpsMlpModel>(cfg, ops);
  return std::make_unique<OpsGpt2Model>(cfg, ops);
}

}  // namespace ds::runtime
