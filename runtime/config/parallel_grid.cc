// ParallelGrid: rank <-> (data, pipeline, tensor) coordinates and the groups of each axis.
#include "runtime/config/parallel_grid.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

ParallelGrid::ParallelGrid(int world, ParallelPlan plan)
    : world_(world),
      p_(plan.pipeline),
      t_(plan.tensor),
      d_(0),
      evenLayers_(plan.partition == PartitionMethod::kUniform) {
  if (world < 1) throw ConfigError(fmt::format("parallel: world size must be >= 1, got {}", world));
  if (p_ < 1 || t_ < 1)
    throw ConfigError(fmt::format(
        "parallel.pipeline and parallel.tensor must be >= 1, got pipeline {} tensor {}", p_, t_));
  if (world % (p_ * t_) != 0)
    throw ConfigError(fmt::format(
        "parallel: world size {} is not divisible by pipeline {} x tensor {} = {}, so there is "
        "no whole data-parallel size (data = world / (pipeline x tensor))",
        world, p_, t_, p_ * t_));
  d_ = world / (p_ * t_);
}

GridCoord ParallelGrid::coordOf(int rank) const {
  if (rank < 0 || rank >= world_)
    throw Error(fmt::format("parallel grid: rank {} outside world {}", rank, world_));
  return {(rank / t_) % d_, rank / (t_ * d_), rank % t_};
}

int ParallelGrid::rankOf(GridCoord c) const { return c.tensor + t_ * (c.data + d_ * c.pipeline); }

std::vector<int> ParallelGrid::tensorGroup(int rank) const {
  GridCoord c = coordOf(rank);
  std::vector<int> g;
  for (c.tensor = 0; c.tensor < t_; ++c.tensor) g.push_back(rankOf(c));
  return g;
}

std::vector<int> ParallelGrid::pipelineGroup(int rank) const {
  GridCoord c = coordOf(rank);
  std::vector<int> g;
  for (c.pipeline = 0; c.pipeline < p_; ++c.pipeline) g.push_back(rankOf(c));
  return g;
}

std::vector<int> ParallelGrid::dataGroup(int rank) const {
  GridCoord c = coordOf(rank);
  std::vector<int> g;
  for (c.data = 0; c.data < d_; ++c.data) g.push_back(rankOf(c));
  return g;
}

std::vector<std::vector<int>> ParallelGrid::allGroups(const std::string& axis) const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_; ++r) {
    std::vector<int> g;
    if (axis == "tensor") g = tensorGroup(r);
    else if (axis == "pipeline") g = pipelineGroup(r);
    else if (axis == "data") g = dataGroup(r);
    else throw Error(fmt::format("parallel grid: unknown axis '{}' (tensor|pipeline|data)", axis));
    if (g.front() == r) out.push_back(std::move(g));  // each group once, at its first rank
  }
  return out;
}

void ParallelGrid::checkModel(const ModelShape& m) const {
  auto need = [&](int value, int by, const char* what, const char* axis) {
    if (value > 0 && value % by != 0)
      throw ConfigError(fmt::format(
          "parallel.{} = {} does not divide the model's {} ({}); layout: data {} x pipeline {} x "
          "tensor {} = world {}",
          axis, by, what, value, d_, p_, t_, world_));
  };
  need(m.nHead, t_, "attention heads (model.gpt.n_head)", "tensor");
  need(m.nEmbd, t_, "width (model.gpt.n_embd)", "tensor");
  need(m.vocab, t_, "vocabulary (padded vocab size)", "tensor");
  // The default (uniform) split gives every stage L/P layers; partition_method parameters and
  // stage_layers place uneven counts (pipeline_schedule.h).
  if (evenLayers_ && m.nLayer > 0 && m.nLayer % p_ != 0)
    throw ConfigError(fmt::format(
        "parallel.pipeline = {} does not divide the model's blocks ({}, model.gpt.n_layer); "
        "layout: data {} x pipeline {} x tensor {} = world {}; give a pipeline size that divides "
        "{}, or split unevenly with parallel.partition_method: parameters or "
        "parallel.stage_layers",
        p_, m.nLayer, d_, p_, t_, world_, m.nLayer));
  if (m.nLayer > 0 && m.nLayer < p_)
    throw ConfigError(fmt::format(
        "parallel.pipeline = {} exceeds the model's blocks ({}, model.gpt.n_layer): every stage "
        "needs at least one layer",
        p_, m.nLayer));
}

const char* partitionMethodName(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::kParameters: return "parameters";
    case PartitionMethod::kUniform: return "uniform";
    case PartitionMethod::kExplicit: return "explicit";
  }
  return "?";
}

std::string ParallelGrid::describe() const {
  std::string s = fmt::format("parallel grid: world {} = data {} x pipeline {} x tensor {}\n",
                              world_, d_, p_, t_);
  for (int r = 0; r < world_; ++r) {
    GridCoord c = coordOf(r);
    s += fmt::format("  rank {}: data {} pipeline {} tensor {}\n", r, c.data, c.pipeline, c.tensor);
  }
  return s;
}

void checkPipelineTraining(const std::string& where, const ParallelPlan& plan, int zeroStage,
                           int64_t gradientAccumulationSteps) {
  if (plan.pipeline <= 1) return;
  if (zeroStage >= 2)
    throw ConfigError(fmt::format(
        "{}: zero_optimization.stage {} with parallel.pipeline = {}: pipeline parallelism runs "
        "ZeRO stages 0 and 1 only (stages 2 and 3 reduce and partition gradients during backward, "
        "which 1F1B interleaves across micro-batches; DeepSpeed refuses them with pipelining "
        "too); set zero_optimization.stage to 0 or 1, or parallel.pipeline to 1",
        where, zeroStage, plan.pipeline));
  if (gradientAccumulationSteps < plan.pipeline)
    throw ConfigError(fmt::format(
        "{}: gradient_accumulation_steps {} is smaller than parallel.pipeline = {}: the 1F1B "
        "schedule needs at least one micro-batch per stage in every step; raise "
        "gradient_accumulation_steps to {} or more (train_batch_size = micro batch x "
        "gradient_accumulation_steps x data-parallel ranks)",
        where, gradientAccumulationSteps, plan.pipeline, plan.pipeline));
  if (plan.virtualStages > 1 && gradientAccumulationSteps % plan.pipeline != 0)
    throw ConfigError(fmt::format(
        "{}: gradient_accumulation_steps {} is not a multiple of parallel.pipeline = {}: the "
        "interleaved schedule (parallel.virtual_stages = {}) runs micro-batches in whole groups "
        "of {}, as Megatron's; give a multiple of {}",
        where, gradientAccumulationSteps, plan.pipeline, plan.virtualStages, plan.pipeline,
        plan.pipeline));
}

}  // namespace ds::runtime
