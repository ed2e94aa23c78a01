// DelayLine: joins two packet descriptors (TAP devices, or datagram sockets in tests) and holds
// every packet read from one for a fixed delay before writing it to the other, in order, both
// ways. Epoll and a timerfd (CLOCK_MONOTONIC, absolute): it sleeps until a packet is due, never
// spins. It shapes no rate (tc tbf on the devices does) and never reorders. A packet that finds
// its direction's queue full, or that the other side refuses, is dropped and counted, as a full
// device queue would. Owns neither descriptor; one thread runs it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/agent/unique_fd.h"
#include "tests/cluster/delay_queue.h"

namespace ds::netdelay {

struct DelayLineOptions {
  int64_t delayNs = 0;  // one way, the same both ways
  // Per direction: at least the bytes in flight (rate x delay), else frames are dropped.
  size_t queueBytes = size_t{16} << 20;
  size_t maxPacket = 65536;  // the largest frame a read() may return
};

struct DelayLineStats {
  // Index 0: a -> b, 1: b -> a.
  std::array<uint64_t, 2> packets{};      // written to the other side
  std::array<uint64_t, 2> bytes{};        // their bytes
  std::array<uint64_t, 2> queueFull{};    // dropped: the direction's queue had no room
  std::array<uint64_t, 2> writeFailed{};  // dropped: the other side refused the write
  std::array<size_t, 2> maxQueued{};      // the most bytes held at once
  std::array<int64_t, 2> maxLateNs{};     // the latest a packet left after its release time
  std::array<int64_t, 2> sumLateNs{};     // over all packets released (for the mean)
  std::array<uint64_t, 2> late100us{};    // packets released more than 100 us late
};

class DelayLine {
 public:
  // fdA, fdB: non-blocking descriptors where each read() returns one packet.
  DelayLine(int fdA, int fdB, const DelayLineOptions& options);

  // Forwards until stopFd turns readable (a signalfd, an eventfd); returns with packets still
  // queued dropped. Throws SystemError when a side fails to read (the device went away).
  void run(int stopFd);

  const DelayLineStats& stats() const { return stats_; }
  // "a->b 123 packets 4567 bytes, 0 dropped (queue full) ..." for a log line.
  std::string summary() const;
  // Mean microseconds a packet of direction dir (0: a->b) left after its release time.
  double meanLateUs(size_t dir) const;

 private:
  void readSide(int from, int64_t nowNs);
  void flushDue(int64_t nowNs);
  void armTimer();

  std::array<int, 2> fds_;
  DelayLineOptions options_;
  std::array<DelayQueue, 2> queues_;  // [0]: read from a, bound for b
  std::vector<uint8_t> scratch_;  // where a packet with no room in its queue is read and dropped
  launcher::UniqueFd epoll_;
  launcher::UniqueFd timer_;
  int64_t armedNs_ = -1;  // the timer's absolute expiry; -1 disarmed
  DelayLineStats stats_;
};

}  // namespace ds::netdelay
