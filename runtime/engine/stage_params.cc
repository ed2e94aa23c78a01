// A stage's parameters in the engine's and in the model's numbering (see stage_params.h).
#include "runtime/engine/stage_params.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

StageParams::StageParams(const std::vector<zero::ParamInfo>& all,
                         const std::vector<StageBlocks>& chunks)
    : modelParams_(all.size()) {
  for (const StageBlocks& chunk : chunks)
    for (int blk = chunk.first; blk < chunk.last; ++blk) {
      if (blk >= int(localBlock_.size())) localBlock_.resize(size_t(blk) + 1, -1);
      localBlock_[size_t(blk)] = numLocal_++;
    }
  for (size_t i = 0; i < all.size(); ++i) {
    zero::ParamInfo info = all[i];
    info.blocks.clear();
    for (int blk : all[i].blocks)
      if (blk >= 0 && blk < int(localBlock_.size()) && localBlock_[size_t(blk)] >= 0)
        info.blocks.push_back(localBlock_[size_t(blk)]);
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

int StageParams::local(int block) const {
  if (block < 0 || block >= int(localBlock_.size()) || localBlock_[size_t(block)] < 0)
    throw InternalError(fmt::format("StageParams: block {} is not one of this stage's", block));
  return localBlock_[size_t(block)];
}

void StageParams::beforeForward(int block) {
  engine().beforeForward(local(block));
  refresh();
}
void StageParams::afterForward(int block) {
  engine().afterForward(local(block));
  refresh();
}
void StageParams::beforeBackward(int block) {
  engine().beforeBackward(local(block));
  refresh();
}
void StageParams::afterBackward(int block) {
  engine().afterBackward(local(block));
  refresh();
}
void StageParams::beforeBackwardPart(int block, int part) {
  engine().beforeBackwardPart(local(block), part);
  refresh();
}

}  // namespace ds::runtime
