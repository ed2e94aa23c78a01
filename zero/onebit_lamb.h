// OneBitLamb: DeepSpeed's 1-bit LAMB (optimizer.type OneBitLamb, runtime/fp16/onebit/lamb.py) for
// ZeRO stage 0 (every rank holds every state whole). Not the compressed allreduce
// (comm/compressed_allreduce.h) and not plain Lamb (zero/cpu_lamb.h, whose arithmetic the warm-up
// shares). Invariant: every rank ends every step with bitwise the same states and parameters (the
// compressed average is bitwise alike everywhere and every reduction below has a fixed order).
//
// Steps 1..freeze_step (warm-up): exact gradients, plain LAMB without bias correction (our Lamb
//   with bias_correction false: u = m / (sqrt(v) + eps) + wd p, p -= lr r u, r = ||p|| / ||u||
//   clamped to [min_coeff, max_coeff]); every ratio r != 1 goes into the parameter's
//   lamb_coeff_freeze = coeff_beta * lamb_coeff_freeze + (1 - coeff_beta) r. At freeze_step the
//   variance is copied into exp_avg_sq_fresh; exp_avg_sq stays frozen from then on.
// Later steps (compressed): each rank folds its own gradient into the momentum, scaled per
//   parameter by scaling_coeff (fixed at the first compressed step: the mean over parameters of
//   rms(m) over this parameter's rms(m), so one 1-bit scale fits the whole flat momentum); the
//   flat momentum is 1-bit averaged with error feedback and scaled back. The gradient it implies,
//   (m - beta1 m_last) / (1 - beta1), updates exp_avg_sq_fresh; the frozen coefficient is scaled
//   by factor = max(denom / denom_fresh) (blended toward 1 by ||m/denom|| / ||u|| under weight
//   decay), clamped to [factor_min, factor_max] and to last_factor * (1 +- factor_threshold):
//   p -= lr * lamb_coeff_freeze * factor * u.
// DeepSpeed accepts bias_correction and eps_inside_sqrt and applies neither; so does this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/compressed_allreduce.h"
#include "zero/compressed_optimizer.h"

namespace ds::zero {

class OneBitLamb final : public CompressedOptimizer {
 public:
  // params: every parameter's extent in flat order (decay: weight decay applies to it).
  OneBitLamb(const OptimizerOptions& options, comm::ProcessGroup* group,
             std::vector<OptimizerPartition::Segment> params);

  bool exactGradients(int64_t stepNo) const override { return stepNo <= opt_.freezeStep; }
  bool plainAdam(int64_t /*stepNo*/) const override { return false; }
  void step(int64_t stepNo, const float* grads, float gradScale, float learningRate, float* params,
            float* expAvg, float* expAvgSq) override;
  void finishStep(int64_t /*stepNo*/, const float* /*params*/) override {}
  void restore(int64_t stepsDone, const float* params) override;
  uint64_t bytesSent() const override { return allreduce_.bytesSent(); }
  std::vector<ZeroEngine::ShardTensor> extraStates() const override;
  void loadExtraStates(const RangeReader& readRange) override;

  // Per parameter (tests, diagnostics): the frozen coefficient, the last factor, the momentum
  // scaling (0 until the first compressed step), the coefficient of the last step.
  // Kept as floats (computed in double) so that a checkpoint holds them exactly.
  struct Coeffs {
    float freeze = 0, lastFactor = 1, scaling = 0, applied = 1;
  };
  const std::vector<Coeffs>& coeffs() const { return coeffs_; }
  const std::vector<float>& expAvgSqFresh() const { return fresh_; }
  const comm::CompressedAllreduce& allreduce() const { return allreduce_; }

 private:
  void warmupStep(int64_t stepNo, const float* grads, float gradScale, float learningRate,
                  float* params, float* expAvg, float* expAvgSq);
  void compressedStep(const float* grads, float gradScale, float learningRate, float* params,
                      float* expAvg, const float* expAvgSq);
  void setScaling(const float* expAvg);
  // The factor of parameter `index` from its sums, clamped by DeepSpeed's rules.
  double factorOf(size_t index, double prelimSq, double updateSq, double ratioMax) const;

  OptimizerOptions opt_;
  std::vector<OptimizerPartition::Segment> params_;
  size_t count_ = 0;
  comm::CompressedAllreduce allreduce_;  // one segment: the whole flat momentum
  std::vector<Coeffs> coeffs_;
  bool scaled_ = false;          // the scaling coefficients are set (first compressed step)
  std::vector<float> fresh_;     // exp_avg_sq_fresh
  std::vector<float> lastStep_;  // the momentum before this step's update (compressed steps)
};

}  // namespace ds::zero
