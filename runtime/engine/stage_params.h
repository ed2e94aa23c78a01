// StageParams: the view of one pipeline stage's parameters between the whole model's numbering
// (what Gpt2Model indexes: every parameter, blocks 0..L+1) and a stage engine's own numbering
// (only the stage's parameters; its blocks numbered 0.. in order, the chunks of an interleaved
// stage one after the other).
// Why: each stage's ZeRO engine holds only its stage's parameters (issue 17 item 2); the model
// code stays the whole model's. A tied parameter (wte: blocks 0 and L+1) appears on every stage
// holding one of its blocks, with only those blocks.
// Invariants: table() has one entry per model parameter, null for parameters of other stages;
// it is refreshed from the engine's table at every hook, so ZeRO 3's per-block exposure carries
// over; hooks forward to the engine with the block shifted by `first`.
#pragma once

#include <vector>

#include "runtime/engine/pipeline_schedule.h"
#include "zero/param_table.h"

namespace ds::runtime {

class StageParams : public zero::BlockHooks {
 public:
  StageParams(const std::vector<zero::ParamInfo>& all, const std::vector<StageBlocks>& chunks);

  // The stage's parameters in model order, with stage-local blocks: the engine's ParamInfos.
  const std::vector<zero::ParamInfo>& localParams() const { return local_; }
  int numLocalBlocks() const { return numLocal_; }
  // Model index of local parameter i.
  size_t modelIndex(size_t local) const { return toModel_[local]; }

  // The engine whose table and hooks this view forwards to (before the first hook).
  void bind(zero::BlockHooks* engineHooks, zero::ParamTable* engineTable);
  zero::ParamTable& table();

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;
  void beforeBackwardPart(int block, int part) override;

 private:
  void refresh();
  zero::BlockHooks& engine();

  int local(int block) const;  // the stage-local number of model block `block`

  std::vector<int> localBlock_;  // [model block] its local number, -1 when not held
  int numLocal_ = 0;
  std::vector<zero::ParamInfo> local_;
  std::vector<size_t> toModel_;
  size_t modelParams_;
  zero::BlockHooks* hooks_ = nullptr;
  zero::ParamTable* engineTable_ = nullptr;
  zero::ParamTable table_;
};

}  // namespace ds::runtime
