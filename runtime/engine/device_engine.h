// DeviceEngine: ZeRO stages 0-2 with every buffer in one Ops' memory (the GPU's, or the host's for
// CpuOps in tests): the model's parameters (fp32, or bf16 plus an fp32 master), the fp32
// gradients, and Adam/SGD states, each one flat allocation sized up front. step() reduces the
// gradients over the group on the device buffers (NCCL takes them as they are), checks overflow
// and the global norm, and runs the fused optimizer kernel on this rank's partition; stages 1-2
// then all-gather the updated partition. Not offload nor stage 3 (those run on the host
// ZeroEngine with a DeviceMirror). Invariant: identical calls on every rank; the partition of
// rank r is [r*shard, min((r+1)*shard, numel)) with shard = ceil(numel / world), as zero/partition.
#pragma once

#include <memory>
#include <vector>

#include "runtime/tensor/ops.h"
#include "zero/training_engine.h"
#include "zero/zero_options.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

class DeviceEngine final : public zero::TrainingEngine {
 public:
  // params in the model's order, with decay flags; group == nullptr: one rank. Throws
  // NotSupported for what it does not implement (stage 3, offload, fp16, Lamb), naming the key.
  DeviceEngine(Ops& ops, std::vector<zero::ParamInfo> params, comm::ProcessGroup* group,
               const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts);
  ~DeviceEngine() override;

  // Whether this engine implements the options (else the host engine + DeviceMirror does).
  static bool handles(const zero::ZeroOptions& zopts, const zero::OptimizerOptions& oopts);

  void setParams(const float* fullFlat) override;
  void getParams(float* fullFlat) override;
  size_t numel() const override { return numel_; }
  zero::ParamTable& table() override { return table_; }

  void beforeForward(int) override {}
  void afterForward(int) override {}
  void beforeBackward(int) override {}
  void afterBackward(int) override {}

  void beginStep(bool) override {}
  zero::StepResult step(float learningRate, float lossScale, float clipNorm) override;
  zero::MemoryReport memory() const override;

  std::vector<ShardTensor> optimizerShard() const override;
  void loadOptimizerState(const std::function<void(size_t offset, size_t size,
                                                   const std::string& name, float* out)>& readRange,
                          int64_t stepCount) override;
  int64_t stepCount() const override { return steps_; }

 private:
  size_t partBegin() const { return std::min(numel_, size_t(partIndex_) * shard_); }
  size_t partEnd() const { return std::min(numel_, size_t(partIndex_ + 1) * shard_); }
  float* master() const;  // fp32 values the optimizer updates (full buffer; partition used)
  std::vector<std::string> stateNames() const;
  float* state(size_t k) const;  // optimizer state k, indexed by flat offset - partBegin()
  void allgatherParams();
  void gather(void* full, DType dt);  // every rank's partition of `full` into all of it
  void reduceGrads();

  Ops& ops_;
  std::vector<zero::ParamInfo> params_;
  comm::ProcessGroup* group_;
  zero::ZeroOptions zopts_;
  zero::OptimizerOptions oopts_;
  int rank_ = 0, world_ = 1;
  int partIndex_ = 0;  // which partition this rank updates (0 for all at stage 0)
  size_t numel_ = 0, shard_ = 0;
  bool bf16_ = false, adam_ = true;
  OpsBuffer params32_;  // fp32: the model's params and the master; bf16: the fp32 master
  OpsBuffer params16_;  // bf16 compute: the model's params
  OpsBuffer grads_;     // fp32 [numel], accumulated by the model
  OpsBuffer states_;    // optimizer states over the partition: [k][partEnd - partBegin]
  OpsBuffer gatherIn_;  // stages 1-2, world > 1: this rank's updated partition, sent
  std::vector<DecayRange> ranges_;  // this rank's partition, relative to partBegin, by decay
  zero::ParamTable table_;
  int64_t steps_ = 0;
};

}  // namespace ds::runtime
