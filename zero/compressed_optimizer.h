// CompressedOptimizer: what the engine asks of DeepSpeed's 1-bit optimizers (OneBitAdam,
// ZeroOneAdam: zero/onebit_adam.h; OneBitLamb: zero/onebit_lamb.h) at ZeRO stage 0, where every
// rank holds every state whole. Not the compressed allreduce (comm/compressed_allreduce.h).
// Invariant: every rank makes the same decisions from the step count alone, so a resumed run
// replays the schedule; the compression error buffers are never saved (DeepSpeed resets them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zero/optimizer_partition.h"
#include "zero/zero_engine.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::zero {

class CompressedOptimizer {
 public:
  virtual ~CompressedOptimizer() = default;

  // Whether step stepNo (1-based) takes the exactly allreduced gradients (else each rank's own).
  virtual bool exactGradients(int64_t stepNo) const = 0;
  // Whether step stepNo is plain Adam(W) with step count stepNo (the engine runs it in
  // OptimizerPartition); else the engine calls step().
  virtual bool plainAdam(int64_t stepNo) const = 0;
  // Step stepNo over the fp32 master: grads * gradScale are the averaged gradients when
  // exactGradients(stepNo), else this rank's own. Collective when it communicates.
  virtual void step(int64_t stepNo, const float* grads, float gradScale, float learningRate,
                    float* params, float* expAvg, float* expAvgSq) = 0;
  // After every taken step stepNo (plain ones included); params: the updated fp32 master.
  virtual void finishStep(int64_t stepNo, const float* params) = 0;
  // A load at stepsDone (after loadExtraStates): replay the schedule, clear the errors.
  virtual void restore(int64_t stepsDone, const float* params) = 0;
  virtual uint64_t bytesSent() const = 0;

  // States beyond OptimizerPartition's fp32 / exp_avg / exp_avg_sq, saved in checkpoints in the
  // flat parameter space (stage 0: local offsets are flat offsets).
  virtual std::vector<ZeroEngine::ShardTensor> extraStates() const { return {}; }
  using RangeReader = std::function<void(size_t, size_t, const std::string&, float*)>;
  virtual void loadExtraStates(const RangeReader& /*readRange*/) {}
};

// The optimizer for options.type (OneBitAdam, ZeroOneAdam or OneBitLamb). params: every
// parameter's extent in flat order (each compressed on its own by the Adams; Lamb's trust ratios
// are per parameter); decayRuns: where weight decay applies (empty: everywhere).
std::unique_ptr<CompressedOptimizer> makeCompressedOptimizer(
    const OptimizerOptions& options, comm::ProcessGroup* group,
    const std::vector<OptimizerPartition::Segment>& params,
    std::vector<OptimizerPartition::Run> decayRuns);

}  // namespace ds::zero
