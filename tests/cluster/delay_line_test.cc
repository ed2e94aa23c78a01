// DelayLine on datagram socket pairs (no root, no TAP): every packet crosses both ways in order
// and intact, none leaves before its delay (a lower bound the design guarantees, never a timing
// that load could break), a full queue drops and counts, and the stop descriptor ends run().
#include "tests/cluster/delay_line.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

using ds::launcher::UniqueFd;
using ds::netdelay::DelayLine;
using ds::netdelay::DelayLineOptions;

namespace {

struct Wire {  // the line joins ours[0]'s peer and ours[1]'s peer
  UniqueFd ours[2];
  UniqueFd line[2];
};

Wire makeWire() {
  Wire wire;
  for (int side = 0; side < 2; ++side) {
    int fds[2];
    DS_SYS_CHECK(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds),
                 "socketpair");
    wire.ours[side].reset(fds[0]);
    wire.line[side].reset(fds[1]);
  }
  return wire;
}

int64_t nowNs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// One datagram from fd within 30 s (a hang guard), or fails the case.
std::string receive(int fd) {
  pollfd waiter{fd, POLLIN, 0};
  REQUIRE(::poll(&waiter, 1, 30000) == 1);
  std::string buf(70000, '\0');
  const ssize_t got = ::recv(fd, buf.data(), buf.size(), 0);
  REQUIRE(got >= 0);
  buf.resize(static_cast<size_t>(got));
  return buf;
}

struct Running {  // run() on a thread until stopAndJoin() (or the destructor)
  DelayLine line;
  UniqueFd stop{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::thread thread;
  Running(int fdA, int fdB, const DelayLineOptions& options) : line(fdA, fdB, options) {
    thread = std::thread([this] { line.run(stop.get()); });
  }
  // After it, line.stats() is safe to read.
  void stopAndJoin() {
    if (!thread.joinable()) return;
    const uint64_t one = 1;
    [[maybe_unused]] auto put = ::write(stop.get(), &one, sizeof one);
    thread.join();
  }
  ~Running() { stopAndJoin(); }
};

// Waits (30 s hang guard) until fd has nothing left to read: the line has taken every packet.
void drained(int fd) {
  for (int i = 0; i < 30000; ++i) {
    pollfd waiter{fd, POLLIN, 0};
    if (::poll(&waiter, 1, 0) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("the delay line did not read its side within 30 s");
}

}  // namespace

TEST_CASE("delay line: packets cross both ways in order, intact, none before its delay", "[unit]") {
  Wire wire = makeWire();
  DelayLineOptions options;
  options.delayNs = 2'000'000;  // 2 ms
  std::vector<int64_t> sentAt;
  {
    Running running(wire.line[0].get(), wire.line[1].get(), options);
    for (int i = 0; i < 20; ++i) {
      const std::string text =
          "packet " + std::to_string(i) + std::string(static_cast<size_t>(i * 100), 'p');
      const int side = i % 2;
      sentAt.push_back(nowNs());
      REQUIRE(::send(wire.ours[side].get(), text.data(), text.size(), 0) ==
              static_cast<ssize_t>(text.size()));
    }
    for (int i = 0; i < 20; ++i) {
      const int side = i % 2;
      const std::string got = receive(wire.ours[1 - side].get());
      const int64_t arrived = nowNs();
      CHECK(got == "packet " + std::to_string(i) + std::string(static_cast<size_t>(i * 100), 'p'));
      CHECK(arrived - sentAt[static_cast<size_t>(i)] >= options.delayNs);
    }
  }
}

TEST_CASE("delay line: counts what it forwards; zero delay forwards at once", "[unit]") {
  Wire wire = makeWire();
  Running running(wire.line[0].get(), wire.line[1].get(), DelayLineOptions{});  // no delay
  const std::string text(1000, 'z');
  REQUIRE(::send(wire.ours[0].get(), text.data(), text.size(), 0) == 1000);
  CHECK(receive(wire.ours[1].get()) == text);
  REQUIRE(::send(wire.ours[1].get(), "back", 4, 0) == 4);
  CHECK(receive(wire.ours[0].get()) == "back");
  running.stopAndJoin();
  const auto& stats = running.line.stats();
  CHECK(stats.packets[0] == 1);
  CHECK(stats.bytes[0] == 1000);
  CHECK(stats.packets[1] == 1);
  CHECK(stats.bytes[1] == 4);
  CHECK(stats.queueFull[0] + stats.queueFull[1] + stats.writeFailed[0] + stats.writeFailed[1] == 0);
  CHECK_THAT(running.line.summary(), Catch::Contains("a->b: 1 packets 1000 bytes"));
}

TEST_CASE("delay line: a full queue drops and counts instead of growing", "[unit]") {
  Wire wire = makeWire();
  DelayLineOptions options;
  options.delayNs = 3'600'000'000'000;  // an hour: nothing leaves during the case
  options.maxPacket = 1024;
  options.queueBytes = 4096;  // exactly 4 packets of 1024 bytes
  Running running(wire.line[0].get(), wire.line[1].get(), options);
  const std::string text(1024, 'f');
  for (int i = 0; i < 10; ++i)
    REQUIRE(::send(wire.ours[0].get(), text.data(), text.size(), 0) == 1024);
  drained(wire.line[0].get());
  running.stopAndJoin();
  const auto& stats = running.line.stats();
  CHECK(stats.packets[0] == 0);  // none due
  CHECK(stats.maxQueued[0] == 4096);
  CHECK(stats.queueFull[0] == 6);
  pollfd waiter{wire.ours[1].get(), POLLIN, 0};
  CHECK(::poll(&waiter, 1, 0) == 0);  // nothing reached the other side
}

TEST_CASE("delay line: bad options are configuration errors", "[unit]") {
  Wire wire = makeWire();
  DelayLineOptions negative;
  negative.delayNs = -1;
  CHECK_THROWS_AS(DelayLine(wire.line[0].get(), wire.line[1].get(), negative), ds::ConfigError);
  DelayLineOptions tiny;
  tiny.queueBytes = 100;
  CHECK_THROWS_AS(DelayLine(wire.line[0].get(), wire.line[1].get(), tiny), ds::ConfigError);
}
