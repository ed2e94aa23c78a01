// 1F1B schedule and the stage split (see pipeline_schedule.h).
#include "runtime/engine/pipeline_schedule.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace ds::runtime {

std::vector<StageBlocks> splitBlocks(int nLayer, int stages, bool requireDivisible) {
  if (stages < 1 || nLayer < stages)
    throw ConfigError(fmt::format(
        "parallel.pipeline: {} stage(s) for a GPT of {} layer(s) (model.gpt.n_layer); every "
        "stage needs at least one layer",
        stages, nLayer));
  if (requireDivisible && nLayer % stages != 0)
    throw ConfigError(
        fmt::format("parallel.pipeline: {} layers (model.gpt.n_layer) do not divide over {} "
                    "stages; give a pipeline size that divides {}, or split unevenly with "
                    "parallel.partition_method: parameters or parallel.stage_layers",
                    nLayer, stages, nLayer));
  std::vector<StageBlocks> out(static_cast<size_t>(stages));
  int next = 1;  // layer blocks are 1..L
  for (int stage = 0; stage < stages; ++stage) {
    const int count = nLayer / stages + (stage < nLayer % stages ? 1 : 0);
    out[stage].first = stage == 0 ? 0 : next;
    next += count;
    out[stage].last = stage == stages - 1 ? nLayer + 2 : next;
  }
  return out;
}

std::vector<int64_t> blockParamCounts(const std::vector<zero::ParamInfo>& params, int nLayer) {
  std::vector<int64_t> weights(static_cast<size_t>(nLayer + 2), 0);
  for (const auto& info : params)
    for (int block : info.blocks)
      if (block >= 0 && block < nLayer + 2)
        weights[static_cast<size_t>(block)] += int64_t(info.numel);
  return weights;
}

namespace {

// Stages from layers per stage: stage 0 starts at block 0, the last ends at block L+1.
std::vector<StageBlocks> fromLayerCounts(int nLayer, const std::vector<int>& layers) {
  std::vector<StageBlocks> out(layers.size());
  int next = 1;
  for (size_t stage = 0; stage < layers.size(); ++stage) {
    out[stage].first = stage == 0 ? 0 : next;
    next += layers[stage];
    out[stage].last = stage + 1 == layers.size() ? nLayer + 2 : next;
  }
  return out;
}

// Contiguous split of blocks 0..L+1 into `stages` parts, each with at least one layer: first the
// smallest possible largest part (the bottleneck), then, among splits within it, the one with the
// smallest sum of squared parts (the most even; a pure min-max leaves the middle stages uneven
// when an end stage sets the bottleneck). Dynamic programme over (stage, last layer), O(P * L^2).
std::vector<int> balancedLayers(int nLayer, int stages, const std::vector<int64_t>& weights) {
  std::vector<int64_t> prefix(weights.size() + 1, 0);  // prefix[b] = sum of blocks < b
  for (size_t block = 0; block < weights.size(); ++block)
    prefix[block + 1] = prefix[block] + weights[block];
  // Stage `stage` holding layers (from, upto]: stage 0 adds block 0, the last block L+1.
  auto part = [&](int stage, int from, int upto) {
    const int firstBlock = stage == 0 ? 0 : from + 1;
    const int endBlock = stage == stages - 1 ? nLayer + 2 : upto + 1;
    return prefix[static_cast<size_t>(endBlock)] - prefix[static_cast<size_t>(firstBlock)];
  };
  const auto cols = static_cast<size_t>(nLayer + 1);
  auto at = [cols](int stage, int upto) {
    return static_cast<size_t>(stage) * cols + size_t(upto);
  };
  // One pass of the programme: `combine` folds a stage's part into the best cost before it.
  auto solve = [&](auto combine, auto worst, std::vector<int>* cuts) {
    using Cost = decltype(worst);
    std::vector<Cost> best(static_cast<size_t>(stages) * cols, worst);
    for (int upto = 1; upto <= nLayer; ++upto)
      best[at(0, upto)] = combine(Cost{}, part(0, 0, upto));
    for (int stage = 1; stage < stages; ++stage)
      for (int upto = stage + 1; upto <= nLayer; ++upto)
        for (int from = stage; from < upto; ++from) {
          const Cost before = best[at(stage - 1, from)];
          if (before == worst) continue;
          const Cost cost = combine(before, part(stage, from, upto));
          if (cost < best[at(stage, upto)]) {  // strict: the earliest cut wins a tie
            best[at(stage, upto)] = cost;
            if (cuts) (*cuts)[at(stage, upto)] = from;
          }
        }
    return best[at(stages - 1, nLayer)];
  };
  constexpr int64_t kNoSplit = std::numeric_limits<int64_t>::max();
  const int64_t bottleneck = solve(
      [](int64_t before, int64_t weight) { return std::max(before, weight); }, kNoSplit, nullptr);
  std::vector<int> cuts(static_cast<size_t>(stages) * cols, 0);
  constexpr double kOver = std::numeric_limits<double>::infinity();
  solve(
      [bottleneck](double before, int64_t weight) {
        return weight > bottleneck ? kOver : before + double(weight) * double(weight);
      },
      kOver, &cuts);
  std::vector<int> layers(static_cast<size_t>(stages), 0);
  int upto = nLayer;
  for (int stage = stages - 1; stage > 0; --stage) {
    const int from = cuts[at(stage, upto)];
    layers[static_cast<size_t>(stage)] = upto - from;
    upto = from;
  }
  layers[0] = upto;
  return layers;
}

}  // namespace

