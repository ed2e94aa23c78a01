// PipelineStage: one rank's stage of a pipelined GPT-2 step. It runs its blocks' forward and
// backward passes for every micro-batch of a step in 1F1B order (pipeline_schedule.h), receiving
// the residual stream from the previous stage and sending it to the next, and sending the
// gradient of its input back, with comm::ProcessGroup send/recv over the pipeline group.
// Why: pipeline parallelism (issue 17 item 2). Each in-flight micro-batch needs its own
// activations, so the stage keeps one Gpt2Model (activations only; parameters come from the
// caller's ParamTable) per slot: min(P - stage, m) slots, micro-batch k in slot k % slots (1F1B
// never holds more than P - stage forwards without their backward).
// Invariants: the ParamTable exposes this stage's parameters (others may be null); gradients
// accumulate into it over the step's micro-batches; sends are waited on before step() returns,
// every receive has the group's timeout and names the stage, peer and micro-batch.
// The tied wte's two copies (first and last stage) are the caller's to sum (tiedGroup below).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/process_group.h"
#include "runtime/data/data_loader.h"
#include "runtime/engine/pipeline_schedule.h"
#include "runtime/model/gpt2.h"
#include "zero/param_table.h"

namespace ds::runtime {

struct PipelineStageOptions {
  int stage = 0, stages = 1;  // this rank's stage = its rank in the pipeline group
  int microBatches = 1;       // gradient_accumulation_steps
  StageBlocks blocks;         // from splitBlocks
};

struct PipelineStepResult {
  double lossSum = 0;  // sum of the micro-batch losses (last stage; 0 elsewhere)
  double idleMs = 0;   // time spent waiting in receives (the bubble as this stage sees it)
  double stepMs = 0;   // the whole step on this stage
};

class PipelineStage {
 public:
  // `pipe` is the pipeline group (size == stages; null only when stages == 1).
  PipelineStage(const ModelConfig& cfg, comm::ProcessGroup* pipe, PipelineStageOptions opts);

  // One step: batch(k) gives micro-batch k (every stage reads the same micro-batches; the first
  // stage uses the tokens, the last the targets). lossScale multiplies the loss before backward.
  PipelineStepResult step(const std::function<const Batch&(int)>& batch, float lossScale,
                          zero::ParamTable& table, zero::BlockHooks& hooks);

  // Forward only (evaluation): micro-batch `mb` through this stage's blocks, receiving the
  // residual stream from the previous stage and sending it on. Returns its loss on the last stage
  // (0 elsewhere). Every stage calls it for the same batches in the same order.
  double forwardOnly(const Batch& mb, zero::ParamTable& table, zero::BlockHooks& hooks);

  bool first() const { return opts_.stage == 0; }
  bool last() const { return opts_.stage == opts_.stages - 1; }

 private:
  ModelConfig cfg_;
  comm::ProcessGroup* pipe_;
  PipelineStageOptions opts_;
  std::vector<std::unique_ptr<Gpt2Model>> slots_;
  std::vector<std::vector<float>> actOut_, gradOut_, actIn_, gradIn_;  // per micro-batch
};

// Parameter indices of the model that stage `blocks` holds (those listing one of its blocks).
std::vector<size_t> stageParams(const std::vector<zero::ParamInfo>& params, StageBlocks blocks);

}  // namespace ds::runtime
