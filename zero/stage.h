// Stage: the interface ZeroEngine drives, one implementation per ZeRO strategy: ReplicatedStage
// (0), FlatPartitionedStage (1, 2), BlockedStage (3). A stage owns the model's parameter and
// gradient buffers and fills the gradient buckets; not the optimizer, the step arithmetic
// (grad_check) or the bucket machinery (BucketQueue). Invariant: ranges() maps the optimizer's
// local index space [0, localSize()) onto the flat space (no padding), fixed for its lifetime.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "zero/cpu_adam.h"
#include "zero/zero_engine.h"

namespace ds::zero {

class BucketQueue;
class DpComm;
class OptimizerPartition;
class ParamIndex;
class Tracer;

// What every stage shares with the engine (all owned by ZeroEngine, outliving the stage).
struct StageContext {
  const ParamIndex& index;
  const ZeroOptions& options;
  DpComm& comm;
  ParamTable& table;
  BucketQueue& buckets;
  Tracer& tracer;
};

// A run of the optimizer's local index space and where it sits in the flat space.
struct LocalRange {
  size_t flatOffset = 0, localOffset = 0, size = 0;
};

// Where the optimizer puts the updated model parameters: a 16-bit copy written in the update
// pass (out16), and/or afterTile(localOffset, count, master) after each tile.
struct ModelParamSink {
  Half16Out out16;
  std::function<void(size_t, size_t, const float*)> afterTile;
};

class Stage {
 public:
  virtual ~Stage() = default;

  size_t localSize() const { return localSize_; }            // optimizer partition length
  size_t optimizerCount() const { return optimizerCount_; }  // prefix the optimizer updates
  const std::vector<LocalRange>& ranges() const { return ranges_; }
  // The stage's fp32 model parameters of the local partition when the optimizer may keep its
  // master there (fp32 compute, params in memory); else null.
  virtual float* masterAlias() = 0;

  // The model parameters this stage keeps, read from source (TrainingEngine::ParamSource; the
  // same on every rank). getParams is collective.
  virtual void setParams(const TrainingEngine::ParamSource& source) = 0;
  virtual void getParams(float* fullFlat, OptimizerPartition& optimizer) = 0;

  virtual void beforeForward(int block) = 0;
  virtual void afterForward(int block) = 0;
  virtual void beforeBackward(int block) = 0;
  virtual void afterBackward(int block) = 0;
  // Between backward parts of block (ParamInfo::backwardPart); only stage 3 acts on it.
  virtual void beforeBackwardPart(int /*block*/, int /*part*/) {}

  virtual void beginMicroStep(bool lastMicroStep) = 0;
  // step(): issue whatever reduction backward left (the buckets are drained by the caller).
  virtual void finishReduction() = 0;
  virtual const float* localGrads() = 0;     // [optimizerCount()] reduced, summed gradients
  virtual bool gradsReplicated() const = 0;  // every rank holds all of them (stage 0)
  virtual void zeroGrads() = 0;              // after a step (taken or skipped)

  virtual ModelParamSink modelSink(bool masterOwned) = 0;
  // A load: the model parameters of one local range from master values, then refresh.
  virtual void writeModelRange(const LocalRange& range, const float* values) = 0;
  virtual void refreshModelParams() = 0;  // after the optimizer or a load (collective)
  // When the model parameters of a local range hold the optimizer's new values: kPerTile, once
  // the tile's update and modelSink ran (written in place, refresh changes nothing);
  // kAfterRefresh, all of them once refreshModelParams() returned (flat, allgathered); kNever,
  // not as flat host values at all (stage 3 gathers per block).
  enum class ParamsFinal { kPerTile, kAfterRefresh, kNever };
  virtual ParamsFinal paramsFinal() const = 0;

  virtual void addMemory(MemoryReport& report) const = 0;
  virtual void addPipeline(PipelineState& state) = 0;
  virtual bool gatherIssued(size_t param) const = 0;

 protected:
  size_t localSize_ = 0;
  size_t optimizerCount_ = 0;
  std::vector<LocalRange> ranges_;
};

inline void addBytes(MemoryReport& report, MemKind kind, MemPlace place, size_t bytes) {
  report.bytes[int(kind)][int(place)] += bytes;
}

}  // namespace ds::zero