std::vector<StageBlocks> partitionBlocks(int nLayer, const ParallelPlan& plan,
                                         const std::vector<int64_t>& blockWeights) {
  const int stages = plan.pipeline;
  switch (plan.partition) {
    case PartitionMethod::kUniform: return splitBlocks(nLayer, stages, true);
    case PartitionMethod::kExplicit: {
      const auto& layers = plan.stageLayers;
      const std::string given = fmt::format("[{}]", fmt::join(layers, ", "));
      if (int(layers.size()) != stages)
        throw ConfigError(fmt::format(
            "parallel.stage_layers {} has {} entries for parallel.pipeline = {}; give one layer "
            "count per stage",
            given, layers.size(), stages));
      if (std::any_of(layers.begin(), layers.end(), [](int count) { return count < 1; }))
        throw ConfigError(
            fmt::format("parallel.stage_layers {}: every stage needs at least one layer", given));
      const int sum = std::accumulate(layers.begin(), layers.end(), 0);
      if (sum != nLayer)
        throw ConfigError(fmt::format(
            "parallel.stage_layers {} sums to {} layers; the model has {} (model.gpt.n_layer)",
            given, sum, nLayer));
      return fromLayerCounts(nLayer, layers);
    }
    case PartitionMethod::kParameters: break;
  }
  splitBlocks(nLayer, stages, false);  // the P > L refusal, worded once
  if (blockWeights.size() != static_cast<size_t>(nLayer + 2))
    throw InternalError(fmt::format("partitionBlocks: {} block weights for {} layers",
                                    blockWeights.size(), nLayer));
  return fromLayerCounts(nLayer, balancedLayers(nLayer, stages, blockWeights));
}

std::vector<PipeOp> oneFOneB(int stage, int stages, int microBatches) {
  if (microBatches < stages)
    throw ConfigError(fmt::format(
        "gradient_accumulation_steps {} is smaller than the pipeline's {} stages: the 1F1B "
        "schedule needs at least one micro-batch per stage in flight; give "
        "gradient_accumulation_steps >= {}",
        microBatches, stages, stages));
  const int warmup = std::min(stages - stage - 1, microBatches);
  std::vector<PipeOp> ops;
  ops.reserve(static_cast<size_t>(2 * microBatches));
  int fwd = 0, bwd = 0;
  for (; fwd < warmup; ++fwd) ops.push_back({PipeOp::kForward, fwd});
  while (fwd < microBatches) {
    ops.push_back({PipeOp::kForward, fwd++});
    ops.push_back({PipeOp::kBackward, bwd++});
  }
  while (bwd < microBatches) ops.push_back({PipeOp::kBackward, bwd++});
  return ops;
}

