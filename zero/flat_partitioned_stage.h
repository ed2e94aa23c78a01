// FlatPartitionedStage: ZeRO stages 1 and 2 (rank r owns the r-th slice of the padded flat space):
// stage 1 keeps full grads reduced on the last micro-step, stage 2 only the gradient partition,
// reduced every micro-step in buckets of whole parameters as they complete (ParamBuckets; with
// reduce_scatter=false, flat ranges allreduced); stage 1's flat buckets are reduce-scattered (or
// allreduced) in place; params allgathered after the optimizer. Stage 2 takes a gradByRows
// parameter's gradient by row chunks (GradRowSink, param_table.h), each chunk reduced as its own
// bucket, so no transient buffer of that parameter is held (GPT-2's tied wte would otherwise be
// held whole from the head's backward to the embedding's). Not stage 0 or 3.
// Invariant: the local partition is [partStart_, partStart_ + localSize()) of the padded space.
#pragma once

#include <memory>
#include <vector>

#include "zero/buffer_pool.h"
#include "zero/flat_stage.h"
#include "zero/param_buckets.h"
#include "zero/transient_grads.h"

namespace ds::zero {

class FlatPartitionedStage final : public FlatStage, private GradRowSink {
 public:
  explicit FlatPartitionedStage(const StageContext& ctx);
  ~FlatPartitionedStage() override;

  // Stage 2 with reduce_scatter: gradients go out by whole parameters (ParamBuckets).
  void afterBackward(int block) override;
  void finishReduction() override;

  void getParams(float* fullFlat, OptimizerPartition& optimizer) override;
  const float* localGrads() override;
  bool gradsReplicated() const override { return false; }
  void refreshModelParams() override;
  ParamsFinal paramsFinal() const override;
  void addMemory(MemoryReport& report) const override;

 protected:
  void emitBucket(size_t begin, size_t end) override;
  void allocGrads(int block) override;
  void clearGrads() override;

 private:
  // GradRowSink (stage 2 with whole-parameter buckets, ParamBuckets).
  size_t rowsPerChunk(size_t param) const override;
  float* beginRows(size_t param, size_t first, size_t rows) override;
  void endRows(size_t param, size_t first, size_t rows) override;
  void takeGradsByRows();
  bool byRows(size_t param) const { return !byRows_.empty() && byRows_[param]; }

  const float* fillBucket(int slot, size_t begin, size_t end);
  void reduceSingle(size_t begin, size_t end);
  void emitAllreduce(int slot, size_t begin, size_t end);
  void emitReduceScatter(int slot, const float* input, size_t begin, size_t end);

  bool partitionGrads_;           // stage 2
  std::vector<float> fullGrads_;  // stage 1: [padded], accumulated over micro-steps
  std::vector<float> gradPart_;   // stage 2: [localSize], accumulated over micro-steps
  BufferPool<float> pool_;
  TransientGrads transient_;                    // stage 2: per-parameter grads during backward
  size_t transientBound_ = 0;                   // stage 2: transientGradBound, elements
  std::unique_ptr<ParamBuckets> paramBuckets_;  // stage 2 with reduce_scatter
  size_t gatherChunk_ = 0;                      // allgather chunk per rank (elements)
  std::vector<uint16_t> gatherStaging_;         // gatherChunk_ * world model-dtype elements, when
                                                // the chunk is smaller than the partition
  std::vector<char> byRows_;       // per param: its gradient comes by rows (empty: none does)
  int rowSlot_ = -1;               // the bucket slot of the row chunk being written
  std::vector<size_t> rowsGiven_;  // per by-rows param: rows given in this micro-step
};

}  // namespace ds::zero
