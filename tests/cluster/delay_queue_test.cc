// DelayQueue: packets come out in order with their bytes intact, the ring reuses freed space at
// its start, a packet never straddles the end, and a full ring refuses instead of overwriting.
#include "tests/cluster/delay_queue.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "core/error.h"

using ds::netdelay::DelayQueue;

namespace {

void push(DelayQueue& queue, const std::string& text, int64_t releaseNs) {
  uint8_t* slot = queue.reserve(text.size());
  REQUIRE(slot != nullptr);
  std::copy(text.begin(), text.end(), slot);
  queue.commit(text.size(), releaseNs);
}

std::string popText(DelayQueue& queue) {
  const auto& packet = queue.front();
  std::string text(reinterpret_cast<const char*>(queue.data(packet)), packet.size);
  queue.pop();
  return text;
}

}  // namespace

TEST_CASE("delay queue: FIFO with release times and intact bytes", "[unit]") {
  DelayQueue queue(64);
  CHECK(queue.empty());
  push(queue, "first", 10);
  push(queue, "second", 20);
  CHECK(queue.count() == 2);
  CHECK(queue.bytes() == 11);
  CHECK(queue.front().releaseNs == 10);
  CHECK(popText(queue) == "first");
  CHECK(queue.front().releaseNs == 20);
  CHECK(popText(queue) == "second");
  CHECK(queue.empty());
  CHECK(queue.bytes() == 0);
}

TEST_CASE("delay queue: wraps into freed space, never straddles the end, refuses when full",
          "[unit]") {
  DelayQueue queue(10);
  push(queue, "aaaa", 1);              // [0,4)
  push(queue, "bbbb", 2);              // [4,8)
  CHECK(queue.reserve(4) == nullptr);  // 2 bytes at the end, nothing freed at the start
  CHECK(popText(queue) == "aaaa");
  push(queue, "cccc", 3);  // no room at [8,10): goes to [0,4)
  CHECK(queue.front().offset == 4);
  CHECK(queue.reserve(1) == nullptr);  // wrapped: the tail has reached the oldest packet
  CHECK(popText(queue) == "bbbb");
  push(queue, "dd", 4);  // [4,6): room between the tail and the end again
  CHECK(popText(queue) == "cccc");
  CHECK(popText(queue) == "dd");
  CHECK(queue.reserve(10) != nullptr);  // empty: the whole ring
  CHECK(queue.reserve(11) == nullptr);
}

TEST_CASE("delay queue: many packets of varied sizes survive every wrap", "[unit]") {
  DelayQueue queue(1000);
  int next = 0;
  int expect = 0;
  for (int round = 0; round < 500; ++round) {
    // Fill until the ring refuses, then drain a few: the queue is always near full.
    for (;;) {
      const std::string text =
          std::to_string(next) + std::string(static_cast<size_t>(next % 97), 'x');
      uint8_t* slot = queue.reserve(text.size());
      if (slot == nullptr) break;
      std::copy(text.begin(), text.end(), slot);
      queue.commit(text.size(), next);
      ++next;
    }
    for (int k = 0; k < 3 && !queue.empty(); ++k) {
      const std::string text = popText(queue);
      REQUIRE(text == std::to_string(expect) + std::string(static_cast<size_t>(expect % 97), 'x'));
      ++expect;
    }
  }
  CHECK(next > 1000);
}

TEST_CASE("delay queue: commit without a reserve or beyond it is an internal error", "[unit]") {
  DelayQueue queue(16);
  CHECK_THROWS_AS(queue.commit(1, 0), ds::InternalError);
  REQUIRE(queue.reserve(4) != nullptr);
  CHECK_THROWS_AS(queue.commit(5, 0), ds::InternalError);
  CHECK_THROWS_AS(queue.pop(), ds::InternalError);
}
