// ParamIndex: validation of the parameter description and the per-block tables.
#include "zero/param_index.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "zero/partition.h"

namespace ds::zero {
namespace {

void validateParam(const ParamInfo& info, int numBlocks) {
  if (info.numel == 0)
    throw ConfigError("ZeroEngine: parameter '" + info.name + "' has 0 elements");
  if (!info.shape.empty()) {
    int64_t product = 1;
    for (auto dim : info.shape) product *= dim;
    if (size_t(product) != info.numel)
      throw ConfigError(fmt::format("ZeroEngine: parameter '{}' numel {} != product of shape {}",
                                    info.name, info.numel, product));
  }
  if (info.blocks.empty())
    throw ConfigError("ZeroEngine: parameter '" + info.name + "' has no block");
  for (int block : info.blocks)
    if (block < 0 || block >= numBlocks)
      throw ConfigError(fmt::format("ZeroEngine: parameter '{}' names block {} (numBlocks {})",
                                    info.name, block, numBlocks));
  if (info.backwardPart < 0)
    throw ConfigError(fmt::format("ZeroEngine: parameter '{}' has backward part {} (expected >= 0)",
                                  info.name, info.backwardPart));
  const bool oneBlock = std::all_of(info.blocks.begin(), info.blocks.end(),
                                    [&](int block) { return block == info.blocks.front(); });
  if (info.backwardPart > 0 && !oneBlock)
    throw ConfigError(fmt::format(
        "ZeroEngine: parameter '{}' has backward part {} but is used by several blocks (a part "
        "is within one block; a tied parameter must be part 0)",
        info.name, info.backwardPart));
}

}  // namespace

ParamIndex::ParamIndex(std::vector<ParamInfo> params, int numBlocks)
    : params_(std::move(params)), numBlocks_(numBlocks) {
  if (numBlocks < 1) throw ConfigError("ZeroEngine: numBlocks must be >= 1");
  for (const auto& info : params_) validateParam(info, numBlocks);
  numel_ = totalNumel(params_);
  offsets_ = paramOffsets(params_);
  usedBy_.resize(size_t(numBlocks));
  completeAfter_.resize(size_t(numBlocks));
  lastPart_.assign(size_t(numBlocks), 0);
  single_.assign(params_.size(), 0);
  for (size_t index = 0; index < params_.size(); ++index) {
    auto blocks = params_[index].blocks;
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    for (int block : blocks) usedBy_[size_t(block)].push_back(index);
    completeAfter_[size_t(blocks.front())].push_back(index);
    single_[index] = blocks.size() == 1;
    int& last = lastPart_[size_t(blocks.front())];
    last = std::max(last, params_[index].backwardPart);
  }
}

bool ParamIndex::uses(int block, size_t index) const {
  const auto& blocks = params_[index].blocks;
  return std::find(blocks.begin(), blocks.end(), block) != blocks.end();
}

size_t ParamIndex::paramAt(size_t flatIndex) const {
  return size_t(std::upper_bound(offsets_.begin(), offsets_.end(), flatIndex) - offsets_.begin()) -
         1;
}

}  // namespace ds::zero
