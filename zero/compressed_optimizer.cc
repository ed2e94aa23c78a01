// makeCompressedOptimizer: see compressed_optimizer.h.
#include "zero/compressed_optimizer.h"

#include "core/error.h"
#include "zero/onebit_adam.h"
#include "zero/onebit_lamb.h"

namespace ds::zero {

std::unique_ptr<CompressedOptimizer> makeCompressedOptimizer(
    const OptimizerOptions& options, comm::ProcessGroup* group,
    const std::vector<OptimizerPartition::Segment>& params,
    std::vector<OptimizerPartition::Run> decayRuns) {
  DS_CHECK(options.compressed(), "a compressed optimizer for type {}", options.type);
  if (options.type == "OneBitLamb") return std::make_unique<OneBitLamb>(options, group, params);
  std::vector<size_t> sizes;
  sizes.reserve(params.size());
  for (const auto& param : params) sizes.push_back(param.size);
  return std::make_unique<CompressedAdam>(options, group, std::move(sizes), std::move(decayRuns));
}

}  // namespace ds::zero
