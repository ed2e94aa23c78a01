// The nccl backend's liveness watchdog (comm/nccl/peer_liveness.h), CUDA-free and so run on
// every machine [unit]: staleness on an injected clock, the environment knobs, and PeerWatchdog
// over a HashStore: a beating peer is never reported, a silent one is (naming rank and host),
// only while the group has Work pending, a vanished process on this host is reported after two
// missed beats, and a store that fails names its host, rank 0.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm/nccl/peer_liveness.h"
#include "comm/peer_process.h"
#include "comm/store/hash_store.h"
#include "core/error.h"

using namespace ds;
using namespace ds::comm;
using namespace ds::comm::nccl_impl;
using namespace std::chrono_literals;

namespace {

// Collects the failures a watchdog reports; waitFor() is bounded.
struct Reports {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PeerFailure> got;
  PeerWatchdog::OnFailure callback() {
    return [this](const PeerFailure& f) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(f);
      cv.notify_all();
    };
  }
  bool waitFor(std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, t, [&] { return !got.empty(); });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return got.size();
  }
};

// Manual ticks only: the thread's period is an hour.
LivenessOptions manual(std::chrono::milliseconds peerTimeout) {
  LivenessOptions o;
  o.beat = std::chrono::hours(1);
  o.peerTimeout = peerTimeout;
  return o;
}

// A store whose every call fails once broken (a dead TcpStore connection behaves so).
class BreakableStore : public Store {
 public:
  std::atomic<bool> broken{false};
  void set(const std::string& k, const Bytes& v) override {
    ok();
    s_.set(k, v);
  }
  Bytes get(const std::string& k, std::chrono::milliseconds t) override {
    ok();
    return s_.get(k, t);
  }
  int64_t add(const std::string& k, int64_t d) override {
    ok();
    return s_.add(k, d);
  }
  Bytes compareSet(const std::string& k, const Bytes& e, const Bytes& d) override {
    ok();
    return s_.compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    ok();
    s_.wait(k, t);
  }
  bool deleteKey(const std::string& k) override {
    ok();
    return s_.deleteKey(k);
  }
  int64_t numKeys() override {
    ok();
    return s_.numKeys();
  }
  bool check(const std::vector<std::string>& k) override {
    ok();
    return s_.check(k);
  }

 private:
  void ok() {
    if (broken) throw CommError("store get to 127.0.0.1:1: connection closed by peer");
  }
  HashStore s_;
};

}  // namespace

TEST_CASE("nccl liveness: silence is measured from the last change, on this host's clock",
          "[unit]") {
  StalenessTracker t;
  auto t0 = LivenessClock::now();
  CHECK(t.silentFor(1, t0) == 0ms);  // never observed
  t.observe(1, "5", t0);
  t.observe(1, "5", t0 + 4s);
  CHECK(t.silentFor(1, t0 + 5s) == 5000ms);
  t.observe(1, "6", t0 + 6s);
  CHECK(t.silentFor(1, t0 + 7s) == 1000ms);
  t.observe(2, "", t0 + 7s);  // a key never written: silent from the first look
  CHECK(t.silentFor(2, t0 + 9s) == 2000ms);
  t.retainOnly({2});  // rank 1 idle: forgotten, fresh baseline next time
  CHECK(t.silentFor(1, t0 + 9s) == 0ms);
  t.observe(1, "6", t0 + 20s);
  CHECK(t.silentFor(1, t0 + 21s) == 1000ms);
  CHECK(t.silentFor(2, t0 + 21s) == 14000ms);
}

TEST_CASE("nccl liveness: DS_NCCL_PEER_TIMEOUT and DS_NCCL_HEARTBEAT_MS", "[unit]") {
  ::unsetenv("DS_NCCL_PEER_TIMEOUT");
  ::unsetenv("DS_NCCL_HEARTBEAT_MS");
  auto d = LivenessOptions::fromEnv();
  CHECK(d.peerTimeout == 10000ms);
  CHECK(d.beat == 1000ms);
  ::setenv("DS_NCCL_PEER_TIMEOUT", "2.5", 1);
  auto o = LivenessOptions::fromEnv();
  CHECK(o.peerTimeout == 2500ms);
  CHECK(o.beat == 625ms);  // at most a quarter of the peer timeout
  ::setenv("DS_NCCL_PEER_TIMEOUT", "soon", 1);
  CHECK_THROWS_AS(LivenessOptions::fromEnv(), ConfigError);
  ::setenv("DS_NCCL_PEER_TIMEOUT", "0", 1);
  CHECK_THROWS_AS(LivenessOptions::fromEnv(), ConfigError);
  ::unsetenv("DS_NCCL_PEER_TIMEOUT");
}

