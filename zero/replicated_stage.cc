// ReplicatedStage: stage 0's full gradients and their allreduce buckets.
#include "zero/replicated_stage.h"

#include <algorithm>

#include "zero/bucket_queue.h"
#include "zero/dp_comm.h"
#include "zero/optimizer_partition.h"
#include "zero/param_index.h"

namespace ds::zero {

ReplicatedStage::ReplicatedStage(const StageContext& ctx)
    : FlatStage(ctx, /*reduceEveryMicroStep=*/false, /*partStart=*/0) {
  const size_t numel = ctx_.index.numel();
  localSize_ = optimizerCount_ = numel;
  ranges_.push_back({0, 0, numel});
  grads_.assign(layout_.padded(), 0.f);
  for (size_t param = 0; param < ctx_.index.count(); ++param)
    ctx_.table.grad[param] = &grads_[ctx_.index.offset(param)];
}

void ReplicatedStage::getParams(float* fullFlat, OptimizerPartition& optimizer) {
  optimizer.read(0, 0, ctx_.index.numel(), fullFlat);
}

void ReplicatedStage::emitBucket(size_t begin, size_t end) {
  if (!allreduce_) return;
  auto work = ctx_.comm.allreduceSum(grads_.data() + begin, end - begin);
  ctx_.buckets.issue(work, nullptr, -1, /*allreduce=*/true);
}

void ReplicatedStage::clearGrads() { std::fill(grads_.begin(), grads_.end(), 0.f); }

void ReplicatedStage::addMemory(MemoryReport& report) const {
  FlatStage::addMemory(report);
  addBytes(report, MemKind::kGrads, MemPlace::kDevice, grads_.size() * sizeof(float));
  // The peers' gradient slices this rank reduces in place through its mappings of them.
  if (grads_.shared() && allreduce_) {
    addBytes(report, MemKind::kBuffers, MemPlace::kDevice,
             ctx_.comm.mappedPeerBytes(grads_.size() * sizeof(float)));
  }
}

}  // namespace ds::zero
