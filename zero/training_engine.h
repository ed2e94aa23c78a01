// TrainingEngine: what the training loop needs of a parameter owner, whichever owns them: the
// host ZeroEngine (stages 0-3, offload; zero/zero_engine.h) or the device-resident engine
// (runtime/engine/device_engine.h). Not the stages or the optimizer. Invariants are ZeroEngine's:
// every rank makes the same calls in the same order; the model ADDS into table().grad inside a
// block's hooks; step() averages the gradients over the group before the optimizer.
#pragma once

#include <algorithm>
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

  // Where initial parameter values come from: fills flat elements [offset, offset + size) (fp32,
  // the params' order) into out. The engine asks only for what this rank keeps (stage 3: its
  // shard; stages 0-2: the model copy and the master partition), in pieces of at most
  // kParamSourcePiece elements where it needs a staging buffer, any order, possibly twice. Every
  // rank's source must give the same values (a counter-based initialiser, a file, a checkpoint).
  using ParamSource = std::function<void(size_t offset, size_t size, float* out)>;
  static constexpr size_t kParamSourcePiece = size_t(1) << 20;
  virtual void setParamsFrom(const ParamSource& source) = 0;
  // Every rank passes the same full fp32 vector (host memory): setParamsFrom over it.
  void setParams(const float* fullFlat) {
    setParamsFrom([fullFlat](size_t offset, size_t size, float* out) {
      std::copy(fullFlat + offset, fullFlat + offset + size, out);
    });
  }
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
