// DeepSpeed's DynamicLossScaler.update_scale and static LossScaler, same state variables
// (cur_scale, cur_iter, last_overflow_iter, cur_hysteresis) so sequences compare one to one.
#include "runtime/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

LossScalerOptions lossScalerOptionsFor(const Fp16Config& f) {
  LossScalerOptions o;
  if (!f.enabled) return o;  // static 1
  if (f.lossScale != 0) {
    o.initScale = f.lossScale;
    return o;
  }
  o.dynamic = true;
  o.initScale = std::ldexp(1.0, f.initialScalePower);
  o.scaleWindow = f.lossScaleWindow;
  o.minScale = f.minLossScale;
  o.delayedShift = f.hysteresis;
  o.consecutiveHysteresis = f.consecutiveHysteresis;
  return o;
}

LossScaler::LossScaler(const LossScalerOptions& opts)
    : opts_(opts), curScale_(opts.initScale), curHysteresis_(opts.delayedShift) {
  if (opts_.dynamic) {
    DS_CHECK(opts_.scaleWindow > 0, "scale window {}", opts_.scaleWindow);
    DS_CHECK(opts_.delayedShift >= 1, "hysteresis {}", opts_.delayedShift);
  }
}

bool LossScaler::update(bool overflow) {
  lastMessage_.clear();
  if (!opts_.dynamic) {
    if (overflow) lastMessage_ = "OVERFLOW! Skipping step (static loss scale)";
    return overflow;
  }
  if (overflow) {
    if (opts_.delayedShift == 1 || curHysteresis_ == 1) {
      if (curScale_ == opts_.minScale && opts_.raiseErrorAtMinScale)
        throw Error(
            "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
      double next = std::max(curScale_ / opts_.scaleFactor, opts_.minScale);
      lastMessage_ =
          fmt::format("OVERFLOW! Skipping step. Attempted loss scale: {}, reducing to {}",
                      int64_t(curScale_), int64_t(next));
      curScale_ = next;
    } else {
      lastMessage_ = fmt::format(
          "OVERFLOW! Skipping step. Attempted loss scale: {}, but hysteresis is {}. Reducing "
          "hysteresis to {}",
          int64_t(curScale_), curHysteresis_, curHysteresis_ - 1);
      --curHysteresis_;
    }
    lastOverflowIter_ = curIter_;
  } else {
    if (opts_.consecutiveHysteresis) curHysteresis_ = opts_.delayedShift;
    if ((curIter_ - lastOverflowIter_) % opts_.scaleWindow == 0) {
      if (!opts_.consecutiveHysteresis) curHysteresis_ = opts_.delayedShift;
      curScale_ *= opts_.scaleFactor;
    }
  }
  ++curIter_;
  return overflow;
}

void LossScaler::setState(const State& s) {
  curScale_ = s.curScale;
  curIter_ = s.curIter;
  lastOverflowIter_ = s.lastOverflowIter;
  curHysteresis_ = s.curHysteresis;
}

}  // namespace ds::runtime
