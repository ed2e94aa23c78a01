// ReplicatedStage: ZeRO stage 0, plain data parallelism. Every rank holds the full parameters,
// the full gradients and the full optimizer states; gradient buckets are allreduced in place
// on the last micro-step. Not partitioned in any way (FlatPartitionedStage is). Invariant:
// after the reduction every rank holds the same summed gradients, so the norm needs no
// collective. The gradients live in shared host memory (comm/shared_host_buffer.h): on one host
// the shared-memory transport reduces them in place through the peers' mappings.
#pragma once

#include "comm/shared_host_buffer.h"
#include "zero/flat_stage.h"

namespace ds::zero {

class ReplicatedStage final : public FlatStage {
 public:
  explicit ReplicatedStage(const StageContext& ctx);

  void getParams(float* fullFlat, OptimizerPartition& optimizer) override;
  const float* localGrads() override { return grads_.data(); }
  bool gradsReplicated() const override { return true; }
  void refreshModelParams() override {}
  ParamsFinal paramsFinal() const override { return ParamsFinal::kPerTile; }
  void addMemory(MemoryReport& report) const override;
  // false: the buckets are not allreduced; every rank keeps its own gradients (1-bit Adam /
  // 0/1 Adam steps that communicate compressed). Set before the step's last micro-step.
  void setAllreduce(bool enabled) { allreduce_ = enabled; }

 protected:
  void emitBucket(size_t begin, size_t end) override;
  void clearGrads() override;

 private:
  comm::SharedArray<float> grads_;  // [padded] full gradients, accumulated over micro-steps
  bool allreduce_ = true;
};

}  // namespace ds::zero
