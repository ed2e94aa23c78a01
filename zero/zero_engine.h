// ZeroEngine: the facade over one data-parallel rank's parameters, gradients and optimizer states:
// ZeRO stages 0-3 (+ cpu/nvme offload), one Stage each (zero/stage.h), behind the BlockHooks the
// model calls. Not the training loop (runtime/engine) nor the collective layer (comm).
// Invariants: every rank constructs it with the same params/options and calls the same sequence
// of hooks/steps; gradients are averaged (sum / world) over the group before the optimizer runs.
//
// Usage per optimizer step (gas micro-steps):
//   for each micro-step k: eng.beginStep(k == gas-1); model fwd/bwd calling the hooks and reading
//   eng.table() inside each block (values and grads: the model ADDS (+=) into table().grad[i]);
//   then eng.step(lr, lossScale, clipNorm).
// Gradient reduction: stage 0 allreduces and stage 1 reduce-scatters, both only on the last
// micro-step; stages 2/3 reduce-scatter every micro-step as blocks finish backward and accumulate
// into the gradient partition. reduce_scatter=false (stages 1/2, as DeepSpeed) allreduces each
// bucket instead and keeps this rank's slice. All sum over ranks then multiply by 1/world.
// Dtypes: compute=kF32: table().value = fp32 full tensors, value16 = null.
//         compute=kBF16: table().value16 = bf16 full tensors (written by the optimizer in the same
//         pass as the fp32 master update), table().value = null. Grads are fp32 in both modes.
// Step: overflow check (any inf/nan in the reduced grads skips the step, in every dtype — unlike
// DeepSpeed, which only checks fp16), global-norm clipping with DeepSpeed's coefficient
// max(1, (norm + 1e-6) / clipNorm) (clipNorm <= 0 disables), unscale by lossScale, optimizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "zero/engine_types.h"
#include "zero/param_table.h"
#include "zero/training_engine.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::zero {

// Diagnostics (tests, logs): the order in which the engine issued and waited for collectives,
// interleaved with the hooks. Recorded only after enableTrace(true) (a push_back on the training
// thread); the proof that communication overlaps computation, not a profiler.
struct TraceEvent {
  enum class Kind {
    kBeforeForward,
    kAfterForward,
    kBeforeBackward,
    kAfterBackward,  // id = block
    kBucketIssued,
    kBucketWaited,  // id = bucket number (per engine, from 0)
    kGatherIssued,
    kGatherWaited,  // id = parameter index (stage 3)
    kSwapReadIssued,
    kSwapReadWaited,  // id = parameter index (stage 3, offload_param nvme)
    kReleased,        // id = parameter index (stage 3: gathered copy freed)
  };
  Kind kind;
  int64_t id;
  // k*Waited: the backend (comm worker / file I/O) had already completed it when the training
  // thread began to wait.
  bool completedBeforeWait = false;
  // kBucketIssued: the bucket is allreduced (stage 0, reduce_scatter=false), not reduce-scattered.
  bool allreduce = false;
};

// A snapshot of what is in flight right now (any thread's view; Work completion is set by the
// comm worker).
struct PipelineState {
  size_t bucketsInFlight = 0;           // reduce buckets issued, not yet waited for
  size_t bucketsCompletedInFlight = 0;  // of those, already completed by the comm worker
  size_t gathersInFlight = 0;           // stage 3 allgathers issued, not yet waited for
  size_t gathersCompletedInFlight = 0;
  size_t liveElems = 0, peakLiveElems = 0;  // stage 3 gathered non-persistent elements
  size_t swapReadsAhead = 0;                // offload_param nvme: read-aheads not yet taken
  size_t swapReadsAheadCompleted = 0;       // of those, finished by the file layer
};

