// PipelineStage: one rank's stage of a pipelined GPT-2 step. It runs its blocks' forward and
// backward passes for every micro-batch of a step in 1F1B order (pipeline_schedule.h), receiving
// the residual stream from the previous stage and sending it to the next, and sending the
// gradient of its input back, with comm::ProcessGroup send/recv over the pipeline group.
// Why: pipeline parallelism (issue 17 item 2). Each in-flight micro-batch needs its own
// activations, so the stage keeps Gpt2Models (activations only; parameters come from the
// caller's ParamTable) in a pool: a forward takes a free one, its backward returns it (1F1B never
// holds more than P - stage forwards without their backward; the interleaved schedule more).
// With v chunks (parallel.virtual_stages) the stage holds virtual stages stage, stage + P, ...:
// chunk c receives from virtual stage c*P + stage - 1 (the previous stage, or for stage 0 the
// last stage's chunk c - 1) and sends to virtual stage c*P + stage + 1.
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
  int stage = 0, stages = 1;        // this rank's stage = its rank in the pipeline group
  int microBatches = 1;             // gradient_accumulation_steps
  std::vector<StageBlocks> chunks;  // this stage's chunks in order (planChunks; one without
                                    // interleaving)
  // P x T: the stage's blocks are this tensor rank's shards (gpt2.h); the residual stream and its
  // gradient between stages are full [B, T, C] (the same on every tensor rank), so tensor rank t
  // of one stage talks to tensor rank t of the next (the pipeline group holds one tensor rank).
  TensorParallel tensor;
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

  // This stage holds the embeddings (the first virtual stage) / the head and loss (the last).
  bool first() const { return opts_.stage == 0; }
  bool last() const { return opts_.stage == opts_.stages - 1; }

 private:
  int chunks() const { return int(opts_.chunks.size()); }
  int virtualStage(int chunk) const { return chunk * opts_.stages + opts_.stage; }
  int virtualStages() const { return chunks() * opts_.stages; }
  // The pipeline rank holding virtual stage `vs`.
  int rankOf(int virtualStage) const { return virtualStage % opts_.stages; }
  Gpt2Model* takeModel();

  ModelConfig cfg_;
  comm::ProcessGroup* pipe_;
  PipelineStageOptions opts_;
  std::vector<std::unique_ptr<Gpt2Model>> pool_;
  std::vector<Gpt2Model*> free_;
  // Per (micro-batch, chunk), index micro * chunks + chunk: the model holding its activations
  // between forward and backward, and the buffers of its sends and receives.
  std::vector<Gpt2Model*> inFlight_;
  std::vector<std::vector<float>> actOut_, gradOut_, actIn_, gradIn_;
};

// Parameter indices of the model that a stage with `chunks` holds (those listing one of their
// blocks).
std::vector<size_t> stageParams(const std::vector<zero::ParamInfo>& params,
                                const std::vector<StageBlocks>& chunks);

}  // namespace ds::runtime
