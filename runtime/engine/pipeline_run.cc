// The Trainer's pipeline-parallel parts (see pipeline_run.h).
#include "runtime/engine/pipeline_run.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "runtime/engine/axis_group.h"
#include "zero/dp_comm.h"

namespace ds::runtime {

void checkPipelineTrainer(const Plan& plan, bool onDevice) {
  const int stages = plan.parallel.pipeline;
  if (stages <= 1) return;
  checkPipelineTraining(plan.source, plan.parallel, plan.deepspeed.zero.stage,
                        plan.deepspeed.gradientAccumulationSteps);
  if (plan.model.kind != "gpt2")
    throw ConfigError(
        fmt::format("{}: parallel.pipeline = {} splits a GPT (model.gpt); model {} "
                    "runs data parallelism only",
                    plan.source, stages, plan.model.kind));
  checkPipelinePlan(plan.source, plan.model.nLayer, plan.parallel,
                    int(plan.deepspeed.gradientAccumulationSteps));
  if (onDevice)
    throw ConfigError(fmt::format(
        "{}: parallel.pipeline = {} runs on the host engine only so far; set train.device: cpu",
        plan.source, stages));
  if (plan.deepspeed.optimizer.compressed())
    throw ConfigError(fmt::format(
        "{}: optimizer.type {} with parallel.pipeline = {}: the compressed optimizers keep "
        "per-rank error feedback that the pipeline's global norm does not cover; use Adam, "
        "AdamW or SGD, or parallel.pipeline 1",
        plan.source, plan.deepspeed.optimizer.type, stages));
}

PipelineRun::PipelineRun(const Plan& plan, const ModelConfig& model,
                         const std::vector<zero::ParamInfo>& modelParams, comm::ProcessGroup* world,
                         const TensorRun* tensor)
    : plan_(plan),
      grid_(world ? world->size() : 1, plan.parallel),
      coord_(grid_.coordOf(world ? world->rank() : 0)),
      nLayer_(model.nLayer),
      modelParams_(modelParams),
      tensor_(tensor) {
  if (world == nullptr)
    throw InternalError("PipelineRun: parallel.pipeline > 1 needs the job's process group");
  split_ = planChunks(model.nLayer, plan.parallel, blockParamCounts(modelParams, model.nLayer));
  chunks_ = split_[static_cast<size_t>(coord_.pipeline)];
  size_t offset = 0;
  for (size_t i = 0; i < modelParams_.size(); ++i) {
    modelOffset_.push_back(offset);
    offset += modelParams_[i].numel;
    const auto& blk = modelParams_[i].blocks;
    const bool onFirst = std::find(blk.begin(), blk.end(), 0) != blk.end();
    const bool onLast = std::find(blk.begin(), blk.end(), model.nLayer + 1) != blk.end();
    if (onFirst && onLast) tiedModel_ = long(i);
  }
  // Every rank creates every group of every axis in the same order (collective over world).
  pipe_ = axisGroup(world, grid_.allGroups("pipeline"));
  data_ = axisGroup(world, grid_.allGroups("data"));
  // The tied wte's two copies, one group per (data, tensor) index: with T > 1 both hold the same
  // vocabulary rows (the tensor rank's).
  std::vector<std::vector<int>> tied;
  for (int dataIndex = 0; dataIndex < grid_.data(); ++dataIndex)
    for (int tensorIndex = 0; tensorIndex < grid_.tensor(); ++tensorIndex)
      tied.push_back({grid_.rankOf({dataIndex, 0, tensorIndex}),
                      grid_.rankOf({dataIndex, grid_.pipeline() - 1, tensorIndex})});
  tied_ = axisGroup(world, tied);
  view_ = std::make_unique<StageParams>(modelParams_, chunks_);
  PipelineStageOptions opts;
  opts.stage = coord_.pipeline;
  opts.stages = grid_.pipeline();
  opts.microBatches = int(plan.deepspeed.gradientAccumulationSteps);
  opts.chunks = chunks_;
  if (tensor_) opts.tensor = tensor_->modelTensor();
  stage_ = std::make_unique<PipelineStage>(model, pipe_.get(), opts);
  micro_.resize(static_cast<size_t>(opts.microBatches));
}

PipelineRun::~PipelineRun() = default;

void PipelineRun::bind(zero::ZeroEngine& engine, zero::BlockHooks& engineHooks) {
  engine_ = &engine;
  view_->bind(&engineHooks, &engine.table());
  zero::ZeroEngine::NormScope scope;
  if (stage_->last() && !stage_->first()) {  // the first stage counts the tied wte
    const auto tied = tiedLocalRange();
    scope.skipBegin = tied.first;
    scope.skipEnd = tied.second;
  }
  if (tensor_ && tensor_->modelTensor().rank != 0) {  // tensor rank 0 counts replicated params
    size_t local = 0;
    const auto& params = view_->localParams();
    for (size_t i = 0; i < params.size(); ++i) {
      const size_t end = local + params[i].numel;
      if (tensor_->replicated(view_->modelIndex(i))) {
        if (!scope.skipRanges.empty() && scope.skipRanges.back().second == local)
          scope.skipRanges.back().second = end;
        else scope.skipRanges.emplace_back(local, end);
      }
      local = end;
    }
  }
  // Over the pipeline group, then (P x T) the tensor group: every rank of a tensor group holds
  // its pipeline group's sum, so the second sum is the grid's, added in the same order on
  // every rank (bitwise the same everywhere).
  comm::ProcessGroup* tensorGroup = tensor_ ? tensor_->tensorGroup() : nullptr;
  scope.acrossStages = [group = pipe_.get(), tensorGroup](double sumSquares) {
    double total = 0;
    for (double part : zero::DpComm(group).allgatherDouble(sumSquares))
      total += part;  // stage order: the same sum on every stage
    if (tensorGroup) {
      const double stages = total;
      total = 0;
      for (double part : zero::DpComm(tensorGroup).allgatherDouble(stages)) total += part;
    }
    return total;
  };
  engine.setNormScope(std::move(scope));
}

std::vector<PipelineRun::Piece> PipelineRun::toModel(size_t offset, size_t size) const {
  std::vector<Piece> out;
  size_t local = 0;
  const auto& params = view_->localParams();
  for (size_t i = 0; i < params.size() && size > 0; ++i) {
    const size_t numel = params[i].numel;
    if (offset < local + numel) {
      const size_t within = offset - local;
      const size_t count = std::min(size, numel - within);
      out.push_back({offset, modelOffset_[view_->modelIndex(i)] + within, count});
      offset += count;
      size -= count;
    }
    local += numel;
  }
  if (size > 0)
    throw InternalError(fmt::format("pipeline stage {}: local range ends past its {} elements",
                                    coord_.pipeline, local));
  return out;
}

zero::TrainingEngine::ParamSource PipelineRun::localSource(
    zero::TrainingEngine::ParamSource model) const {
  return [this, model = std::move(model)](size_t offset, size_t size, float* out) {
    for (const Piece& piece : toModel(offset, size))
      model(piece.modelOffset, piece.size, out + (piece.localOffset - offset));
  };
}

std::vector<zero::TrainingEngine::ShardTensor> PipelineRun::modelShard(
    std::vector<zero::TrainingEngine::ShardTensor> local) const {
  const auto tied = tiedLocalRange();
  const bool skipTied = stage_->last() && !stage_->first();
  std::vector<zero::TrainingEngine::ShardTensor> out;
  for (const auto& tensor : local)
    for (const Piece& piece : toModel(tensor.offset, tensor.size)) {
      // Pieces never straddle a parameter: the tied one is skipped whole.
      if (skipTied && piece.localOffset >= tied.first && piece.localOffset < tied.second) continue;
      zero::TrainingEngine::ShardTensor part;
      part.name = tensor.name;
      part.offset = piece.modelOffset;
      part.size = piece.size;
      const auto from = tensor.data.begin() + std::ptrdiff_t(piece.localOffset - tensor.offset);
      part.data.assign(from, from + std::ptrdiff_t(piece.size));
      out.push_back(std::move(part));
    }
  return out;
}

PipelineRun::RangeReader PipelineRun::localRangeReader(RangeReader model) const {
  return [this, model = std::move(model)](size_t offset, size_t size, const std::string& name,
                                          float* out) {
    for (const Piece& piece : toModel(offset, size))
      model(piece.modelOffset, piece.size, name, out + (piece.localOffset - offset));
  };
}

std::pair<size_t, size_t> PipelineRun::tiedLocalRange() const {
  size_t local = 0;
  const auto& params = view_->localParams();
  for (size_t i = 0; i < params.size(); ++i) {
    if (long(view_->modelIndex(i)) == tiedModel_) return {local, local + params[i].numel};
    local += params[i].numel;
  }
  return {0, 0};
}

PipelineStepResult PipelineRun::forwardBackward(DataLoader& loader, float lossScale,
                                                zero::TrainingEngine& engine) {
  for (Batch& batch : micro_) loader.next(batch);
  // Gradients accumulate over the step's micro-batches and are reduced in step(): 1F1B
  // interleaves micro-batches, so no backward is "the last micro-step" before the step ends.
  engine.beginStep(false);
  PipelineStepResult res =
      stage_->step([this](int micro) -> const Batch& { return micro_[static_cast<size_t>(micro)]; },
                   lossScale, view_->table(), *view_);
  // The tied wte: each copy holds its stage's share of the gradient; both take the sum.
  if (tied_ && tiedModel_ >= 0 && !testSkipTied_) {
    const auto range = tiedLocalRange();
    size_t index = 0;
    for (size_t i = 0; i < view_->localParams().size(); ++i)
      if (long(view_->modelIndex(i)) == tiedModel_) index = i;
    float* grad = engine.table().grad[index];
    if (grad == nullptr)
      throw InternalError(fmt::format(
          "pipeline stage {}: the tied wte's gradient is not held outside the hooks (ZeRO "
          "stage {})",
          coord_.pipeline, plan_.deepspeed.zero.stage));
    tied_->allreduce(comm::view(grad, range.second - range.first))->wait();
  }
  return res;
}

double PipelineRun::evaluateBatch(const Batch& batch) {
  return stage_->forwardOnly(batch, view_->table(), *view_);
}

double PipelineRun::lastStageMean(double value) {
  // The last stage's value reaches its pipeline group (doubles travel bit for bit), then the
  // data group's mean: the same number on every rank of the job.
  double mine = zero::DpComm(pipe_.get()).allgatherDouble(stage_->last() ? value : 0.0).back();
  if (data_) {
    const auto overData = zero::DpComm(data_.get()).allgatherDouble(mine);
    mine = 0;
    for (double part : overData) mine += part;
    mine /= double(overData.size());
  }
  return mine;
}

std::vector<float> PipelineRun::fullParams(zero::TrainingEngine& engine, size_t modelNumel) {
  std::vector<float> local(engine.numel());
  engine.getParams(local.data());
  std::vector<float> full(modelNumel, 0.0f);
  const auto tied = tiedLocalRange();
  const bool skipTied = stage_->last() && !stage_->first();
  for (const Piece& piece : toModel(0, local.size())) {
    if (skipTied && piece.localOffset >= tied.first && piece.localOffset < tied.second) continue;
    std::copy_n(local.begin() + std::ptrdiff_t(piece.localOffset), piece.size,
                full.begin() + std::ptrdiff_t(piece.modelOffset));
  }
  // Every element is held by exactly one stage: adding zeros changes no bit.
  pipe_->allreduce(comm::view(full.data(), full.size()))->wait();
  return full;
}

std::string PipelineRun::describe() const {
  const int chunks = std::max(plan_.parallel.virtualStages, 1);
  const int micro = int(plan_.deepspeed.gradientAccumulationSteps);
  std::string out = fmt::format(
      "pipeline: world {} = data {} x pipeline {}{}; {} over {} micro-batches per step (ideal "
      "bubble {:.1f}%), ZeRO stage {} within each stage's data group; layers per stage {}",
      grid_.world(), grid_.data(), grid_.pipeline(),
      grid_.tensor() > 1 ? fmt::format(" x tensor {} (each stage's blocks split over its tensor "
                                       "group; parameters below are the rank's shards)",
                                       grid_.tensor())
                         : std::string(),
      chunks > 1 ? fmt::format("interleaved 1F1B, {} chunks per stage,", chunks)
                 : std::string("1F1B"),
      micro, 100.0 * idealBubble(grid_.pipeline(), micro, chunks), plan_.deepspeed.zero.stage,
      plan_.parallel.partition == PartitionMethod::kExplicit
          ? std::string("from parallel.stage_layers")
          : fmt::format("by partition_method {}", partitionMethodName(plan_.parallel.partition)));
  for (int rank = 0; rank < grid_.world(); ++rank) {
    const GridCoord coord = grid_.coordOf(rank);
    const auto& chunkList = split_[static_cast<size_t>(coord.pipeline)];
    std::vector<std::string> ranges, parts;
    for (const StageBlocks& blocks : chunkList) {
      ranges.push_back(fmt::format("[{}, {})", blocks.first, blocks.last));
      if (blocks.first == 0) parts.emplace_back("embeddings");
      const int firstLayer = std::max(blocks.first, 1);
      const int lastLayer = std::min(blocks.last - 1, nLayer_);
      if (lastLayer >= firstLayer)
        parts.push_back(firstLayer == lastLayer
                            ? fmt::format("layer {}", firstLayer - 1)
                            : fmt::format("layers {}..{}", firstLayer - 1, lastLayer - 1));
      if (blocks.last == nLayer_ + 2) parts.emplace_back("head and loss (tied wte)");
    }
    size_t held = 0;
    for (size_t param : stageParams(modelParams_, chunkList)) held += modelParams_[param].numel;
    out += fmt::format("\n  rank {}: stage {} (data {}{}), blocks {}: {}; {} parameters", rank,
                       coord.pipeline, coord.data,
                       grid_.tensor() > 1 ? fmt::format(", tensor {}", coord.tensor) : "",
                       fmt::join(ranges, " "), fmt::join(parts, ", "), held);
  }
  return out;
}

}  // namespace ds::runtime
