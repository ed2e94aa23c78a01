// Pipeline schedule: which blocks each pipeline stage holds (by layer count, balanced by parameter
// count as DeepSpeed's partition_method "parameters", or given explicitly) and in which order a
// stage runs the forward and backward passes of one step's micro-batches (1F1B, as DeepSpeed's
// TrainSchedule and Megatron's non-interleaved schedule).
// Why: pipeline parallelism (issue 17 item 2) splits a GPT's blocks (0 = embeddings, 1..L
// layers, L+1 = final LN + tied head + loss) over P stages; every rank must agree on the split
// and on the order of sends and receives, or the stages deadlock.
// Invariants: stages cover blocks 0..L+1 once, in order; the first stage holds block 0, the last
// block L+1; 1F1B needs m >= P micro-batches (refused otherwise, naming both), and every stage
// runs each micro-batch's forward before its backward, forwards and backwards each in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/parallel_grid.h"
#include "zero/param_table.h"

namespace ds::runtime {

struct StageBlocks {  // blocks [first, last) of one stage, in the model's block numbering
  int first = 0, last = 0;
};

// L layers over P stages by count (the first L % P stages take one more layer); stage 0 adds
// block 0 (embeddings), stage P-1 adds block L+1 (head and loss). Throws ConfigError naming L
// and P when P > L or when `requireDivisible` and L % P != 0 (the plan's balanced split).
std::vector<StageBlocks> splitBlocks(int nLayer, int stages, bool requireDivisible = true);

// Parameters per block 0..L+1: each parameter counted in every block that reads it, so the tied
// wte weighs on the embedding block and on the head block (DeepSpeed counts a TiedLayerSpec at
// each of its positions).
std::vector<int64_t> blockParamCounts(const std::vector<zero::ParamInfo>& params, int nLayer);

// The plan's split (parallel.partition_method / parallel.stage_layers, see ParallelPlan):
//   uniform     L/P layers per stage (the default; P must divide L);
//   parameters  contiguous stages, each with at least one layer, minimising the largest stage's
//               parameter count (blockWeights from blockParamCounts; ties: the earliest cuts);
//   explicit    stage s holds stageLayers[s] layers.
// Stage 0 always adds block 0 and stage P-1 block L+1. Throws ConfigError naming the numbers
// (P > L, a stage_layers list of the wrong length or sum, a stage with no layer).
std::vector<StageBlocks> partitionBlocks(int nLayer, const ParallelPlan& plan,
                                         const std::vector<int64_t>& blockWeights);

struct PipeOp {
  enum Kind { kForward, kBackward } kind;
  int micro;      // micro-batch index 0..m-1
  int chunk = 0;  // model chunk of this stage (0 without interleaving)
};

// The 1F1B order of stage `stage` (0..P-1) for m micro-batches: P-stage-1 warm-up forwards, then
// one forward one backward while forwards remain, then the remaining backwards. Throws
// ConfigError (naming m and P) when m < P.
std::vector<PipeOp> oneFOneB(int stage, int stages, int microBatches);

// The interleaved 1F1B order (Megatron's virtual pipeline stages): each of the P stages holds v
// model chunks, chunk c of stage s being virtual stage c*P + s, so a micro-batch passes every
// stage v times. Forwards run in groups of P micro-batches per chunk (chunk 0 of micro-batches
// 0..P-1, chunk 1 of the same, ..., then the next P micro-batches), backwards in the same groups
// with the chunks reversed; (P-s-1)*2 + (v-1)*P warm-up forwards, then one forward one backward,
// then the remaining backwards. Throws ConfigError (naming the numbers) when m is not a multiple
// of P (the groups must be whole, as Megatron requires) or m < P. v = 1 gives oneFOneB's order.
std::vector<PipeOp> interleavedOneFOneB(int stage, int stages, int chunks, int microBatches);

// The schedule a stage runs: oneFOneB for one chunk, interleavedOneFOneB for more.
std::vector<PipeOp> stageSchedule(int stage, int stages, int chunks, int microBatches);

// Stage `stage`'s chunks' blocks: chunk c holds virtual stage c*P + stage of `virtualSplit` (the
// split over P*v virtual stages).
std::vector<StageBlocks> stageChunks(const std::vector<StageBlocks>& virtualSplit, int stage,
                                     int stages);

// The bubble fraction of an ideal 1F1B step with equal stage times: (P-1)/(m+P-1); interleaved
// over v chunks per stage each chunk's work is 1/v of a stage's, so (P-1)/(v*m+P-1).
double idealBubble(int stages, int microBatches, int chunks = 1);

// Checks a plan's pipeline numbers before training: `where` names the plan (file) in the
// message. Throws ConfigError naming the numbers.
void checkPipelinePlan(const std::string& where, int nLayer, const ParallelPlan& plan,
                       int microBatches);

// The blocks of every stage's chunks: the plan's split over P*v virtual stages (v =
// plan.virtualStages), chunk c of stage s at [stage s][c].
std::vector<std::vector<StageBlocks>> planChunks(int nLayer, const ParallelPlan& plan,
                                                 const std::vector<int64_t>& blockWeights);

}  // namespace ds::runtime
