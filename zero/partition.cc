// Partition arithmetic: see partition.h.
#include "zero/partition.h"

#include <algorithm>

#include "core/error.h"

namespace ds::zero {

std::vector<size_t> paramOffsets(const std::vector<ParamInfo>& params) {
  std::vector<size_t> offsets(params.size());
  size_t next = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    offsets[i] = next;
    next += params[i].numel;
  }
  return offsets;
}

size_t totalNumel(const std::vector<ParamInfo>& params) {
  size_t total = 0;
  for (const auto& info : params) total += info.numel;
  return total;
}

Shard intersect(Shard first, Shard second) {
  size_t low = std::max(first.offset, second.offset), high = std::min(first.end(), second.end());
  if (high <= low) return {first.offset, 0};
  return {low, high - low};
}

FlatLayout::FlatLayout(size_t numel, int world) : numel_(numel), world_(world) {
  DS_CHECK(world >= 1);
  size_t unit = kAlignElems * size_t(world);
  padded_ = std::max<size_t>(unit, (numel + unit - 1) / unit * unit);
  partSize_ = padded_ / size_t(world);
}

std::vector<size_t> FlatLayout::counts(Shard range) const {
  std::vector<size_t> perRank(static_cast<size_t>(world_));
  for (int rank = 0; rank < world_; ++rank)
    perRank[size_t(rank)] = intersect(range, paddedShard(rank)).size;
  return perRank;
}

Stage3Layout::Stage3Layout(const std::vector<ParamInfo>& params, int world) : world_(world) {
  DS_CHECK(world >= 1);
  for (const auto& info : params) {
    size_t chunk = (info.numel + size_t(world) - 1) / size_t(world);
    if (info.rowSharded && !info.shape.empty() && info.shape[0] > 0) {  // whole rows per rank
      const size_t rows = size_t(info.shape[0]), rowLen = info.numel / rows;
      chunk = (rows + size_t(world) - 1) / size_t(world) * rowLen;
    }
    numel_.push_back(info.numel);
    chunk_.push_back(chunk);
    local_.push_back(localSize_);
    localSize_ += chunk;
  }
}

Shard Stage3Layout::ownRange(size_t param, int rank) const {
  return intersect({size_t(rank) * chunk_[param], chunk_[param]}, {0, numel_[param]});
}

}  // namespace ds::zero
