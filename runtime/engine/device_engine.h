// DeviceEngine: ZeRO stages 0-3 with every buffer in one Ops' memory (the GPU's, or the host's for
// CpuOps in tests): the model's parameters (fp32, or bf16 plus an fp32 master), the fp32
// gradients, and Adam/SGD states, each one flat allocation sized up front. Stages 0-2: in the
// last micro-step of a step, afterBackward(b) issues the reduction of every parameter whose
// gradient is final (b is the smallest block that reads it), coalesced into buckets of contiguous
// parameters of up to reduce_bucket_size elements: allreduce at stage 0, reduce-scatter into this
// rank's partition (in place) at stages 1-2; the collectives run while backward goes on (NCCL on
// its stream; gloo and mpi on host memory on their worker; staged device buffers synchronously).
// Stage 3: only this rank's partition of every buffer (zero::Stage3Layout, per parameter, as the
// host engine), the blocks' parameters gathered and their gradients reduce-scattered every
// micro-step by DeviceStage3 (device_stage3.h). step() reduces what the hooks did not, waits on
// every bucket in issue order, checks overflow and the global norm, and runs the fused optimizer
// kernel on this rank's partition; stages 1-2 then all-gather the updated partition, stage 3
// regathers its persistent parameters. Not offload (the host ZeroEngine with a DeviceMirror). fp16
// mode runs here either natively (compute kF16 on a GPU: fp16 parameter copies written after each
// optimizer step, fp16 activations; the trainer's Fp16Hooks round the gradients) or emulated
// (compute kF32: Fp16Hooks also round the weights each block reads); the overflow check below
// skips the step (docs/gpu.md "Precision"). Invariant:
// identical calls on every rank; at stages 1-2 the partition of rank r is [r*shard,
// min((r+1)*shard, numel)) with shard = ceil(numel / world); a parameter is reduced at most once
// per step (stages 2-3: per micro-step), after its last gradient contribution.
#pragma once

#include <memory>
#include <vector>

#include "comm/work.h"
#include "runtime/tensor/ops.h"
#include "zero/engine_trace.h"
#include "zero/training_engine.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

class DeviceStage3;

class DeviceEngine final : public zero::TrainingEngine {
 public:
  // params in the model's order, with decay flags; group == nullptr: one rank. Throws
  // NotSupported for what it does not implement (offload, Lamb), naming the key.
  DeviceEngine(Ops& ops, std::vector<zero::ParamInfo> params, comm::ProcessGroup* group,
               const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts);
  ~DeviceEngine() override;

  // Whether this engine implements the options (else the host engine + DeviceMirror does).
  static bool handles(const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts);

  // Stage 3 reads only this rank's shard from source; stages 0-2 the full master, uploaded piece
  // by piece (no full host copy).
  void setParamsFrom(const ParamSource& source) override;
  void getParams(float* fullFlat) override;
  size_t numel() const override { return numel_; }
  zero::ParamTable& table() override { return table_; }

  void beforeForward(int block) override;
  void afterForward(int block) override;
  void beforeBackward(int block) override;
  void afterBackward(int block) override;  // issues the buckets final here (last micro-step)

  // Non-last micro-steps issue nothing at stages 0-1: gradients accumulate locally until the
  // last one. Stage 2 reduces every micro-step (foldMicroStep).
  void beginStep(bool lastMicroStep) override { lastMicro_ = lastMicroStep; }
  zero::StepResult step(float learningRate, float lossScale, float clipNorm) override;
  zero::MemoryReport memory() const override;

  std::vector<ShardTensor> optimizerShard() const override;
  void loadOptimizerState(const std::function<void(size_t offset, size_t size,
                                                   const std::string& name, float* out)>& readRange,
                          int64_t stepCount) override;
  int64_t stepCount() const override { return steps_; }

  // Diagnostics, as zero::ZeroEngine's: the hooks and kBucketIssued / kBucketWaited (id = bucket
  // number from 0 per engine; allreduce set at stage 0); stage 3 adds kGatherIssued /
  // kGatherWaited / kReleased (id = parameter index).
  void enableTrace(bool enabled) { tracer_.enable(enabled); }
  std::vector<zero::TraceEvent> takeTrace() { return tracer_.take(); }

