// DelayQueue: a FIFO of packets, each held until its release time, stored back to back in one
// byte ring. A constant delay releases packets in the order they came, so the ring frees its space
// in order and needs no allocator. Not a scheduler (the caller reads the clock); not thread-safe.
// Invariant: the bytes of queued packets never overlap; pop() frees the oldest packet's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

namespace ds::netdelay {

class DelayQueue {
 public:
  struct Packet {
    size_t offset;      // into the ring
    size_t size;        // bytes, > 0
    int64_t releaseNs;  // CLOCK_MONOTONIC nanoseconds at which it may leave
  };

  // capacityBytes: the ring; at least one packet of the largest size a caller will reserve.
  explicit DelayQueue(size_t capacityBytes);

  // Room for one packet of up to maxSize bytes at the tail, or nullptr when the ring is full
  // (the caller drops the packet, as a full device queue would).
  uint8_t* reserve(size_t maxSize);
  // Queues the first `size` bytes written at the last reserve() (0 < size <= its maxSize).
  void commit(size_t size, int64_t releaseNs);

  bool empty() const { return packets_.empty(); }
  size_t count() const { return packets_.size(); }
  size_t bytes() const { return bytes_; }
  size_t capacity() const { return capacity_; }
  const Packet& front() const { return packets_.front(); }
  const uint8_t* data(const Packet& packet) const { return ring_.get() + packet.offset; }
  void pop();

 private:
  size_t capacity_;
  std::unique_ptr<uint8_t[]> ring_;  // not zeroed: untouched pages cost no memory
  std::deque<Packet> packets_;
  size_t tail_ = 0;         // where the next packet goes when the ring has not wrapped past it
  size_t bytes_ = 0;        // sum of the queued packets' sizes
  size_t reserved_ = 0;     // offset of the last reserve()
  size_t reservedMax_ = 0;  // its maxSize; 0 when nothing is reserved
};

}  // namespace ds::netdelay
