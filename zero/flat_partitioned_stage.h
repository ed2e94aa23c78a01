// FlatPartitionedStage: ZeRO stages 1 and 2 over the FlatLayout: rank r owns the r-th equal
// slice of the padded flat space for the optimizer. Stage 1 keeps full gradients and reduces
// them on the last micro-step; stage 2 keeps only the gradient partition and reduces the
// per-parameter gradients in buckets as blocks finish backward, every micro-step. Buckets are
// reduce-scattered (or, with reduce_scatter=false, allreduced keeping this rank's slice); after
// the optimizer the parameters are allgathered in place or in allgather_bucket_size chunks.
// Not stage 0 or 3. Invariant: the local partition is [partStart_, partStart_ + localSize()).
#pragma once

#include <vector>

#include "zero/buffer_pool.h"
#include "zero/flat_stage.h"
#include "zero/transient_grads.h"

namespace ds::zero {

class FlatPartitionedStage final : public FlatStage {
 public:
  explicit FlatPartitionedStage(const StageContext& ctx);

  void getParams(float* fullFlat, OptimizerPartition& optimizer) override;
  const float* localGrads() override;
  bool gradsReplicated() const override { return false; }
  void refreshModelParams() override;
  void addMemory(MemoryReport& report) const override;

 protected:
  void emitBucket(size_t begin, size_t end) override;
  void allocGrads(int block) override;
  void clearGrads() override;

 private:
  const float* fillBucket(int slot, size_t begin, size_t end);
  void emitAllreduce(int slot, size_t begin, size_t end);
  void emitReduceScatter(int slot, const float* input, size_t begin, size_t end);

  bool partitionGrads_;                 // stage 2
  std::vector<float> fullGrads_;        // stage 1: [padded], accumulated over micro-steps
  std::vector<float> gradPart_;         // stage 2: [localSize], accumulated over micro-steps
  BufferPool<float> pool_;
  TransientGrads transient_;            // stage 2: per-parameter grads during backward
  size_t gatherChunk_ = 0;              // allgather chunk per rank (elements)
  std::vector<uint16_t> gatherStaging_; // gatherChunk_ * world model-dtype elements, when
                                        // the chunk is smaller than the partition
};

}  // namespace ds::zero
