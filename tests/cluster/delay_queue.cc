// DelayQueue (see delay_queue.h). The queued bytes are one run [head, tail) when tail > head
// (head: the oldest packet's offset), or two runs [head, end) and [0, tail) once the tail has
// wrapped (tail <= head); a packet never straddles the ring's end.
#include "tests/cluster/delay_queue.h"

#include "core/error.h"

namespace ds::netdelay {

DelayQueue::DelayQueue(size_t capacityBytes)
    : capacity_(capacityBytes), ring_(std::make_unique_for_overwrite<uint8_t[]>(capacityBytes)) {
  DS_CHECK(capacityBytes > 0, "a DelayQueue needs a ring of at least one byte");
}

uint8_t* DelayQueue::reserve(size_t maxSize) {
  reservedMax_ = 0;
  if (maxSize == 0 || maxSize > capacity_) return nullptr;
  size_t offset = 0;
  if (packets_.empty()) {
    tail_ = 0;
  } else {
    const size_t head = packets_.front().offset;
    if (tail_ > head) {  // one run: room after it, else at the start before head
      if (capacity_ - tail_ >= maxSize) {
        offset = tail_;
      } else if (head >= maxSize) {
        offset = 0;
      } else {
        return nullptr;
      }
    } else {  // wrapped: the only room is between the tail and head
      if (head - tail_ < maxSize) return nullptr;
      offset = tail_;
    }
  }
  reserved_ = offset;
  reservedMax_ = maxSize;
  return ring_.get() + offset;
}

void DelayQueue::commit(size_t size, int64_t releaseNs) {
  DS_CHECK(reservedMax_ > 0, "DelayQueue::commit without a reserve()");
  DS_CHECK(size > 0 && size <= reservedMax_, "DelayQueue::commit of {} bytes after reserve({})",
           size, reservedMax_);
  packets_.push_back(Packet{reserved_, size, releaseNs});
  tail_ = reserved_ + size;
  bytes_ += size;
  reservedMax_ = 0;
}

void DelayQueue::pop() {
  DS_CHECK(!packets_.empty(), "DelayQueue::pop on an empty queue");
  bytes_ -= packets_.front().size;
  packets_.pop_front();
}

}  // namespace ds::netdelay
