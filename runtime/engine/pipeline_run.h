// PipelineRun: what the Trainer adds for a plan with parallel.pipeline = P > 1 (issue 17 item 2):
// the grid's pipeline, data and tied-embedding subgroups of the job's group, this rank's stage
// (StageParams: the stage engine's parameters; PipelineStage: the 1F1B step), and the
// reductions that keep every rank of the grid in step:
//   - the tied wte's gradient is summed between the first and the last stage (a 2-rank group per
//     data index) after backward and before the engine's data-parallel reduction and optimizer
//     (DeepSpeed's TrainSchedule: ReduceTiedGrads, ReduceGrads, OptimizerStep);
//   - the gradient norm (clipping) and the inf/nan check sum over the pipeline group, wte counted
//     once (the last stage leaves its copy out, as DeepSpeed's ds_pipe_replicated), so every rank
//     clips and skips the same steps;
//   - the loss (the last stage's, mean over micro-batches and data ranks) reaches every rank.
// P x T (parallel.tensor > 1 too, issue 17 item 4): the stage's blocks are tensor-parallel
// (a TensorRun owns the tensor and its data group; the stage's models split over its tensor
// group), the "model" numbering here is this tensor rank's local (sharded) model, and the
// TensorRun maps it to the canonical one. The tied wte's gradient is summed between the first
// and last stage per (data, tensor) index (both copies hold the same vocabulary rows); the norm
// and the inf/nan check sum over pipeline x tensor, each replicated parameter counted by tensor
// rank 0 only and the last stage's wte left out, so every rank of the grid clips and skips alike.
// Invariants: every rank of the job constructs it with the same plan (subgroup creation is
// collective, in the same order everywhere); the stage engine is a ZeroEngine at stage 0 or 1
// whose flat space is the stage's parameters in model order (StageParams::localParams); the two
// copies of wte get identical gradients, so their values and optimizer states stay identical.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "runtime/config/plan.h"
#include "runtime/data/data_loader.h"
#include "runtime/engine/pipeline_stage.h"
#include "runtime/engine/stage_params.h"
#include "runtime/engine/tensor_run.h"
#include "zero/training_engine.h"
#include "zero/zero_engine.h"

namespace ds::runtime {

class PipelineRun {
 public:
  // modelParams: the whole model's parameters (weight decay chosen; with `tensor`, this tensor
  // rank's shards of them); `world` the job's group; `tensor` the tensor split (null at T = 1,
  // otherwise built before this, on every rank: the subgroups are created in that order).
  PipelineRun(const Plan& plan, const ModelConfig& model,
              const std::vector<zero::ParamInfo>& modelParams, comm::ProcessGroup* world,
              const TensorRun* tensor = nullptr);
  ~PipelineRun();
  PipelineRun(const PipelineRun&) = delete;
  PipelineRun& operator=(const PipelineRun&) = delete;

  // The stage engine's parameters and blocks, and its group (null when data-parallel size is 1).
  const std::vector<zero::ParamInfo>& localParams() const { return view_->localParams(); }
  int numLocalBlocks() const { return view_->numLocalBlocks(); }
  comm::ProcessGroup* dataGroup() const { return data_.get(); }
  int dataRank() const { return coord_.data; }
  int dataSize() const { return grid_.data(); }
  int stage() const { return coord_.pipeline; }
  comm::ProcessGroup* pipelineGroup() const { return pipe_.get(); }
  // Test hook (trainer_pxt_test.cc): skip the tied wte's gradient sum, so a test can show the
  // losses move without it. Never set outside tests.
  void testSkipTiedReduction() { testSkipTied_ = true; }

  // After the stage engine is built: the view forwards the model's hooks to `engineHooks` (the
  // engine behind its timers / fp16 rounding) and reads `engine`'s table; the norm scope spans
  // the pipeline group.
  void bind(zero::ZeroEngine& engine, zero::BlockHooks& engineHooks);
  zero::ParamTable& table() { return view_->table(); }
  zero::BlockHooks& hooks() { return *view_; }

  // The stage engine's parameter source from the whole model's (flat model offsets), and the
  // model range of stage-local flat [offset, offset + size) piece by piece.
  zero::TrainingEngine::ParamSource localSource(zero::TrainingEngine::ParamSource model) const;
  struct Piece {
    size_t localOffset, modelOffset, size;
  };
  std::vector<Piece> toModel(size_t offset, size_t size) const;
  // Checkpoints hold the whole model's flat space (any layout loads them): this rank's optimizer
  // shard with model offsets (the last stage leaves out its copy of the tied wte, which the
  // first stage writes), and a reader of model ranges served as the stage engine's local ones.
  std::vector<zero::TrainingEngine::ShardTensor> modelShard(
      std::vector<zero::TrainingEngine::ShardTensor> local) const;
  using RangeReader =
      std::function<void(size_t offset, size_t size, const std::string& name, float* out)>;
  RangeReader localRangeReader(RangeReader model) const;
  // Local flat range of the tied wte when this stage holds it, else {0, 0}.
  std::pair<size_t, size_t> tiedLocalRange() const;

  // One step's forward and backward over gas micro-batches from `loader` (1F1B), then the tied
  // gradient sum. Returns the last stage's loss sum (0 elsewhere).
  PipelineStepResult forwardBackward(DataLoader& loader, float lossScale,
                                     zero::TrainingEngine& engine);
  // Forward only over one validation batch; the last stage's loss (0 elsewhere).
  double evaluateBatch(const Batch& batch);
  // The last stage's value, mean over the data ranks, on every rank of the job (collective).
  double lastStageMean(double value);

  // The whole model's fp32 parameters (model flat order) on every rank (collective): each stage's
  // engine's, allgathered over the pipeline group.
  std::vector<float> fullParams(zero::TrainingEngine& engine, size_t modelNumel);

  // The startup log's layout: the grid, then one line per rank: its stage, data index, blocks
  // [a, b) (embeddings, layers i..j, head) and parameter count.
  std::string describe() const;

 private:
  const Plan& plan_;
  ParallelGrid grid_;
  GridCoord coord_;
  std::vector<std::vector<StageBlocks>> split_;  // every stage's chunks' blocks (planChunks)
  std::vector<StageBlocks> chunks_;              // this rank's
  int nLayer_;
  std::vector<zero::ParamInfo> modelParams_;
  std::vector<size_t> modelOffset_;  // flat offset of every model parameter
  std::unique_ptr<comm::ProcessGroup> pipe_, data_, tied_;
  std::unique_ptr<StageParams> view_;
  std::unique_ptr<PipelineStage> stage_;
  zero::ZeroEngine* engine_ = nullptr;
  const TensorRun* tensor_ = nullptr;  // P x T: the tensor split (not owned), else null
  bool testSkipTied_ = false;
  long tiedModel_ = -1;  // model index of the tied parameter (blocks 0 and L+1), -1: none
  std::vector<Batch> micro_;
};

// Throws ConfigError unless this trainer can run the plan's layout: with pipeline > 1 the plan
// checks (checkPipelineTraining), a GPT, host compute (no device), no compressed
// optimizer.
void checkPipelineTrainer(const Plan& plan, bool onDevice);

}  // namespace ds::runtime
