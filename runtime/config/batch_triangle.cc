// DeepSpeed's batch resolution and assertions (runtime/config.py), same order and messages.
#include "runtime/config/batch_triangle.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

BatchTriangle resolveBatchTriangle(BatchTriangle b, int worldSize) {
  const int64_t w = worldSize;
  if (w < 1) throw ConfigError(fmt::format("world size must be >= 1, got {}", w));
  if (b.train && b.micro && b.gas) {
    // all given: only validated
  } else if (b.train && b.micro) {
    b.gas = b.train / b.micro / w;
  } else if (b.train && b.gas) {
    b.micro = b.train / w / b.gas;
  } else if (b.micro && b.gas) {
    b.train = b.micro * b.gas * w;
  } else if (b.train) {
    b.gas = 1;
    b.micro = b.train / w;
  } else if (b.micro) {
    b.train = b.micro * w;
    b.gas = 1;
  } else {
    throw ConfigError(
        "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
  }
  if (b.train <= 0)
    throw ConfigError(fmt::format("Train batch size: {} has to be greater than 0", b.train));
  if (b.micro <= 0)
    throw ConfigError(
        fmt::format("Micro batch size per gpu: {} has to be greater than 0", b.micro));
  if (b.gas <= 0)
    throw ConfigError(
        fmt::format("Gradient accumulation steps: {} has to be greater than 0", b.gas));
  if (b.train != b.micro * b.gas * w)
    throw ConfigError(fmt::format(
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size {} != {} * {} * {}",
        b.train, b.micro, b.gas, w));
  return b;
}

}  // namespace ds::runtime
