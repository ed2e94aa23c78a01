// NVMe optimizer offload pipeline, shown by ordering (never by timing) on real swap files: while
// tile k is updated, the read of tile k+1 and the write-back of tile k-1 are in flight and the
// file layer finishes them before the training thread waits (the test holds tile k until it
// does, failing after a timeout instead of hanging); buffer_count sets how many tiles are read
// ahead (buffer_count - 2, at least 1); results are bitwise those of the in-memory optimizer.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/spawn_ranks.h"
#include "zero/optimizer_partition.h"

using namespace ds;
using namespace ds::zero;
using IoKind = OptimizerPartition::IoEvent::Kind;

namespace {

ptrdiff_t find(const std::vector<OptimizerPartition::IoEvent>& t, IoKind k, size_t tile) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].kind == k && t[i].tile == tile) return ptrdiff_t(i);
  return -1;
}

std::vector<float> pattern(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * float(int((i * 2654435761u) % 2001) - 1000) / 1000.f;
  return v;
}

}  // namespace

TEST_CASE("optimizer pipeline: nvme tiles overlap read k+1 / write k-1 with the update of k",
          "[unit]") {
  const size_t tile = 1024, tiles = 6, n = tile * tiles - 100;  // a short last tile
  OptimizerOptions oo;                                          // AdamW
  for (int bufferCount : {2, 3, 5}) {
    INFO("buffer_count " << bufferCount);
    ds::test::TempDir dir;
    OffloadOptions off;
    off.device = "nvme";
    off.nvmePath = dir.path();
    off.bufferCount = bufferCount;
    off.pinMemory = true;  // best effort: mlock may be refused; results must not change
    OptimizerPartition nv(n, oo, off, tile, nullptr, 0),
        mem(n, oo, OffloadOptions{}, tile, nullptr, 0);
    REQUIRE(nv.tileElems() == tile);
    const int slots = std::max(3, bufferCount);
    CHECK(nv.slots() == slots);
    const size_t look = size_t(slots) - 2;
    const auto init = pattern(n, 0.5f);
    nv.write(0, 0, n, init.data());
    mem.write(0, 0, n, init.data());
    std::vector<std::string> failures;
    std::vector<size_t> readsAhead;  // reads in flight while tile 0 is updated
    nv.enableTrace(true);
    for (int step = 1; step <= 2; ++step) {
      const auto g = pattern(n, float(step));
      nv.takeTrace();
      nv.update(g.data(), n, 1.f, 1e-2f, step, {}, [&](size_t o, size_t, const float*) {
        const size_t k = o / tile;
        auto fl = nv.inFlight();
        if (k == 0) {
          size_t r = 0;
          for (const auto& f : fl) r += !f.write;
          readsAhead.push_back(r);
        }
        // hold tile k until the read of k+1 and the write of k-1 are finished by the file layer
        auto want = [&](size_t t, bool w) {
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
          for (;;) {
            bool seen = false, done = false;
            for (const auto& f : nv.inFlight())
              if (f.tile == t && f.write == w) seen = true, done = f.completed;
            if (!seen) {
              failures.push_back(
                  fmt::format("tile {}: {} of tile {} not in flight", k, w ? "write" : "read", t));
              return;
            }
            if (done) return;
            if (std::chrono::steady_clock::now() > end) {
              failures.push_back(fmt::format("tile {}: {} of tile {} not done in 60 s", k,
                                             w ? "write" : "read", t));
              return;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
        };
        if (k + 1 < tiles) want(k + 1, false);
        if (k >= 1) want(k - 1, true);
      });
      mem.update(g.data(), n, 1.f, 1e-2f, step, {}, nullptr);
      const auto t = nv.takeTrace();
      std::string shown;
      for (const auto& e : t)
        shown += fmt::format("{}{}{} ", int(e.kind), e.tile, e.completedBeforeWait ? "*" : "");
      INFO(shown);
      for (size_t k = 0; k < tiles; ++k) {
        const ptrdiff_t upd = find(t, IoKind::kUpdated, k);
        REQUIRE(upd >= 0);
        if (k + 1 < tiles) {  // read of k+1 issued before k's update, waited after, finished
          CHECK(find(t, IoKind::kReadIssued, k + 1) < upd);
          const ptrdiff_t rw = find(t, IoKind::kReadWaited, k + 1);
          CHECK(rw > upd);
          CHECK(t[size_t(rw)].completedBeforeWait);
        }
        if (k + look < tiles)  // buffer_count: the read of k + look issued before k's update
          CHECK(find(t, IoKind::kReadIssued, k + look) < upd);
        if (k + look + 1 < tiles)  // ...and not more
          CHECK(find(t, IoKind::kReadIssued, k + look + 1) > upd);
        if (k >= 1) {  // write of k-1 issued before k's update, waited after, finished
          CHECK(find(t, IoKind::kWriteIssued, k - 1) < upd);
          const ptrdiff_t ww = find(t, IoKind::kWriteWaited, k - 1);
          CHECK(ww > upd);
          CHECK(t[size_t(ww)].completedBeforeWait);
        }
      }
    }
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(readsAhead == std::vector<size_t>{look, look});
    CHECK(nv.inFlight().empty());
    for (size_t s = 0; s < 3; ++s) {
      std::vector<float> a(n), b(n);
      nv.read(s, 0, n, a.data());
      mem.read(s, 0, n, b.data());
      CHECK(std::memcmp(a.data(), b.data(), n * 4) == 0);
    }
  }
}
