// CompressedAdam: 1-bit Adam (optimizer.type OneBitAdam) and 0/1 Adam (ZeroOneAdam), DeepSpeed's
// runtime/fp16/onebit/{adam,zoadam}.py, for ZeRO stage 0 (every rank holds every state whole).
// It decides per step whether the gradients are allreduced exactly (exactGradients) or stay local,
// and runs the steps that are not plain Adam: momentum averaged by comm::CompressedAllreduce with
// the variance frozen. Not the plain Adam steps: the engine gives those to OptimizerPartition
// (bitwise our AdamW). Invariant: every rank makes the same decisions from the step count alone,
// so a resumed run replays the schedule (DeepSpeed restarts it); the error buffers are not saved.
//
// OneBitAdam: steps 1..freeze_step exact Adam; then each rank folds its own gradient into the
//   momentum, the momentum is 1-bit averaged, the variance stays as at freeze_step.
// ZeroOneAdam: until var_freeze_step, variance steps (exact gradients, Adam) at an interval that
//   doubles after every var_update_scaler of them; between them the 1-bit averaged gradient
//   updates the momentum only. After var_freeze_step: local steps, every rank updating its own
//   parameters with its own gradient, synchronised every local-step interval (1-bit average of
//   the accumulated updates, which also re-estimates the momentum); the interval doubles every
//   local_step_scaler steps up to local_step_clipper.
// Bias correction (bias_correction, default true): 1 - beta1^t for the momentum, 1 - beta2^k
// with k the variance's own update count. DeepSpeed accepts the key but never applies it;
// bias_correction: false gives its arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/compressed_allreduce.h"
#include "zero/compressed_optimizer.h"

namespace ds::zero {

class CompressedAdam final : public CompressedOptimizer {
 public:
  // segments: parameter sizes in flat order (each compressed with its own scales); decayRuns:
  // the local runs weight decay applies to (empty: everywhere).
  CompressedAdam(const OptimizerOptions& options, comm::ProcessGroup* group,
                 std::vector<size_t> segments, std::vector<OptimizerPartition::Run> decayRuns);

  // See CompressedOptimizer. finishStep advances the schedule (0/1 Adam keeps params as the
  // anchor of its first local steps); restore also clears the local-step state.
  bool exactGradients(int64_t stepNo) const override;
  bool plainAdam(int64_t stepNo) const override;
  void step(int64_t stepNo, const float* grads, float gradScale, float learningRate, float* params,
            float* expAvg, float* expAvgSq) override;
  void finishStep(int64_t stepNo, const float* params) override;
  void restore(int64_t stepsDone, const float* params) override;

  uint64_t bytesSent() const override { return allreduce_.bytesSent(); }
  uint64_t compressedCalls() const { return allreduce_.calls(); }
  const comm::CompressedAllreduce& allreduce() const { return allreduce_; }

 private:
  struct Coeffs {
    float stepSize, bc2RsqrtInv, decoupled;  // -lr/(1-b1^t), 1/sqrt(1-b2^k), -lr*wd
  };
  Coeffs coeffs(int64_t stepNo, int64_t varSteps, float learningRate) const;
  void momentum(const float* grads, float gradScale, float* expAvg, float* expAvgSq);
  void momentumRange(size_t begin, size_t end, const float* grads, float gradScale, float* expAvg,
                     float* expAvgSq) const;
  void applyUpdate(const Coeffs& coeff, float* params, const float* expAvg, const float* expAvgSq);
  void updateRange(size_t begin, size_t end, bool decay, const Coeffs& coeff, float* params,
                   const float* expAvg, const float* expAvgSq) const;
  template <class Fn>
  void forEachRunIn(size_t first, size_t last, Fn visit) const;
  void localSync(float* params, float* expAvg, const float* expAvgSq, int64_t stepNo);
  template <class Fn>
  void forEachRun(Fn visit) const;

  OptimizerOptions opt_;
  bool zeroOne_;
  size_t count_ = 0;
  std::vector<OptimizerPartition::Run> decayRuns_;
  comm::CompressedAllreduce allreduce_;
  std::vector<float> scratch_;  // gradients to compress; local-step accumulated updates
  std::vector<float> anchor_;   // 0/1 Adam: the parameters at the last synchronisation
  // Schedule (all ranks alike; a pure function of the steps taken).
  int64_t varSteps_ = 0;  // variance updates so far
  int64_t varInterval_ = 1, varCounter_ = 0, localInterval_ = 1, localCounter_ = 0;
  bool frozen_ = false;
  double localLrs_ = 0;  // sum of lr / (1 - beta1^t) over the local steps since the last sync
};

}  // namespace ds::zero
