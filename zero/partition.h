// Partition: every shard {offset, size} of the flat parameter space, computed in ONE place.
// Stages 0-2 use FlatLayout (the concatenation of all params padded to a multiple of
// kAlignElems*world and cut into `world` equal contiguous slices; padding only at the tail).
// Stage 3 uses Stage3Layout (each param on its own: chunk = ceil(numel/world), rank r owns
// [r*chunk, (r+1)*chunk) ∩ [0, numel); a rowSharded param's chunk is ceil(rows/world) whole
// rows). Not a buffer owner: pure arithmetic, no allocation beyond
// the tables. Invariant: shards of all ranks are disjoint and cover [0, numel) exactly.
#pragma once

#include <cstddef>
#include <vector>

#include "zero/param_table.h"

namespace ds::zero {

constexpr size_t kAlignElems = 16;  // 64 bytes of fp32: every padded slice starts cache-aligned

struct Shard {
  size_t offset = 0;  // elements, in the coordinates stated by the producer
  size_t size = 0;
  size_t end() const { return offset + size; }
};

// Offsets of each parameter in the flat space (concatenation in params order).
std::vector<size_t> paramOffsets(const std::vector<ParamInfo>& params);
size_t totalNumel(const std::vector<ParamInfo>& params);

// Intersection of two half-open ranges (size 0 when disjoint; offset then = a.offset).
Shard intersect(Shard first, Shard second);

class FlatLayout {
 public:
  FlatLayout(size_t numel, int world);
  size_t numel() const { return numel_; }
  size_t padded() const { return padded_; }      // multiple of kAlignElems*world, >= numel
  size_t partSize() const { return partSize_; }  // padded / world
  int world() const { return world_; }
  // Rank r's slice of the padded space (equal sizes) and its real (unpadded) part.
  Shard paddedShard(int rank) const { return {size_t(rank) * partSize_, partSize_}; }
  Shard realShard(int rank) const { return intersect(paddedShard(rank), {0, numel_}); }
  // Per-rank element counts of range [a, b) of the padded space (rank-major == flat order).
  std::vector<size_t> counts(Shard range) const;

 private:
  size_t numel_, padded_, partSize_;
  int world_;
};

class Stage3Layout {
 public:
  Stage3Layout(const std::vector<ParamInfo>& params, int world);
  int world() const { return world_; }
  size_t numParams() const { return chunk_.size(); }
  // ceil(numel/world), or ceil(rows/world) whole rows of a rowSharded param
  size_t chunk(size_t param) const { return chunk_[param]; }
  size_t localOffset(size_t param) const { return local_[param]; }  // same on every rank
  size_t localSize() const { return localSize_; }                   // sum of chunks
  // Rank r's real elements of param p, in the param's own coordinates.
  Shard ownRange(size_t param, int rank) const;

 private:
  std::vector<size_t> numel_, chunk_, local_;
  size_t localSize_ = 0;
  int world_;
};

}  // namespace ds::zero
