// What a plan's training semantics resolve to for one model and data set: which parameters weight
// decay applies to (train.weight_decay_on) and how many validation batches one evaluation reads
// (train.eval_tokens / train.eval_steps, capped by the validation set), and when a compressed
// optimizer starts compressing. Not the optimizer itself (zero/)
// nor the loader (runtime/data); the Trainer calls these once at construction and prints the
// lines they return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/plan.h"
#include "zero/param_table.h"

namespace ds::runtime {

// params with ParamInfo::decay set by the plan: "matrices" keeps the model's marking (decay on
// parameters of 2 or more dimensions: linear weights and embeddings; none on biases and
// LayerNorm gains/biases), "all" sets it everywhere. line: the startup line naming the choice,
// e.g. "weight decay 0.1 on matrices (train.weight_decay_on): 10 tensors / 26112 elements
// decayed; 18 tensors / 896 elements (biases, LayerNorm) not".
struct DecayChoice {
  std::vector<zero::ParamInfo> params;
  std::string line;
};
DecayChoice applyDecayChoice(std::vector<zero::ParamInfo> params, const Plan& plan);

// Global micro-batches per eval: ceil(eval_tokens / tokens per batch) when train.eval_tokens is
// set, else train.eval_steps; at most the batches the validation set holds (each token read once
// per eval, never wrapping). warning: non-empty when capped, naming both sizes.
struct EvalBatches {
  int64_t batches = 0;
  std::string warning;
};
EvalBatches evalBatches(const Plan& plan, uint64_t batchesInSet, uint64_t setTokens,
                        const std::string& setName, int world);

// The startup line of a compressed optimizer (OneBitAdam, ZeroOneAdam, OneBitLamb; "" for the
// others): when its compressed phase starts, and a warning where train.steps ends before it
// (freeze_step defaults to DeepSpeed's 100000, so a short run with the default never compresses
// and is plain Adam / LAMB with uncompressed allreduces throughout).
std::string compressionLine(const Plan& plan);

}  // namespace ds::runtime