std::vector<PipeOp> interleavedOneFOneB(int stage, int stages, int chunks, int microBatches) {
  if (chunks <= 1) return oneFOneB(stage, stages, microBatches);
  oneFOneB(stage, stages, microBatches);  // m >= P, worded once
  if (microBatches % stages != 0)
    throw ConfigError(fmt::format(
        "gradient_accumulation_steps {} is not a multiple of parallel.pipeline = {}: the "
        "interleaved schedule (parallel.virtual_stages = {}) runs micro-batches in whole groups "
        "of {}; give a multiple of {}",
        microBatches, stages, chunks, stages, stages));
  const int total = microBatches * chunks;
  const int group = stages * chunks;  // forwards of one group of P micro-batches over all chunks
  auto forwardOp = [&](int index) {
    const int chunk = (index % group) / stages;
    const int micro = (index / group) * stages + index % stages;
    return PipeOp{PipeOp::kForward, micro, chunk};
  };
  auto backwardOp = [&](int index) {
    const int chunk = chunks - 1 - (index % group) / stages;
    const int micro = (index / group) * stages + index % stages;
    return PipeOp{PipeOp::kBackward, micro, chunk};
  };
  const int warmup = std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  std::vector<PipeOp> ops;
  ops.reserve(static_cast<size_t>(2 * total));
  int fwd = 0, bwd = 0;
  for (; fwd < warmup; ++fwd) ops.push_back(forwardOp(fwd));
  while (fwd < total) {
    ops.push_back(forwardOp(fwd++));
    ops.push_back(backwardOp(bwd++));
  }
  while (bwd < total) ops.push_back(backwardOp(bwd++));
  return ops;
}

std::vector<PipeOp> stageSchedule(int stage, int stages, int chunks, int microBatches) {
  return chunks <= 1 ? oneFOneB(stage, stages, microBatches)
                     : interleavedOneFOneB(stage, stages, chunks, microBatches);
}

std::vector<StageBlocks> stageChunks(const std::vector<StageBlocks>& virtualSplit, int stage,
                                     int stages) {
  std::vector<StageBlocks> out;
  for (size_t index = static_cast<size_t>(stage); index < virtualSplit.size();
       index += static_cast<size_t>(stages))
    out.push_back(virtualSplit[index]);
  return out;
}

double idealBubble(int stages, int microBatches, int chunks) {
  return double(stages - 1) / double(chunks * microBatches + stages - 1);
}

void checkPipelinePlan(const std::string& where, int nLayer, const ParallelPlan& plan,
                       int microBatches) {
  if (plan.pipeline <= 1) return;
  try {
    // The split's own refusals; any weights do (only the parameter counts' values differ).
    planChunks(nLayer, plan, std::vector<int64_t>(static_cast<size_t>(nLayer + 2), 1));
    stageSchedule(0, plan.pipeline, plan.virtualStages, microBatches);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", where, e.what()));
  }
}

std::vector<std::vector<StageBlocks>> planChunks(int nLayer, const ParallelPlan& plan,
                                                 const std::vector<int64_t>& blockWeights) {
  const int chunks = std::max(plan.virtualStages, 1);
  std::vector<StageBlocks> split;
  if (chunks == 1) {
    split = partitionBlocks(nLayer, plan, blockWeights);
  } else {
    if (plan.partition != PartitionMethod::kUniform)
      throw ConfigError(fmt::format(
          "parallel.virtual_stages = {} splits the layers uniformly over pipeline x "
          "virtual_stages = {} chunks; partition_method parameters and stage_layers are for "
          "virtual_stages 1",
          chunks, plan.pipeline * chunks));
    if (nLayer % (plan.pipeline * chunks) != 0)
      throw ConfigError(fmt::format(
          "parallel.virtual_stages = {}: {} layers (model.gpt.n_layer) do not divide over "
          "pipeline {} x virtual_stages {} = {} chunks; every chunk holds the same whole number "
          "of layers",
          chunks, nLayer, plan.pipeline, chunks, plan.pipeline * chunks));
    split = splitBlocks(nLayer, plan.pipeline * chunks, true);
  }
  std::vector<std::vector<StageBlocks>> out;
  for (int stage = 0; stage < plan.pipeline; ++stage)
    out.push_back(stageChunks(split, stage, plan.pipeline));
  return out;
}

}  // namespace ds::runtime
