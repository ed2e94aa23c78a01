// ParamIndex: the static description of the model's parameters as every stage needs it: the
// flat offset of each parameter, which blocks use it and after which block's backward its
// gradient is complete. Not a buffer owner and not the partitioning (zero/partition.h).
// Invariant: validated at construction (non-empty params, shapes match numel, blocks in range);
// immutable afterwards.
#pragma once

#include <cstddef>
#include <vector>

#include "zero/param_table.h"

namespace ds::zero {

class ParamIndex {
 public:
  // Throws ConfigError naming the parameter for an inconsistent description.
  ParamIndex(std::vector<ParamInfo> params, int numBlocks);

  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& param(size_t index) const { return params_[index]; }
  size_t count() const { return params_.size(); }
  int numBlocks() const { return numBlocks_; }
  bool validBlock(int block) const { return block >= 0 && block < numBlocks_; }
  size_t numel() const { return numel_; }  // Ψ: elements of the flat space (no padding)
  size_t offset(size_t index) const { return offsets_[index]; }
  // Parameters read by `block`, and those whose gradient is complete after `block`'s backward
  // (the lowest block using them).
  const std::vector<size_t>& usedBy(int block) const { return usedBy_[size_t(block)]; }
  const std::vector<size_t>& completeAfter(int block) const {
    return completeAfter_[size_t(block)];
  }
  bool uses(int block, size_t index) const;
  // Backward parts (ParamInfo::backwardPart): the highest part of `block` (0: no parts), and
  // whether parameter `index` is done in its only block once part `part` begins.
  int lastPart(int block) const { return lastPart_[size_t(block)]; }
  bool doneBeforePart(size_t index, int part) const {
    return single_[index] && params_[index].backwardPart < part;
  }
  // The parameter containing flat element `flatIndex` (< numel()).
  size_t paramAt(size_t flatIndex) const;

 private:
  std::vector<ParamInfo> params_;
  int numBlocks_;
  size_t numel_ = 0;
  std::vector<size_t> offsets_;
  std::vector<std::vector<size_t>> usedBy_;
  std::vector<std::vector<size_t>> completeAfter_;
  std::vector<int> lastPart_;  // [block]
  std::vector<char> single_;   // [param] used by one block
};

}  // namespace ds::zero