TEST_CASE("nccl liveness: a beating peer is never reported; a silent one is, by rank and host",
          "[unit]") {
  auto store = std::make_shared<HashStore>();
  PeerWatchdog w0(store, 0, manual(300ms)), w1(store, 1, manual(300ms));
  Reports rep;
  auto reg = w0.watch(
      {0, 1}, [] { return true; }, rep.callback());
  // One second of ticks, each right after the peer's beat: more than three timeouts in all,
  // but the counter always moved since the last look.
  w0.tick();
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(100ms);
    w1.tick();
    w0.tick();
  }
  CHECK(rep.count() == 0);
  // The peer stops beating (its process is alive: it is this one, so only the timeout applies).
  std::this_thread::sleep_for(400ms);
  w0.tick();
  REQUIRE(rep.count() == 1);
  CHECK(rep.got[0].rank == 1);
  CHECK_THAT(rep.got[0].message, Catch::Contains("peer rank 1 (host "));
  CHECK_THAT(rep.got[0].message, Catch::Contains("no heartbeat"));
  w0.tick();
  CHECK(rep.count() == 1);  // once per group
}

TEST_CASE("nccl liveness: peers are judged only while the group has Work pending", "[unit]") {
  auto store = std::make_shared<HashStore>();
  LivenessOptions o;
  o.beat = 20ms;
  o.peerTimeout = 100ms;
  PeerWatchdog w0(store, 0, o);
  store->setString(identityKey(3), "elsewhere 1");  // rank 3 joined once, never beats
  std::atomic<bool> pending{false};
  Reports rep;
  auto reg = w0.watch(
      {0, 3}, [&] { return pending.load(); }, rep.callback());
  CHECK_FALSE(rep.waitFor(500ms));  // idle: never judged, however long the silence
  pending = true;
  REQUIRE(rep.waitFor(10s));
  CHECK(rep.got[0].rank == 3);
  CHECK_THAT(rep.got[0].message, Catch::Contains("rank 3 (host elsewhere, pid 1)"));
}

TEST_CASE("nccl liveness: a peer whose process is gone from this host is reported early",
          "[unit]") {
  auto store = std::make_shared<HashStore>();
  LivenessOptions o;
  o.beat = 20ms;
  o.peerTimeout = std::chrono::hours(1);  // only the process check can fire
  PeerWatchdog w0(store, 0, o);
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);  // reaped: the pid no longer exists
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string self = ds::comm::localProcessId();  // the child's: ours with its pid
  std::string process = self.substr(0, self.rfind('|') + 1) + std::to_string(child);
  store->setString(identityKey(2), fmt::format("{} {} {}", host, child, process));
  store->add(heartbeatKey(2), 1);
  Reports rep;
  auto reg = w0.watch(
      {0, 2}, [] { return true; }, rep.callback());
  REQUIRE(rep.waitFor(10s));
  CHECK(rep.got[0].rank == 2);
  CHECK_THAT(rep.got[0].message, Catch::Contains("process no longer exists"));
}

TEST_CASE("nccl liveness: an unreachable store names its host, rank 0", "[unit]") {
  auto store = std::make_shared<BreakableStore>();
  PeerWatchdog w1(store, 1, manual(std::chrono::hours(1))),
      w2(store, 2, manual(std::chrono::hours(1)));
  Reports rep, other;
  auto reg = w1.watch(
      {0, 1, 2}, [] { return true; }, rep.callback());
  auto sub = w1.watch(
      {1, 2}, [] { return true; }, other.callback());  // rank 0 not a member
  w1.tick();
  CHECK(rep.count() == 0);
  store->broken = true;
  w1.tick();
  REQUIRE(rep.count() == 1);
  CHECK(rep.got[0].rank == 0);
  CHECK_THAT(rep.got[0].message, Catch::Contains("store hosted by rank 0 is unreachable"));
  REQUIRE(other.count() == 1);  // the job is broken for every group
  CHECK(other.got[0].rank == 0);
}