 private:
  struct InFlight {
    comm::WorkPtr work;
    int64_t number = 0;
  };
  // A run of this rank's partition: where it sits in the full flat space and in the partition
  // (relative to lo_). Stages 0-2: one run; stage 3: one per parameter it owns a part of.
  struct ShardRange {
    size_t flat = 0, local = 0, size = 0;
  };

  bool reducing() const { return group_ != nullptr && world_ > 1; }
  size_t partBegin() const { return std::min(numel_, size_t(partIndex_) * shard_); }
  size_t partEnd() const { return std::min(numel_, size_t(partIndex_ + 1) * shard_); }
  float* master() const;  // fp32 values the optimizer updates (full buffer; partition used)
  std::vector<std::string> stateNames() const;
  float* state(size_t k) const;  // optimizer state k, indexed by partition offset (from lo_)
  void initStage3();             // stage 3's buffers, runs and DeviceStage3
  void allgatherParams();
  // params16_[offset, offset + count) = the compute dtype (bf16 or fp16) of the master's values.
  void toHalf(size_t offset, size_t count);
  void getParamsStage3(float* fullFlat);
  double globalSumSquares(double local);  // the sum over ranks, as zero::checkGradients
  void gather(void* full, DType dt);      // every rank's partition of `full` into all of it
  void initBuckets();                     // offsets_, finalAt_, reduced_, inPlaceRs_
  void addToBucket(size_t param);         // flushes the open bucket first when param cannot join it
  void flushBucket();
  void issueBucket(size_t lo, size_t hi);  // the reduction of grads [lo, hi)
  void reduceGrads();                      // what the hooks did not issue, then wait on all
  void waitBuckets();                      // waits on every issued bucket, clears reduced_
  bool reduceEveryMicroStep() const { return zopts_.stage == 2; }
  void foldMicroStep();  // stage 2, non-last micro-step: partition into gradAcc_, grads_ zeroed

  Ops& ops_;
  std::vector<zero::ParamInfo> params_;
  comm::ProcessGroup* group_;
  zero::ZeroOptions zopts_;
  zero::OptimizerOptions oopts_;
  int rank_ = 0, world_ = 1;
  int partIndex_ = 0;  // which partition this rank updates (0 for all at stage 0)
  size_t numel_ = 0, shard_ = 0;
  bool half_ = false, adam_ = true;  // half_: compute in bf16 or fp16 (zopts_.compute)
  // Stages 0-2: [numel]; stage 3: this rank's partition [Stage3Layout::localSize()].
  OpsBuffer params32_;        // fp32: the model's params and the master; 16-bit: the fp32 master
  OpsBuffer params16_;        // bf16 or fp16 compute: the model's params (16-bit words)
  OpsBuffer grads_;           // fp32, accumulated by the model (stage 3: by the reduced buckets)
  OpsBuffer gradAcc_;         // stage 2, accumulation: reduced partitions of earlier micro-steps
  bool accumulated_ = false;  // gradAcc_ holds a value this step
  OpsBuffer states_;          // optimizer states over the partition: [k][part_]
  size_t lo_ = 0, part_ = 0;  // the partition within the buffers above: [lo_, lo_ + part_)
  std::vector<ShardRange> shards_;
  OpsBuffer gatherIn_;              // stages 1-2, world > 1: this rank's updated partition, sent
  OpsBuffer normBuf_;               // stages 1-3, world > 1: globalSumSquares's words
  std::vector<DecayRange> ranges_;  // this rank's partition, relative to lo_, by decay
  zero::ParamTable table_;
  int64_t steps_ = 0;

  // Bucketed reduction (world > 1). finalAt_[b]: the parameters whose smallest block is b, in
  // descending index (backward order). reduced_[i]: parameter i is in an issued or open bucket
  // this step. [openLo_, openHi_): the open bucket's flat range (empty when equal).
  std::vector<size_t> offsets_;  // [numParams] flat offset of each parameter
  std::vector<std::vector<size_t>> finalAt_;
  std::vector<char> reduced_;
  size_t openLo_ = 0, openHi_ = 0;
  std::vector<InFlight> inFlight_;  // issued this step, in issue order
  int64_t bucketNumber_ = 0;
  bool lastMicro_ = true;  // as ZeroEngine: without beginStep every micro-step is the last
  bool inPlaceRs_ = true;  // reduce-scatter may write its output into its own input block
  zero::Tracer tracer_;
  std::unique_ptr<DeviceStage3> stage3_;  // stage 3 only; refers to the members above
};

}  // namespace ds::runtime