class ZeroEngine final : public TrainingEngine {
 public:
  // params in the model's order (the flat space is their concatenation); numBlocks = the number
  // of forward blocks named in ParamInfo::blocks. group == nullptr: single rank.
  ZeroEngine(std::vector<ParamInfo> params, int numBlocks, comm::ProcessGroup* group,
             ZeroOptions zopts, OptimizerOptions oopts);
  ~ZeroEngine() override;
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  // The engine reads from source only what its stage keeps: stage 3 this rank's shard of every
  // parameter (no rank ever holds the full model), stages 0-2 the full model copy (fp32 or
  // 16-bit) plus, where the optimizer owns a separate master, this rank's partition of it.
  void setParamsFrom(const ParamSource& source) override;
  // Collective for stage 3 (allgather); fills the full fp32 master params on every rank.
  void getParams(float* fullFlat) override;
  size_t numel() const override;  // Ψ: elements of the flat space (no padding)

  ParamTable& table() override;  // valid inside the hooks of a block using the param (stage 3)

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;
  void beforeBackwardPart(int block, int part) override;  // stage 3 (param_table.h)

  void beginStep(bool lastMicroStep) override;
  StepResult step(float learningRate, float lossScale, float clipNorm) override;

  MemoryReport memory() const override;

  void enableTrace(bool enabled);
  std::vector<TraceEvent> takeTrace();  // the events since the last take, in order
  PipelineState pipeline() const;
  // Whether stage-3 parameter p's allgather has been issued (in flight or gathered).
  bool gatherIssued(size_t param) const;
  // OneBitAdam / ZeroOneAdam / OneBitLamb: bytes this rank sent in compressed allreduces so far
  // (else 0).
  uint64_t compressedBytesSent() const;

  // ZeRO-Offload's overlap of the optimizer with the parameter copies: inside step(), `ready`
  // is called with flat {offset, size} regions of the model parameters (table().value or
  // value16) as soon as they hold the step's final values: after each optimizer tile of
  // updateTile elements (capped by sub_group_size) where the update writes the model parameters
  // in place (stage 0, and stages 1-2 on one rank), else once for [0, numel()) after the
  // parameter allgather (stages 1-2 on several ranks). Stage 3 gathers per block: never called.
  // Each region at most once per step, in ascending order, never on a skipped step; the values
  // stay unchanged until the next step() or setParams/load. The tiling changes no bit.
  using ParamsReady = std::function<void(size_t flatOffset, size_t size)>;
  void setParamsReady(ParamsReady ready, size_t updateTile);

  // Pipeline parallelism (runtime/engine/pipeline_run.h): the gradient norm and the overflow check
  // span every pipeline stage. In step(), the data group's sum of squares of the reduced
  // gradients, leaving out flat [skipBegin, skipEnd) (a tied parameter another stage counts), goes
  // through acrossStages, which must return the whole model's, the same on every stage. Unset
  // (the default): the engine's own group only.
  // Tensor parallelism (runtime/engine/tensor_run.h) uses the same scope over the tensor group,
  // leaving out skipRanges (the replicated parameters another tensor rank counts).
  struct NormScope {
    std::function<double(double)> acrossStages;
    size_t skipBegin = 0, skipEnd = 0;
    std::vector<std::pair<size_t, size_t>> skipRanges;  // more flat [begin, end), any order
  };
  void setNormScope(NormScope scope);

  // Checkpoints. optimizerShard(): this rank's partition of every optimizer state as ranges of
  // the full flat space (names: "fp32", "exp_avg", "exp_avg_sq" for Adam/AdamW; "fp32",
  // "momentum" for SGD). A stage-3 rank has one range per parameter; ranges never include
  // padding. loadOptimizerState reads the same names for the ranges this rank owns, so a
  // checkpoint from any world size / stage loads into any other.
  std::vector<ShardTensor> optimizerShard() const override;
  void loadOptimizerState(const std::function<void(size_t offset, size_t size,
                                                   const std::string& name, float* out)>& readRange,
                          int64_t stepCount) override;
  int64_t stepCount() const override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::zero
