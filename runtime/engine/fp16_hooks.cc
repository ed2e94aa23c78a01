// Fp16Hooks (see fp16_hooks.h).
#include "runtime/engine/fp16_hooks.h"

#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

Fp16Hooks::Fp16Hooks(zero::BlockHooks& inner, std::function<zero::ParamTable&()> table,
                     const std::vector<zero::ParamInfo>& params, int numBlocks, Ops* ops,
                     bool roundWeights)
    : inner_(inner),
      table_(std::move(table)),
      blockParams_(size_t(numBlocks)),
      ops_(ops),
      saved_(params.size(), nullptr),
      roundWeights_(roundWeights) {
  for (size_t i = 0; i < params.size(); ++i) {
    numel_.push_back(params[i].numel);
    part_.push_back(params[i].backwardPart);
    for (int b : params[i].blocks)
      if (b >= 0 && b < numBlocks) blockParams_[size_t(b)].push_back(i);
  }
}

void Fp16Hooks::enter(int b) {
  if (active_ >= 0)
    throw InternalError(
        fmt::format("Fp16Hooks: block {} entered while block {} is still active "
                    "(hooks must not nest)",
                    b, active_));
  active_ = b;
  if (!roundWeights_) return;
  auto& t = table_();
  size_t need = 0;
  for (size_t i : blockParams_[size_t(b)]) need += numel_[i];
  if (ops_ != nullptr && devScratchFloats_ < need) {
    devScratch_ = OpsBuffer();  // release first: the new one may need the room
    devScratch_ = OpsBuffer(*ops_, need * sizeof(float), "fp16 mode's rounded block weights");
    devScratchFloats_ = need;
  }
  if (ops_ == nullptr && scratch_.size() < need) scratch_.resize(need);
  float* base = ops_ != nullptr ? devScratch_.as<float>() : scratch_.data();
  size_t off = 0;
  for (size_t i : blockParams_[size_t(b)]) {
    if (i >= t.value.size() || !t.value[i]) continue;
    float* c = base + off;
    off += numel_[i];
    if (ops_ != nullptr) {
      ops_->copy(c, t.value[i], numel_[i] * sizeof(float));
      ops_->roundToFp16(c, numel_[i]);
    } else {
      std::memcpy(c, t.value[i], numel_[i] * sizeof(float));
      roundToFp16(c, numel_[i]);
    }
    saved_[i] = t.value[i];
    t.value[i] = c;
  }
}

void Fp16Hooks::leave(int b) {
  auto& t = table_();
  for (size_t i : blockParams_[size_t(b)]) {
    if (!saved_[i]) continue;
    t.value[i] = saved_[i];
    saved_[i] = nullptr;
  }
  active_ = -1;
}

void Fp16Hooks::beforeForward(int b) {
  inner_.beforeForward(b);
  enter(b);
}

void Fp16Hooks::afterForward(int b) {
  leave(b);
  inner_.afterForward(b);
}

void Fp16Hooks::beforeBackward(int b) {
  inner_.beforeBackward(b);
  enter(b);
}

void Fp16Hooks::roundGrads(int b, int beforePart) {
  auto& t = table_();
  for (size_t i : blockParams_[size_t(b)])
    if (part_[i] < beforePart && i < t.grad.size() && t.grad[i]) {
      if (ops_ != nullptr) ops_->roundToFp16(t.grad[i], numel_[i]);
      else roundToFp16(t.grad[i], numel_[i]);
    }
}

void Fp16Hooks::afterBackward(int b) {
  leave(b);
  roundGrads(b, std::numeric_limits<int>::max());
  inner_.afterBackward(b);
}

void Fp16Hooks::beforeBackwardPart(int b, int part) {
  leave(b);
  roundGrads(b, part);
  inner_.beforeBackwardPart(b, part);
  enter(b);
}

}  // namespace ds::runtime
