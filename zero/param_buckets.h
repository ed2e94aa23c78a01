// ParamBuckets: stage 2's gradient reduction by whole parameters. A parameter whose gradient is
// complete is queued; a bucket of queued parameters (reduce_bucket_size elements, clamped) is
// reduce-scattered rank-major (each rank's slice of every parameter in turn) and each gradient
// buffer is handed back as soon as it is copied into the bucket; a parameter larger than the
// bucket goes in pieces. Not stage 1 (in place over its full gradient) and not stage 3 (per-param
// chunks). Invariant: a gradient buffer is never held longer than one bucket after its parameter
// completes, whatever the flat order (llm.c's GPT order interleaves the layers, so reducing only a
// contiguous completed range from the top held nearly every gradient until backward ended).
#pragma once

#include <cstddef>
#include <vector>

#include "zero/partition.h"
#include "zero/stage.h"
#include "zero/transient_grads.h"

namespace ds::zero {

class ParamBuckets {
 public:
  // gradPart: this rank's [layout.partSize()] accumulated partition (flat offset partStart).
  ParamBuckets(const StageContext& ctx, const FlatLayout& layout, TransientGrads& transient,
               float* gradPart, size_t partStart, size_t bucket);

  void queue(size_t param);  // param's gradient is complete (held or not: zeros then)
  void flush();              // reduce what is queued now

 private:
  void emit(const std::vector<Shard>& ranges);  // flat ranges, each inside one parameter

  StageContext ctx_;
  const FlatLayout& layout_;
  TransientGrads& transient_;
  float* gradPart_;
  size_t partStart_, bucket_;
  std::vector<size_t> queued_;
  size_t queuedElems_ = 0;
};

}  // namespace ds::zero
