// BucketQueue: slots, issue order and draining of the gradient buckets.
#include "zero/bucket_queue.h"

#include "core/error.h"
#include "zero/dp_comm.h"

namespace ds::zero {

BucketQueue::BucketQueue(Tracer& tracer, bool overlapComm)
    : tracer_(tracer), overlap_(overlapComm), busy_(overlapComm ? 2 : 1, 0) {}

void BucketQueue::allocate(size_t inElems, size_t outElems) {
  input_.resize(busy_.size());
  output_.resize(busy_.size());
  for (size_t slot = 0; slot < busy_.size(); ++slot) {
    if (inElems > 0) input_[slot].assign(inElems, 0.f);
    output_[slot].assign(outElems, 0.f);
  }
}

int BucketQueue::acquire() {
  const int slots = int(busy_.size());
  for (;;) {
    for (int k = 0; k < slots; ++k) {
      const int slot = (nextSlot_ + k) % slots;
      if (!busy_[size_t(slot)]) {
        nextSlot_ = (slot + 1) % slots;
        busy_[size_t(slot)] = 1;
        return slot;
      }
    }
    drainOne();
  }
}

void BucketQueue::issue(comm::WorkPtr work, std::function<void()> finish, int slot,
                        bool allreduce) {
  tracer_.note(TraceEvent::Kind::kBucketIssued, nextNumber_, false, allreduce);
  pending_.push_back({std::move(work), std::move(finish), slot, nextNumber_++});
  if (!overlap_) drainAll();
}

void BucketQueue::drainOne() {
  DS_CHECK(!pending_.empty());
  Pending bucket = std::move(pending_.front());
  pending_.pop_front();
  tracer_.note(TraceEvent::Kind::kBucketWaited, bucket.number,
               !bucket.work || bucket.work->isCompleted());
  waitWork(bucket.work);
  if (bucket.finish) bucket.finish();
  if (bucket.slot >= 0) busy_[size_t(bucket.slot)] = 0;
}

void BucketQueue::drainAll() {
  while (!pending_.empty()) drainOne();
}

void BucketQueue::addPipeline(PipelineState& state) const {
  for (const auto& bucket : pending_) {
    ++state.bucketsInFlight;
    if (!bucket.work || bucket.work->isCompleted()) ++state.bucketsCompletedInFlight;
  }
}

size_t BucketQueue::bufferBytes() const {
  size_t bytes = 0;
  for (const auto& buf : input_) bytes += buf.size() * sizeof(float);
  for (const auto& buf : output_) bytes += buf.size() * sizeof(float);
  return bytes;
}

}  // namespace ds::zero
