// FlatStage: the flat model parameters of stages 0-2 and the reduction frontier.
#include "zero/flat_stage.h"

#include <algorithm>
#include <cstring>

#include "zero/dp_comm.h"
#include "zero/param_index.h"

namespace ds::zero {

FlatStage::FlatStage(const StageContext& ctx, bool reduceEveryMicroStep, size_t partStart)
    : ctx_(ctx),
      layout_(ctx.index.numel(), ctx.comm.world()),
      half_(ctx.options.halfCompute()),
      partStart_(partStart),
      bucket_(std::max<size_t>(ctx.options.reduceBucketSize, 1)),
      reduceEveryMicroStep_(reduceEveryMicroStep) {
  if (half_) params16_.assign(layout_.padded(), 0);
  else params32_.assign(layout_.padded(), 0.f);
  for (size_t param = 0; param < ctx_.index.count(); ++param) {
    const size_t offset = ctx_.index.offset(param);
    if (half_) ctx_.table.value16[param] = reinterpret_cast<const ds::bf16*>(&params16_[offset]);
    else ctx_.table.value[param] = &params32_[offset];
  }
  complete_.assign(ctx_.index.count(), 0);
  resetFrontier();
}

float* FlatStage::masterAlias() { return half_ ? nullptr : params32_.data() + partStart_; }

// fp32: straight into the model copy; 16-bit: through one piece-sized fp32 staging buffer.
void FlatStage::setParams(const TrainingEngine::ParamSource& source) {
  const size_t numel = ctx_.index.numel();
  if (!half_) {
    if (numel) source(0, numel, params32_.data());
    return;
  }
  std::vector<float> piece(std::min(numel, TrainingEngine::kParamSourcePiece));
  for (size_t done = 0; done < numel; done += piece.size()) {
    const size_t count = std::min(piece.size(), numel - done);
    source(done, count, piece.data());
    convertTo16(piece.data(), {ctx_.options.compute, params16_.data() + done}, count);
  }
}

char* FlatStage::paramBytes() {
  return half_ ? reinterpret_cast<char*>(params16_.data())
               : reinterpret_cast<char*>(params32_.data());
}

size_t FlatStage::paramBufferBytes() const {
  return params32_.size() * sizeof(float) + params16_.size() * sizeof(uint16_t);
}

ModelParamSink FlatStage::modelSink(bool masterOwned) {
  ModelParamSink sink;
  float* copy32 = nullptr;  // model fp32 params fed from a separate master
  if (half_) sink.out16 = {ctx_.options.compute, params16_.data() + partStart_};
  else if (masterOwned) copy32 = params32_.data() + partStart_;
  sink.afterTile = [copy32](size_t offset, size_t count, const float* master) {
    if (copy32) std::memcpy(copy32 + offset, master, count * sizeof(float));
  };
  return sink;
}

void FlatStage::writeModelRange(const LocalRange& range, const float* values) {
  if (half_)
    convertTo16(values, {ctx_.options.compute, params16_.data() + range.flatOffset}, range.size);
  else std::memcpy(params32_.data() + range.flatOffset, values, range.size * sizeof(float));
}

void FlatStage::addMemory(MemoryReport& report) const {
  addBytes(report, MemKind::kParams, MemPlace::kDevice, paramBufferBytes());
}

void FlatStage::afterBackward(int block) {
  if (reduceNow()) {
    for (size_t param : ctx_.index.completeAfter(block)) complete_[param] = 1;
    advanceFrontier(false);
  }
  // backward is over: the rest goes out now
  if (block == 0 && reduceNow() && high_ > 0) advanceFrontier(true);
}

void FlatStage::beginMicroStep(bool lastMicroStep) {
  lastMicro_ = lastMicroStep;
  resetFrontier();
}

void FlatStage::finishReduction() {
  lastMicro_ = true;  // whatever was announced, the reduction completes now
  std::fill(complete_.begin(), complete_.end(), 1);
  if (high_ > 0) advanceFrontier(true);
}

void FlatStage::zeroGrads() {
  clearGrads();
  resetFrontier();
}

void FlatStage::resetFrontier() {
  std::fill(complete_.begin(), complete_.end(), 0);
  low_ = high_ = layout_.padded();
}

// Extends [low_, high_) downward over completed params (params are laid out in order; the
// padding tail above numel counts as complete).
void FlatStage::lowerFrontier() {
  while (low_ > 0) {
    if (low_ > ctx_.index.numel()) {
      low_ = ctx_.index.numel();
      continue;
    }
    const size_t below = ctx_.index.paramAt(low_ - 1);
    if (!complete_[below]) break;
    low_ = ctx_.index.offset(below);
  }
}

// Emits full buckets from the top of [low_, high_); final: everything down to 0.
void FlatStage::advanceFrontier(bool final) {
  const size_t bucket = bucket_;
  if (final) low_ = 0;
  else lowerFrontier();
  while (high_ > low_ && (high_ - low_ >= bucket || final)) {
    const size_t begin = high_ >= bucket ? std::max(low_, high_ - bucket) : low_;
    emitBucket(begin, high_);
    high_ = begin;
  }
}

}  // namespace ds::zero
