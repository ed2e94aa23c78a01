// TensorRun: what the Trainer adds for a plan with parallel.tensor = T > 1 (issue 17 items 3 and
// 4; with pipeline > 1 too, PipelineRun builds the stage on top of it: pipeline_run.h): the grid's
// tensor and data subgroups of the job's group, this rank's place in the Megatron split (Gpt2Model
// with a TensorParallel: gpt2_tensor.h), and what keeps the grid in step:
//   - the engine is a ZeroEngine over the DATA group whose flat space is this rank's shards in
//     model order (local shapes from tensor_shard.h), stage 0 or 1;
//   - the gradient norm (clipping) and the inf/nan check sum over the tensor group with the
//     replicated parameters (LayerNorms, wpe, row-parallel biases: the same gradient on every
//     tensor rank) counted once, by tensor rank 0, so every rank clips and skips the same steps;
//   - parameters come from (and fullParams returns) the canonical, unsplit layout: a source of
//     the whole model's flat space is scattered per parameter (one whole parameter held at a
//     time), so the single-rank init, model.gpt.init_from and fullParams all agree with T = 1.
//   - checkpoints hold the canonical layout (a T=2 checkpoint loads at T=1 and the reverse, and
//     exports as T=1's): at save every optimizer state is assembled over the data group (each
//     element from the lowest data rank holding it), allgathered over the tensor group and
//     written whole by global rank 0; at load each rank reads whole canonical parameters and
//     scatters. Memory cost at save: every rank holds, per optimizer state in turn, its tensor
//     rank's whole local state (1/T of the model), T of them gathered and the canonical whole
//     (the model's size), so about 2x the model's fp32 size transiently; rank 0 also keeps what
//     it writes (the whole model per state, as a T=1 rank 0 at ZeRO 0 does).
// Invariants: every rank of the job constructs it with the same plan (subgroup creation is
// collective, every axis in the same order: tensor, then data); ranks of one tensor group read
// the same batches (the loader's rank is the data index).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/process_group.h"
#include "runtime/config/parallel_grid.h"
#include "runtime/config/plan.h"
#include "runtime/model/gpt2_tensor.h"
#include "runtime/model/model.h"
#include "zero/training_engine.h"
#include "zero/zero_engine.h"

namespace ds::runtime {

class TensorRun {
 public:
  // canonical: the whole (unsplit) model's parameters; `world` the job's group.
  TensorRun(const Plan& plan, const std::vector<zero::ParamInfo>& canonical,
            comm::ProcessGroup* world);
  ~TensorRun();
  TensorRun(const TensorRun&) = delete;
  TensorRun& operator=(const TensorRun&) = delete;

  // What the model splits over (the tensor group is owned here).
  TensorParallel modelTensor() const;
  comm::ProcessGroup* dataGroup() const { return data_.get(); }
  int dataRank() const { return coord_.data; }
  int dataSize() const { return grid_.data(); }
  int tensorRank() const { return coord_.tensor; }

  // After the model is built: its (local) parameters, which must be the canonical ones' shards.
  void setLocalParams(const std::vector<zero::ParamInfo>& local);
  // The norm scope over the tensor group (replicated parameters counted by tensor rank 0).
  void bind(zero::ZeroEngine& engine);

  // The engine's parameter source from the canonical one (whole-model flat offsets).
  zero::TrainingEngine::ParamSource localSource(zero::TrainingEngine::ParamSource canonical) const;
  // The whole model's fp32 parameters in the canonical layout on every rank (collective): each
  // tensor rank's shards, allgathered over the tensor group. Holds T shards and the whole model.
  std::vector<float> fullParams(zero::TrainingEngine& engine) const;
  // The same from this rank's whole local model (every parameter's shard, local flat order; a
  // P x T run's pipeline group has gathered the stages' parts first).
  std::vector<float> gatherCanonical(std::vector<float> local) const;
  // local flat [T * localNumel] (every tensor rank's shards, rank after rank) -> canonical.
  std::vector<float> toCanonical(const std::vector<float>& allShards) const;

  // Checkpoints in the canonical layout (collective over the job): this rank's engine shard (local
  // offsets) -> what it writes (global rank 0: every state whole; the others nothing).
  // P x T: `stages` is the pipeline group and `local` holds this stage's part of the local model
  // (PipelineRun::modelShard: local model offsets, the tied wte once); every element must be
  // held by exactly one stage.
  std::vector<zero::TrainingEngine::ShardTensor> canonicalShard(
      const std::vector<zero::TrainingEngine::ShardTensor>& local,
      comm::ProcessGroup* stages = nullptr) const;
  using RangeReader =
      std::function<void(size_t offset, size_t size, const std::string& name, float* out)>;
  // A reader of canonical ranges served as the engine's local ones.
  RangeReader localRangeReader(RangeReader canonical) const;
  std::vector<zero::ParamInfo> canonicalParams() const { return canonical_; }
  // Whether parameter `param` (model order) is replicated over the tensor group (LayerNorms, wpe,
  // row-parallel biases): the norm counts it on tensor rank 0 only.
  bool replicated(size_t param) const;
  comm::ProcessGroup* tensorGroup() const { return tensor_.get(); }
  int tensorSize() const { return grid_.tensor(); }

  // The startup log: the grid, then per rank its data index and tensor shard (heads, MLP
  // columns, vocabulary rows).
  std::string describe(const ModelConfig& model) const;

 private:
  ParallelGrid grid_;
  GridCoord coord_;
  std::vector<zero::ParamInfo> canonical_, local_;
  std::vector<size_t> canonicalOffset_, localOffset_;
  std::unique_ptr<comm::ProcessGroup> tensor_, data_;
};

// Throws ConfigError unless this trainer can run the plan's tensor layout (no-op at tensor 1):
// a GPT, host compute (no device), ZeRO stage 0 or 1, no compressed (1-bit) optimizer. With
// pipeline > 1 too (P x T), PipelineRun holds the stage and this the tensor split (pipeline_run.h).
void checkTensorTrainer(const Plan& plan, bool onDevice);

}  // namespace ds::runtime
