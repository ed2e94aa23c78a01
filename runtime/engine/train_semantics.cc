// applyDecayChoice, evalBatches and compressionLine (see train_semantics.h).
#include "runtime/engine/train_semantics.h"

#include <algorithm>

#include <fmt/format.h>

namespace ds::runtime {

DecayChoice applyDecayChoice(std::vector<zero::ParamInfo> params, const Plan& plan) {
  const std::string& on = plan.train.weightDecayOn;
  if (on == "all")
    for (auto& p : params) p.decay = true;
  size_t onTensors = 0, onElems = 0, offTensors = 0, offElems = 0;
  for (const auto& p : params) {
    (p.decay ? onTensors : offTensors) += 1;
    (p.decay ? onElems : offElems) += p.numel;
  }
  const auto& opt = plan.deepspeed.optimizer;
  std::string line =
      fmt::format("weight decay {} on {} (train.weight_decay_on): {} tensors / {} elements decayed",
                  opt.weightDecay, on, onTensors, onElems);
  if (offTensors)
    line += fmt::format("; {} tensors / {} elements (biases, LayerNorm) not", offTensors, offElems);
  if (opt.weightDecay == 0.f) line += " (weight_decay is 0: no decay at all)";
  return {std::move(params), std::move(line)};
}

EvalBatches evalBatches(const Plan& plan, uint64_t batchesInSet, uint64_t setTokens,
                        const std::string& setName, int world) {
  const int64_t perBatch =
      plan.deepspeed.microBatchPerGpu * int64_t(world) * int64_t(plan.model.seqLen);
  const auto& t = plan.train;
  EvalBatches out;
  std::string asked;
  if (t.evalTokens > 0) {
    out.batches = (t.evalTokens + perBatch - 1) / perBatch;
    asked = fmt::format("train.eval_tokens = {} asks for {} batch(es)", t.evalTokens, out.batches);
  } else {
    out.batches = std::max<int64_t>(1, t.evalSteps);
    asked = fmt::format("train.eval_steps = {} asks for {} tokens", out.batches,
                        out.batches * perBatch);
  }
  if (uint64_t(out.batches) > batchesInSet) {
    out.warning = fmt::format(
        "warning: {} ({} x {} rank(s) x {} tokens per batch) but the validation set {} holds {} "
        "tokens, {} whole batch(es) ({} tokens); each eval reads those {} batch(es) once",
        asked, plan.deepspeed.microBatchPerGpu, world, plan.model.seqLen, setName, setTokens,
        batchesInSet, int64_t(batchesInSet) * perBatch, batchesInSet);
    out.batches = int64_t(batchesInSet);
  }
  return out;
}

std::string compressionLine(const Plan& plan) {
  const auto& opt = plan.deepspeed.optimizer;
  if (!opt.compressed()) return "";
  const int64_t steps = plan.train.steps;
  if (opt.type == "ZeroOneAdam") {
    std::string line = fmt::format(
        "optimizer ZeroOneAdam: 1-bit averaged momentum from step 1, exact variance steps at "
        "intervals doubling every {} of them (var_update_scaler) until step {} "
        "(var_freeze_step), then local steps synchronised every 1..{} steps (local_step_clipper)",
        opt.varUpdateScaler, opt.varFreezeStep, opt.localStepClipper);
    if (opt.varFreezeStep >= steps)
      line += fmt::format("; train.steps {} ends before var_freeze_step: no local steps", steps);
    return line;
  }
  const char* exact = opt.type == "OneBitLamb" ? "LAMB" : "Adam";
  std::string line = fmt::format(
      "optimizer {}: exact {} steps 1..{} (freeze_step; gradients allreduced in full), 1-bit "
      "compressed from step {}",
      opt.type, exact, opt.freezeStep, opt.freezeStep + 1);
  if (opt.freezeStep >= steps)
    line += fmt::format(
        "; warning: train.steps {} ends at or before freeze_step {}: this run never compresses "
        "(plain {} throughout; DeepSpeed's default freeze_step is 100000: set it below "
        "train.steps)",
        steps, opt.freezeStep, exact);
  return line;
}

}  // namespace ds::runtime
