// DelayLine (see delay_line.h). One loop: release what is due, arm the timer for the earliest
// packet still held, wait on both sides, the timer and the stop descriptor; a readable side is
// read until it has nothing more (at most a batch, so the other side is not starved).
#include "tests/cluster/delay_line.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

#include <algorithm>

#include "core/error.h"

namespace ds::netdelay {

namespace {

constexpr int kBatch = 64;  // packets read from one side before looking at the others
constexpr uint64_t kStopTag = 2;
constexpr uint64_t kTimerTag = 3;

int64_t monotonicNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

void watch(int epoll, int fd, uint64_t tag, const char* what) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = tag;
  DS_SYS_CHECK(::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event), "delay line: epoll_ctl on {}", what);
}

}  // namespace

DelayLine::DelayLine(int fdA, int fdB, const DelayLineOptions& options)
    : fds_{fdA, fdB},
      options_(options),
      queues_{DelayQueue(options.queueBytes), DelayQueue(options.queueBytes)},
      scratch_(options.maxPacket) {
  if (options.delayNs < 0)
    throw ConfigError(fmt::format("delay line: delay {} ns: expected >= 0", options.delayNs));
  if (options.queueBytes < options.maxPacket)
    throw ConfigError(
        fmt::format("delay line: queue of {} bytes: expected at least one packet "
                    "of {} bytes",
                    options.queueBytes, options.maxPacket));
  epoll_.reset(DS_SYS_CHECK(::epoll_create1(EPOLL_CLOEXEC), "delay line: epoll_create1"));
  timer_.reset(DS_SYS_CHECK(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
                            "delay line: timerfd_create"));
  watch(epoll_.get(), fdA, 0, "side a");
  watch(epoll_.get(), fdB, 1, "side b");
  watch(epoll_.get(), timer_.get(), kTimerTag, "the timer");
}

void DelayLine::run(int stopFd) {
  watch(epoll_.get(), stopFd, kStopTag, "the stop descriptor");
  std::array<epoll_event, 4> events{};
  for (;;) {
    flushDue(monotonicNs());
    armTimer();
    const int ready =
        ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw SystemError("delay line: epoll_wait", errno);
    }
    for (int i = 0; i < ready; ++i) {
      const uint64_t tag = events[static_cast<size_t>(i)].data.u64;
      if (tag == kStopTag) {
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, stopFd, nullptr);
        return;
      }
      if (tag == kTimerTag) {
        uint64_t expirations = 0;
        [[maybe_unused]] auto got = ::read(timer_.get(), &expirations, sizeof expirations);
        armedNs_ = -1;
      } else {
        readSide(static_cast<int>(tag), monotonicNs());
      }
    }
  }
}

void DelayLine::readSide(int from, int64_t nowNs) {
  auto& queue = queues_[static_cast<size_t>(from)];
  const auto side = static_cast<size_t>(from);
  for (int i = 0; i < kBatch; ++i) {
    uint8_t* slot = queue.reserve(options_.maxPacket);
    uint8_t* into = slot != nullptr ? slot : scratch_.data();
    const ssize_t got = ::read(fds_[side], into, options_.maxPacket);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      throw SystemError(fmt::format("delay line: read from side {}", from == 0 ? 'a' : 'b'), errno);
    }
    if (got == 0) continue;  // an empty datagram carries nothing to delay
    if (slot == nullptr) {
      ++stats_.queueFull[side];
      continue;
    }
    queue.commit(static_cast<size_t>(got), nowNs + options_.delayNs);
    stats_.maxQueued[side] = std::max(stats_.maxQueued[side], queue.bytes());
    nowNs = monotonicNs();
  }
}

void DelayLine::flushDue(int64_t nowNs) {
  for (size_t dir = 0; dir < 2; ++dir) {
    auto& queue = queues_[dir];
    const int into = fds_[1 - dir];
    while (!queue.empty() && queue.front().releaseNs <= nowNs) {
      const auto& packet = queue.front();
      const int64_t lateNs = nowNs - packet.releaseNs;
      stats_.maxLateNs[dir] = std::max(stats_.maxLateNs[dir], lateNs);
      stats_.sumLateNs[dir] += lateNs;
      if (lateNs > 100'000) ++stats_.late100us[dir];
      ssize_t put = -1;
      do {
        put = ::write(into, queue.data(packet), packet.size);
      } while (put < 0 && errno == EINTR);
      if (put == static_cast<ssize_t>(packet.size)) {
        ++stats_.packets[dir];
        stats_.bytes[dir] += packet.size;
      } else {
        ++stats_.writeFailed[dir];
      }
      queue.pop();
    }
  }
}

void DelayLine::armTimer() {
  int64_t next = -1;
  for (const auto& queue : queues_)
    if (!queue.empty() && (next < 0 || queue.front().releaseNs < next))
      next = queue.front().releaseNs;
  if (next == armedNs_ || next < 0) return;  // a stale expiry only wakes the loop once
  itimerspec spec{};
  spec.it_value.tv_sec = next / 1000000000;
  spec.it_value.tv_nsec = next % 1000000000;
  DS_SYS_CHECK(::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr),
               "delay line: timerfd_settime");
  armedNs_ = next;
}

double DelayLine::meanLateUs(size_t dir) const {
  const uint64_t released = stats_.packets[dir] + stats_.writeFailed[dir];
  return released == 0
             ? 0.0
             : static_cast<double>(stats_.sumLateNs[dir]) / 1e3 / static_cast<double>(released);
}

std::string DelayLine::summary() const {
  std::string out;
  for (size_t dir = 0; dir < 2; ++dir) {
    out += fmt::format(
        "{}{}: {} packets {} bytes, dropped {} (queue full) {} (write failed), "
        "most held {} bytes, released late by {:.1f} us on average, {} of them "
        "over 100 us, at most {} us",
        dir == 0 ? "" : "; ", dir == 0 ? "a->b" : "b->a", stats_.packets[dir], stats_.bytes[dir],
        stats_.queueFull[dir], stats_.writeFailed[dir], stats_.maxQueued[dir], meanLateUs(dir),
        stats_.late100us[dir], stats_.maxLateNs[dir] / 1000);
  }
  return out;
}

}  // namespace ds::netdelay
