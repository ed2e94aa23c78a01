// validateZeroOptions: the option combinations ZeroEngine refuses, each with the config key in
// the message. Not the config parser (runtime/config checks types and unknown keys first).
#include "zero/zero_options.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::zero {
namespace {

void validateOffload(const ZeroOptions& options) {
  const std::string& paramDevice = options.offloadParam.device;
  if (paramDevice != "none" && options.stage != 3)
    throw ConfigError(
        fmt::format("zero_optimization.offload_param.device '{}': parameter offload needs stage 3 "
                    "(stage is {})",
                    paramDevice, options.stage));
  if (paramDevice != "none" && paramDevice != "cpu" && paramDevice != "nvme")
    throw ConfigError("zero_optimization.offload_param.device '" + paramDevice +
                      "': expected none, cpu or nvme");
  if (options.offloadOptimizer.enabled() && options.stage == 0)
    throw ConfigError(
        "zero_optimization.offload_optimizer: needs ZeRO stage 1, 2 or 3 (stage is 0)");
}

}  // namespace

void validateZeroOptions(const ZeroOptions& options) {
  if (options.stage < 0 || options.stage > 3)
    throw ConfigError(fmt::format("zero_optimization.stage: {} (Maximum supported ZeRO stage is 3)",
                                  options.stage));
  if (options.compute != DType::kF32 && options.compute != DType::kBF16 &&
      options.compute != DType::kF16)
    throw ConfigError(fmt::format("ZeroEngine: compute dtype {} (expected fp32, bf16 or fp16)",
                                  dtypeName(options.compute)));
  validateOffload(options);
  if (options.reduceBucketSize == 0)
    throw ConfigError("zero_optimization.reduce_bucket_size: must be > 0");
  if (!options.reduceScatter && options.stage == 3)
    throw ConfigError(
        "zero_optimization.reduce_scatter: false is supported at stages 0-2 only (stage 3 always "
        "reduce-scatters its per-parameter gradients)");
  if (!options.contiguousGradients)
    throw ConfigError(
        "zero_optimization.contiguous_gradients: false is not supported (stages 2 and 3 always "
        "copy finished gradients into contiguous bucket buffers; use true)");
}

}  // namespace ds::zero

namespace ds::zero {

size_t effectiveReduceBucket(size_t reduceBucketSize, size_t partitionElems, size_t flatElems) {
  constexpr size_t kFloor = size_t(1) << 20;
  const size_t clamp = std::max(kFloor, (partitionElems + 7) / 8);
  return std::max<size_t>(1, std::min({reduceBucketSize, clamp, std::max<size_t>(flatElems, 1)}));
}

AsyncFile::Options asyncFileOptions(const AioOptions& aio) {
  AsyncFile::Options fileOptions;
  if (aio.blockSize > 0) fileOptions.maxRequestBytes = aio.blockSize;
  if (aio.queueDepth > 0) fileOptions.queueDepth = unsigned(aio.queueDepth);
  return fileOptions;
}

}  // namespace ds::zero
