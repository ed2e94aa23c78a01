// TrainingEngine: what the training loop needs of a parameter owner, whichever owns them: the
// host ZeroEngine (stages 0-3, offload; zero/zero_engine.h) or the device-resident engine
// (runtime/engine/device_engine.h). Not the stages or the optimizer. Invariants are ZeroEngine's:
// every rank makes the same calls in the same order; the model ADDS into table().grad inside a
// block's hooks; step() averages the gradients over the group before the optimizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zero/engine_types.h"
#include "zero/param_table.h"

namespace ds::zero {

class TrainingEngine : public BlockHooks {
 public:
  ~TrainingEngine() override = default;

  // Every rank passes the same full fp32 vector (host memory).
  virtual void setParams(const float* fullFlat) = 0;
  // Collective where parameters are partitioned; the full fp32 params into host memory.
  virtual void getParams(float* fullFlat) = 0;
  virtual size_t numel() const = 0;
  // Where each parameter's value and gradient live now (valid inside a block's hooks).
  virtual ParamTable& table() = 0;

  virtual void beginStep(bool lastMicroStep) = 0;
  virtual StepResult step(float learningRate, float lossScale, float clipNorm) = 0;
  virtual MemoryReport memory() const = 0;

  // Checkpoints: this rank's partition of every optimizer state as ranges of the full flat space
  // (zero_engine.h documents the names), and the load of the ranges this rank owns.
  struct ShardTensor {
    std::string name;
    size_t offset = 0, size = 0;  // in the full flat space
    std::vector<float> data;
  };
  virtual std::vector<ShardTensor> optimizerShard() const = 0;
  virtual void loadOptimizerState(
      const std::function<void(size_t offset, size_t size, const std::string& name, float* out)>&
          readRange,
      int64_t stepCount) = 0;
  virtual int64_t stepCount() const = 0;
};

}  // namespace ds::zero
