// ParamBuckets: stage 2 buckets of whole parameters; see param_buckets.h.
#include "zero/param_buckets.h"

#include <algorithm>

#include "zero/bucket_queue.h"
#include "zero/bulk_ops.h"
#include "zero/dp_comm.h"
#include "zero/param_index.h"

namespace ds::zero {

ParamBuckets::ParamBuckets(const StageContext& ctx, const FlatLayout& layout,
                           TransientGrads& transient, float* gradPart, size_t partStart,
                           size_t bucket)
    : ctx_(ctx),
      layout_(layout),
      transient_(transient),
      gradPart_(gradPart),
      partStart_(partStart),
      bucket_(std::max<size_t>(bucket, 1)) {}

void ParamBuckets::queue(size_t param) {
  const size_t offset = ctx_.index.offset(param), numel = ctx_.index.param(param).numel;
  if (ctx_.comm.single()) {  // the reduction is the identity: add into the partition
    if (transient_.held(param))
      bulkAdd(gradPart_ + (offset - partStart_), transient_.data(param), numel);
    transient_.release(param);
    return;
  }
  if (!queued_.empty() && queuedElems_ + numel > bucket_) flush();
  if (numel > bucket_) {
    for (size_t from = 0; from < numel; from += bucket_)
      emit({{offset + from, std::min(bucket_, numel - from)}});
    transient_.release(param);
    return;
  }
  queued_.push_back(param);
  queuedElems_ += numel;
  if (queuedElems_ >= bucket_) flush();
}

void ParamBuckets::flush() {
  if (queued_.empty()) return;
  std::vector<Shard> ranges;
  for (size_t param : queued_)
    ranges.push_back({ctx_.index.offset(param), ctx_.index.param(param).numel});
  emit(ranges);
  for (size_t param : queued_) transient_.release(param);
  queued_.clear();
  queuedElems_ = 0;
}

void ParamBuckets::emit(const std::vector<Shard>& ranges) {
  const int world = ctx_.comm.world(), self = ctx_.comm.rank();
  const int slot = ctx_.buckets.acquire();
  float* input = ctx_.buckets.input(slot).data();
  float* output = ctx_.buckets.output(slot).data();
  std::vector<size_t> counts(size_t(world), 0);
  std::vector<Shard> mine;  // (partition offset, size) of this rank's parts, in output order
  size_t pos = 0;
  for (int rank = 0; rank < world; ++rank)
    for (const Shard& range : ranges) {
      const Shard part = intersect(range, layout_.paddedShard(rank));
      if (!part.size) continue;
      const size_t param = ctx_.index.paramAt(range.offset);
      if (transient_.held(param))
        bulkCopy(input + pos, transient_.data(param) + (part.offset - ctx_.index.offset(param)),
                 part.size);
      else bulkZero(input + pos, part.size);
      pos += part.size;
      counts[size_t(rank)] += part.size;
      if (rank == self) mine.push_back({part.offset - partStart_, part.size});
    }
  auto work = ctx_.comm.reduceScatterSum(input, output, counts);
  auto finish = [this, output, mine] {
    size_t from = 0;
    for (const Shard& part : mine) {
      bulkAdd(gradPart_ + part.offset, output + from, part.size);
      from += part.size;
    }
  };
  ctx_.buckets.issue(work, mine.empty() ? std::function<void()>() : finish, slot);
}

}  // namespace ds::zero
