// RunSummary: what one training run did, per step and in total (losses, throughput, the step
// time split into forward / backward / communication / optimizer, ZeroEngine's memory report),
// serialised as the run summary JSON. Plain data filled by the Trainer; not a monitor sink.
// Invariant: steps[i].step == i + 1 + firstStep (steps of this process, in order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device/cuda_device.h"
#include "zero/zero_engine.h"

namespace ds::runtime {

struct StepRecord {
  int64_t step = 0;  // 1-based global optimizer step just finished
  double loss = 0;   // mean train loss of the step (all ranks, all micro-steps)
  double lr = 0, lossScale = 1, gradNorm = 0;
  bool skipped = false;  // overflow: no update
  double stepMs = 0, fwdMs = 0, bwdMs = 0, commMs = 0, optimMs = 0;
};

struct EvalRecord {
  int64_t step = 0;
  double valLoss = 0;
};

struct RunSummary {
  int worldSize = 1, zeroStage = 0;
  std::string dtype = "fp32", modelKind;
  size_t numParams = 0;
  int64_t firstStep = 0;      // global step this process started from (resume)
  int64_t tokensPerStep = 0;  // global tokens per optimizer step
  double entropyFloor = -1;   // nats/token (synthetic corpus), else -1
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  zero::MemoryReport memory;
  size_t activationBytes = 0;  // model activations held for backward (this rank)
  size_t workspaceBytes = 0;   // the model's other working memory (gradient scratch, bf16 widening)
  double flopsPerToken = 0;
  std::string checkpointTag;  // last checkpoint written ("" none)
  // OneBitAdam / ZeroOneAdam: bytes rank 0 sent in compressed allreduces, and what an fp32
  // allreduce of every parameter's gradient sends per rank per step (the comparison); 0 otherwise.
  uint64_t compressedBytes = 0, plainAllreduceBytesPerStep = 0;
  // NVMe offload: bytes this rank's trainer read from and wrote to its swap files over the whole
  // run (initial writes included); 0 and 0 without nvme offload (then not in the JSON).
  uint64_t nvmeBytesRead = 0, nvmeBytesWritten = 0;
  // The rank's device (runtime/device/rank_device.h): DeviceInfo::summary(), its memory
  // (host memory on the CPU), and the CUDA runtime / NCCL versions ("" without them). Set by
  // setDevice(); "" and 0 until then.
  std::string device;
  size_t deviceMemoryBytes = 0;
  std::string cudaVersion, ncclVersion;
  // The CPU thread policy applied (runtime/tensor/thread_policy.h): OpenMP threads and its
  // describeThreadPolicy() line; 0 and "" when none was applied (a library caller).
  int threads = 0;
  std::string threadPolicy;
  void setDevice(const DeviceInfo& info);

  // Totals over `steps`, skipping the first `warmup` steps when more than that many exist.
  struct Totals {
    int64_t steps = 0;
    double ms = 0, fwdMs = 0, bwdMs = 0, commMs = 0, optimMs = 0;
    double tokensPerSec = 0, gflops = 0;
  };
  Totals totals(int warmup = 1) const;
  std::string toJson() const;
};

}  // namespace ds::runtime
