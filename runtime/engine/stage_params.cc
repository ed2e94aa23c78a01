// A stage's parameters in the engine's and in the model's numbering (see stage_params.h).
#include "runtime/engine/stage_params.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

StageParams::StageParams(const std::vector<zero::ParamInfo>& all, StageBlocks blocks)
    : blocks_(blocks), modelParams_(all.size()) {
  for (size_t i = 0; i < all.size(); ++i) {
    zero::ParamInfo info = all[i];
    info.blocks.clear();
    for (int blk : all[i].blocks)
      if (blk >= blocks.first && blk < blocks.last) info.blocks.push_back(blk - blocks.first);
    if (info.blocks.empty()) continue;
    local_.push_back(std::move(info));
    toModel_.push_back(i);
  }
  table_.value.assign(modelParams_, nullptr);
  table_.value16.assign(modelParams_, nullptr);
  table_.grad.assign(modelParams_, nullptr);
}

void StageParams::bind(zero::BlockHooks* engineHooks, zero::ParamTable* engineTable) {
  hooks_ = engineHooks;
  engineTable_ = engineTable;
  refresh();
}

zero::ParamTable& StageParams::table() {
  if (engineTable_ == nullptr)
    throw InternalError("StageParams: table() before bind() (no stage engine)");
  return table_;
}

zero::BlockHooks& StageParams::engine() {
  if (hooks_ == nullptr)
    throw InternalError("StageParams: a block hook before bind() (no stage engine)");
  return *hooks_;
}

void StageParams::refresh() {
  if (engineTable_ == nullptr) return;
  auto pick = [](const auto& vec, size_t i) { return i < vec.size() ? vec[i] : nullptr; };
  for (size_t i = 0; i < toModel_.size(); ++i) {
    const size_t model = toModel_[i];
    table_.value[model] = pick(engineTable_->value, i);
    table_.value16[model] = pick(engineTable_->value16, i);
    table_.grad[model] = pick(engineTable_->grad, i);
  }
}

void StageParams::beforeForward(int block) {
  engine().beforeForward(block - blocks_.first);
  refresh();
}
void StageParams::afterForward(int block) {
  engine().afterForward(block - blocks_.first);
  refresh();
}
void StageParams::beforeBackward(int block) {
  engine().beforeBackward(block - blocks_.first);
  refresh();
}
void StageParams::afterBackward(int block) {
  engine().afterBackward(block - blocks_.first);
  refresh();
}

}  // namespace ds::runtime
