// BlockedStage: ZeRO stage 3: each param is split on its own into world chunks, rank r keeps chunk
// r of each (ParamStore); a block's params are gathered before it runs and released after
// (ParamGatherer); per-param grads are reduce-scattered in reduce_bucket_size buckets as blocks
// finish backward, every micro-step; a rowSharded param (param_table.h: GPT-2's wte) is split by
// whole rows, never gathered nor reduced (the model computes on this rank's rows and writes the
// data-parallel sum of their gradient in place). A block whose backward has parts
// (ParamInfo::backwardPart) releases and reduces each part's params as the next part begins and
// prefetches the previous block's first part at its last part. Not stages 0-2. Invariant: local
// index localOffset(p) + i holds element r*chunk(p) + i of p.
#pragma once

#include <memory>
#include <vector>

#include "zero/buffer_pool.h"
#include "zero/dp_comm.h"
#include "zero/mapped_floats.h"
#include "zero/param_gatherer.h"
#include "zero/param_store.h"
#include "zero/partition.h"
#include "zero/stage.h"
#include "zero/transient_grads.h"

namespace ds::zero {

class BlockedStage final : public Stage {
 public:
  explicit BlockedStage(const StageContext& ctx);

  float* masterAlias() override { return store_->masterAlias(); }
  void setParams(const TrainingEngine::ParamSource& source) override;
  void getParams(float* fullFlat, OptimizerPartition& optimizer) override;

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;
  void beforeBackwardPart(int block, int part) override;

  void beginMicroStep(bool /*lastMicroStep*/) override {}  // reduces every micro-step
  void finishReduction() override;
  const float* localGrads() override { return gradPart_; }
  bool gradsReplicated() const override { return false; }
  void zeroGrads() override;

  ModelParamSink modelSink(bool masterOwned) override { return store_->sink(masterOwned); }
  void writeModelRange(const LocalRange& range, const float* values) override;
  void refreshModelParams() override;
  ParamsFinal paramsFinal() const override { return ParamsFinal::kNever; }

  void addMemory(MemoryReport& report) const override;
  void addPipeline(PipelineState& state) override { gatherer_.addPipeline(state); }
  bool gatherIssued(size_t param) const override;

 private:
  void bindRowSharded();
  void gatherBlock(int block, int ahead, int step);
  void waitPart(int block, int part);
  void queueGrad(size_t param);
  void flushGrads();
  void flushLarge(size_t param);

  StageContext ctx_;
  Stage3Layout layout_;
  std::unique_ptr<ParamStore> store_;
  BufferPool<float> pool32_;     // shared by gathered params and transient grads
  std::unique_ptr<DpComm> hpz_;  // zero_hpz_partition_size > 1: this rank's host group
  ParamGatherer gatherer_;
  TransientGrads transient_;
  // [localSize], accumulated over micro-steps: in gradMemory_, or with offload_optimizer on nvme
  // in gradFile_ (a file-backed mapping under the nvme_path, as ZeRO-Infinity swaps gradients).
  std::vector<float> gradMemory_;
  std::unique_ptr<MappedFloats> gradFile_;
  float* gradPart_ = nullptr;
  std::vector<size_t> queued_;  // params queued for the next reduce-scatter bucket
  size_t queuedElems_ = 0;
  size_t bucket_ = 1;                       // elements per reduce bucket: effectiveReduceBucket
  size_t gradBound_ = 0, gatherBound_ = 0;  // transient_bounds.h, elements
  int partsBegun_ = 0;  // backward parts of the current block begun (beforeBackwardPart)
};

}  // namespace ds::zero
