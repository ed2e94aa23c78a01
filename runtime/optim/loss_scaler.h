// Loss scaling as DeepSpeed does it (deepspeed/runtime/fp16/loss_scaler.py): a static scale, or
// the dynamic scaler (start 2^initial_scale_power, halve on overflow once `hysteresis` overflows
// were seen, double after `window` clean steps since the last overflow, never below min). An
// overflowing step is skipped by the caller. bf16/fp32: a static scale of 1, never skips.
// Not thread-safe; every rank holds one and feeds it the same (all-reduced) overflow flags.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/config/plan.h"

namespace ds::runtime {

struct LossScalerOptions {
  bool dynamic = false;
  double initScale = 1;  // static: the scale; dynamic: the starting scale
  double scaleFactor = 2;
  int64_t scaleWindow = 1000;
  double minScale = 1;
  int delayedShift = 1;  // hysteresis
  bool consecutiveHysteresis = false;
  bool raiseErrorAtMinScale = true;
};

// From the fp16 block: loss_scale 0 -> dynamic with the documented defaults (2^16, 1000, 2, 1);
// otherwise static loss_scale. fp16 disabled -> static 1.
LossScalerOptions lossScalerOptionsFor(const Fp16Config& fp16);

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& opts);

  double scale() const { return curScale_; }
  bool dynamic() const { return opts_.dynamic; }
  // After each optimizer step with the global overflow flag. Returns true if the step must be
  // skipped (overflow). Dynamic only: throws ds::Error "Current loss scale already at minimum -
  // cannot decrease scale anymore. Exiting run." on an overflow at min scale.
  // A static scaler returns `overflow` (the caller skips) and never changes its scale.
  bool update(bool overflow);
  // The message logged for the last overflow ("OVERFLOW! Skipping step. Attempted loss scale:
  // 256, reducing to 128"), empty if the last update was clean.
  const std::string& lastMessage() const { return lastMessage_; }

  // Checkpointed state.
  struct State {
    double curScale = 1;
    int64_t curIter = 0, lastOverflowIter = -1;
    int curHysteresis = 1;
  };
  State state() const { return {curScale_, curIter_, lastOverflowIter_, curHysteresis_}; }
  void setState(const State& s);
  int64_t curIter() const { return curIter_; }
  int curHysteresis() const { return curHysteresis_; }

 private:
  LossScalerOptions opts_;
  double curScale_;
  int64_t curIter_ = 0, lastOverflowIter_ = -1;
  int curHysteresis_;
  std::string lastMessage_;
};

}  // namespace ds::runtime
