// The device a rank trains on: the plan's train.device (auto | cpu | cuda) and the rank's place
// on its host pick cuda:<localRank> or the host (runtime/device/device_select.h), and this opens
// it: the CUDA ops for a GPU, nothing for the host path (Gpt2Model on host kernels). Not the
// selection rules themselves (runtime/device) nor the kernels (runtime/tensor/cuda).
#pragma once

#include <memory>
#include <string>

#include "runtime/config/plan.h"
#include "runtime/device/cuda_device.h"
#include "runtime/tensor/ops.h"

namespace ds::runtime {

struct TrainingDevice {
  std::unique_ptr<Ops> ops;  // null: train on the host kernels
  DeviceInfo info;           // what the device is: the startup log and the run summary
  std::string why;           // why this device ("cuda:1 (train.device auto, LOCAL_RANK 1)")
};

// Throws ConfigError (no device where the plan asks for cuda, more local ranks than devices,
// ...) naming the key, the rank, the host and the device counts. fp16 is allowed (the trainer
// emulates it on the device engine; docs/gpu.md "Precision").
TrainingDevice openTrainingDevice(const Plan& plan, int rank, int localRank, int localSize);

}  // namespace ds::runtime
