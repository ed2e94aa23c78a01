// 1F1B schedule and the stage split (see pipeline_schedule.h).
#include "runtime/engine/pipeline_schedule.h"

#include <algorithm>

#include <fmt/format.h>

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
                    "stages; give a pipeline size that divides {}",
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

double idealBubble(int stages, int microBatches) {
  return double(stages - 1) / double(microBatches + stages - 1);
}

void checkPipelinePlan(const std::string& where, int nLayer, int stages, int microBatches) {
  if (stages <= 1) return;
  try {
    splitBlocks(nLayer, stages);
    oneFOneB(0, stages, microBatches);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace ds::runtime
