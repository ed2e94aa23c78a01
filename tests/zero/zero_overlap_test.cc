// Proof by ordering, not by timing, that ZeroEngine overlaps communication with computation on
// real gloo thread ranks: with overlap_comm, gradient buckets issued during backward are completed
// by the comm worker while the training thread is still inside a later block (the test holds
// block 0's backward until the worker reports one done, failing after a timeout instead of
// hanging); without it every bucket is waited for right after it is issued. Stage 3: the next
// block's allgather is issued (and completes) before the current block ends, within
// stage3_prefetch_bucket_size and stage3_max_live_parameters.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/toy_model.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::zero;
using ds::test::ToyModel;
using Kind = TraceEvent::Kind;

namespace {

constexpr auto kHold = std::chrono::seconds(60);  // a hook waits at most this long, then fails

// Polls pred until true or kHold passes (then false). Only the deadline is a duration: the test
// passes on what pred observes, never on how long it took.
template <typename Pred>
bool waitUntil(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + kHold;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

struct RankResult {
  std::vector<std::vector<TraceEvent>> steps;  // the trace of each step
  std::vector<std::string> failures;           // what a hook could not observe
  std::vector<std::string> notes;              // observations the test asserts on
  PipelineState end;
  std::vector<float> params;  // full fp32 params after training
};

using Hook = std::function<void(ZeroEngine&, int block, bool backward, RankResult&)>;

// Trains `steps` steps (gas 1) of `m` on `world` gloo thread ranks with z, tracing every step;
// `hook` runs inside every block of every rank.
std::vector<RankResult> runTraced(const ToyModel& m, int world, const ZeroOptions& z, int steps,
                                  const Hook& hook) {
  auto store = std::make_shared<comm::HashStore>();
  std::vector<RankResult> res(static_cast<size_t>(world));
  ds::test::runRanks(
      world,
      [&](int r) {
        comm::GroupOptions go;
        go.backend = "gloo";
        go.timeout = std::chrono::seconds(90);
        comm::ProcessGroup pg(comm::createBackend("gloo", store, r, world, go));
        ToyModel mine = m;
        RankResult& out = res[size_t(r)];
        mine.inBlock = [&](ZeroEngine& e, int b, bool bwd) { hook(e, b, bwd, out); };
        ZeroEngine eng(m.params, m.L, &pg, z, OptimizerOptions{});
        const auto init = m.init();
        eng.setParams(init.data());
        eng.enableTrace(true);
        const int rows = 4;
        for (int s = 0; s < steps; ++s) {
          eng.takeTrace();
          eng.beginStep(true);
          mine.microStep(eng, s, 0, r * rows, rows);
          eng.step(1e-2f, 1.f, 0.f);
          out.steps.push_back(eng.takeTrace());
        }
        out.end = eng.pipeline();
        out.params.resize(eng.numel());
        eng.getParams(out.params.data());
      },
      std::chrono::seconds(300));
  return res;
}

ptrdiff_t indexOf(const std::vector<TraceEvent>& t, Kind k, int64_t id) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].kind == k && t[i].id == id) return ptrdiff_t(i);
  return -1;
}

std::string show(const std::vector<TraceEvent>& t) {
  static const char* names[] = {"F<",     "F>",    "B<",   "B>",    "issue",  "wait",
                                "gather", "gwait", "read", "rwait", "release"};
  std::string s;
  for (const auto& e : t)
    s += fmt::format("{}{}{} ", names[int(e.kind)], e.id, e.completedBeforeWait ? "*" : "");
  return s;
}

ZeroOptions overlapOptions(int stage, bool overlap) {
  ZeroOptions z;
  z.stage = stage;
  z.overlapComm = overlap;
  z.reduceBucketSize = 37;  // several buckets per backward (W is 10x10)
  z.paramPersistenceThreshold = 0;
  z.prefetchBucketSize = 1000;
  return z;
}

}  // namespace

// Block 0's backward (the last one) is held until the comm worker reports that an in-flight
// bucket's reduce-scatter has completed: that can only happen if buckets issued by the later
// blocks run on the comm thread while the training thread computes. Then, in the trace: that
// bucket was issued before backward of block 0 began and waited for only after it ended, already
// complete.
TEST_CASE("zero overlap: with overlap_comm, buckets complete on the comm thread during backward",
          "[multirank]") {
  const ToyModel m(4, 10);
  for (int stage : {2, 3}) {
    INFO("stage " << stage);
    auto res = runTraced(
        m, 2, overlapOptions(stage, true), 3, [](ZeroEngine& e, int b, bool bwd, RankResult& out) {
          if (!bwd || b != 0) return;
          auto st = e.pipeline();
          out.notes.push_back(fmt::format("inflight {}", st.bucketsInFlight));
          if (!waitUntil([&] { return e.pipeline().bucketsCompletedInFlight >= 1; }))
            out.failures.push_back(
                fmt::format("no in-flight bucket completed within {} s while block 0's "
                            "backward was held ({} in flight)",
                            kHold.count(), e.pipeline().bucketsInFlight));
        });
    for (size_t r = 0; r < res.size(); ++r) {
      INFO("rank " << r);
      for (const auto& f : res[r].failures) FAIL_CHECK(f);
      REQUIRE(res[r].steps.size() == 3);
      for (const auto& t : res[r].steps) {
        INFO(show(t));
        const ptrdiff_t b0 = indexOf(t, Kind::kBeforeBackward, 0);
        const ptrdiff_t a0 = indexOf(t, Kind::kAfterBackward, 0);
        const ptrdiff_t bLast = indexOf(t, Kind::kBeforeBackward, m.L - 1);
        REQUIRE(b0 >= 0);
        REQUIRE(a0 > b0);
        // buckets issued during backward, before block 0's
        int issuedBefore = 0, overlapped = 0;
        for (ptrdiff_t i = bLast; i < b0; ++i)
          if (t[size_t(i)].kind == Kind::kBucketIssued) {
            ++issuedBefore;
            const ptrdiff_t w = indexOf(t, Kind::kBucketWaited, t[size_t(i)].id);
            if (w > a0 && t[size_t(w)].completedBeforeWait) ++overlapped;
          }
        CHECK(issuedBefore >= 2);
        CHECK(overlapped >= 1);
      }
      CHECK(res[r].end.bucketsInFlight == 0);  // step() drained everything
    }
  }
}

// Without overlap_comm each bucket is waited for as soon as it is issued: nothing is in flight
// when block 0's backward runs, and every "issued" is directly followed by its "waited".
TEST_CASE("zero overlap: without overlap_comm every bucket is waited for when issued",
          "[multirank]") {
  const ToyModel m(4, 10);
  for (int stage : {2, 3}) {
    INFO("stage " << stage);
    auto res = runTraced(m, 2, overlapOptions(stage, false), 2,
                         [](ZeroEngine& e, int b, bool bwd, RankResult& out) {
                           if (bwd && b == 0)
                             out.notes.push_back(fmt::format("{}", e.pipeline().bucketsInFlight));
                         });
    for (size_t r = 0; r < res.size(); ++r) {
      INFO("rank " << r);
      CHECK(res[r].notes == std::vector<std::string>{"0", "0"});
      for (const auto& t : res[r].steps) {
        INFO(show(t));
        int issued = 0;
        for (size_t i = 0; i < t.size(); ++i)
          if (t[i].kind == Kind::kBucketIssued) {
            ++issued;
            REQUIRE(i + 1 < t.size());
            CHECK(t[i + 1].kind == Kind::kBucketWaited);
            CHECK(t[i + 1].id == t[i].id);
          }
        CHECK(issued >= 3);
      }
    }
  }
}

// Stage 3 prefetch: inside block b's forward (and backward), the allgathers of the next block's
// parameters have been issued, and the comm worker completes them while the block is held;
// the next block then finds them complete when it waits.
TEST_CASE("zero overlap: stage 3 prefetches the next block's allgather during the current block",
          "[multirank]") {
  const ToyModel m(4, 10);  // params: 0 = E (blocks 0, 3), 1 + 2b = W_b, 2 + 2b = c_b
  ZeroOptions z = overlapOptions(3, true);
  auto res = runTraced(m, 2, z, 2, [&](ZeroEngine& e, int b, bool bwd, RankResult& out) {
    const int next = bwd ? b - 1 : b + 1;
    if (next < 0 || next >= m.L) return;
    for (size_t p : {size_t(1 + 2 * next), size_t(2 + 2 * next)})
      if (!e.gatherIssued(p))
        out.failures.push_back(fmt::format("{} block {}: param {} of block {} not issued",
                                           bwd ? "backward" : "forward", b, p, next));
    if (!waitUntil([&] {
          auto st = e.pipeline();
          return st.gathersCompletedInFlight == st.gathersInFlight;
        }))
      out.failures.push_back("prefetched allgathers did not complete while the block was held");
  });
  for (size_t r = 0; r < res.size(); ++r) {
    INFO("rank " << r);
    for (const auto& f : res[r].failures) FAIL_CHECK(f);
    for (const auto& t : res[r].steps) {
      INFO(show(t));
      for (int b = 0; b + 1 < m.L; ++b) {  // forward: W_{b+1} issued before block b ends
        const int64_t w = 1 + 2 * (b + 1);
        const ptrdiff_t iss = indexOf(t, Kind::kGatherIssued, w);
        CHECK(iss >= 0);
        CHECK(iss < indexOf(t, Kind::kAfterForward, b));
        const ptrdiff_t wt = indexOf(t, Kind::kGatherWaited, w);
        CHECK(wt > indexOf(t, Kind::kBeforeForward, b + 1));
        CHECK(t[size_t(wt)].completedBeforeWait);
      }
    }
  }
}

// stage3_prefetch_bucket_size and stage3_max_live_parameters bound the prefetch: W (100
// elements) and c (10) of the next block are prefetched only when both budgets allow; the
// gathered non-persistent elements never exceed max(max_live, the block being computed).
TEST_CASE("zero overlap: stage 3 prefetch honours prefetch bucket size and max live parameters",
          "[multirank]") {
  const ToyModel m(4, 10);
  struct Case {
    size_t prefetch, maxLive;
    bool wantW, wantC;  // next block's W / c gathered during the current forward block
  };
  // live during a middle block = its W + c = 110 (120 in blocks 0 and 3, which also hold E)
  const std::vector<Case> cases = {
      {1000, 1000000, true, true},  // unbounded
      {110, 1000000, true, true},   // exactly W + c
      {100, 1000000, true, false},  // W only
      {50, 1000000, false, false},  // W does not fit: nothing (in order)
      {1000, 240, true, true},      // two blocks fit under the cap
      {1000, 200, false, false},    // the next W would pass the cap
  };
  for (const auto& c : cases) {
    INFO("prefetch " << c.prefetch << " maxLive " << c.maxLive);
    ZeroOptions z = overlapOptions(3, true);
    z.prefetchBucketSize = c.prefetch;
    z.maxLiveParameters = c.maxLive;
    auto res = runTraced(m, 2, z, 2, [&](ZeroEngine& e, int b, bool bwd, RankResult& out) {
      if (bwd || b != 1) return;
      out.notes.push_back(
          fmt::format("{}{}", e.gatherIssued(5) ? "W" : "-", e.gatherIssued(6) ? "c" : "-"));
      const auto st = e.pipeline();
      if (st.liveElems > std::max<size_t>(c.maxLive, 120))
        out.failures.push_back(fmt::format("live {} in block {}", st.liveElems, b));
    });
    const std::string want = fmt::format("{}{}", c.wantW ? "W" : "-", c.wantC ? "c" : "-");
    for (size_t r = 0; r < res.size(); ++r) {
      INFO("rank " << r);
      CHECK(res[r].notes == std::vector<std::string>{want, want});
      for (const auto& f : res[r].failures) FAIL_CHECK(f);
      CHECK(res[r].end.peakLiveElems <= std::max<size_t>(c.maxLive, 120));
      CHECK(res[r].end.peakLiveElems >= 110);
    }
  }
}

// offload_param nvme: while block b computes, the swap reads of block b+2's partition (the block
// after the prefetched one) are in flight and finish; block b+1's prefetch then takes the bytes
// instead of reading. Same parameters, bit for bit, as the partition kept in memory.
TEST_CASE("zero overlap: offload_param nvme reads the partition ahead, bitwise as in memory",
          "[multirank]") {
  const ToyModel m(5, 10);
  ds::test::TempDir dir;
  ZeroOptions z = overlapOptions(3, true);
  z.prefetchBucketSize = 110;  // the next block's W + c
  auto inMemory = runTraced(m, 2, z, 3, [](ZeroEngine&, int, bool, RankResult&) {});
  z.offloadParam.device = "nvme";
  z.offloadParam.nvmePath = dir.path();
  auto res = runTraced(m, 2, z, 3, [&](ZeroEngine& e, int b, bool bwd, RankResult& out) {
    const int ahead = bwd ? b - 2 : b + 2;
    if (ahead < 0 || ahead >= m.L) return;
    const auto st = e.pipeline();
    if (st.swapReadsAhead < 2)
      out.failures.push_back(
          fmt::format("block {}: {} read-aheads in flight", b, st.swapReadsAhead));
    if (!waitUntil([&] {
          auto s = e.pipeline();
          return s.swapReadsAheadCompleted == s.swapReadsAhead;
        }))
      out.failures.push_back("read-aheads did not finish while the block was held");
  });
  for (size_t r = 0; r < res.size(); ++r) {
    INFO("rank " << r);
    for (const auto& f : res[r].failures) FAIL_CHECK(f);
    CHECK(res[r].params == inMemory[r].params);
    CHECK(res[r].params == res[0].params);
    for (const auto& t : res[r].steps) {
      INFO(show(t));
      for (int b = 0; b + 2 < m.L; ++b) {  // forward
        const int64_t w = 1 + 2 * (b + 2);
        const ptrdiff_t iss = indexOf(t, Kind::kSwapReadIssued, w);
        CHECK(iss >= 0);
        CHECK(iss < indexOf(t, Kind::kAfterForward, b));
        const ptrdiff_t took = indexOf(t, Kind::kSwapReadWaited, w);
        CHECK(took > indexOf(t, Kind::kAfterForward, b));
        CHECK(took < indexOf(t, Kind::kGatherIssued, w));
        CHECK(t[size_t(took)].completedBeforeWait);
      }
    }
  }
}

// reduce_scatter=false (stages 1/2) allreduces every gradient bucket (the trace marks how each
// bucket was reduced); the default reduce-scatters them, stage 0 allreduces; the trained params
// are the same either way (world 2: bitwise).
TEST_CASE("zero overlap: reduce_scatter false allreduces the buckets at stages 1 and 2",
          "[multirank]") {
  const ToyModel m(4, 10);
  auto none = [](ZeroEngine&, int, bool, RankResult&) {};
  const auto base = runTraced(m, 2, overlapOptions(0, false), 2, none);
  for (int stage : {1, 2})
    for (bool rs : {true, false}) {
      INFO("stage " << stage << " reduce_scatter " << rs);
      ZeroOptions z = overlapOptions(stage, stage == 2);
      z.reduceScatter = rs;
      const auto res = runTraced(m, 2, z, 2, none);
      for (size_t r = 0; r < res.size(); ++r) {
        size_t issued = 0, allreduced = 0;
        for (const auto& t : res[r].steps)
          for (const auto& e : t)
            if (e.kind == Kind::kBucketIssued) {
              ++issued;
              allreduced += e.allreduce;
            }
        CHECK(issued >= 4);  // several buckets per step (bucket 37 elements)
        CHECK(allreduced == (rs ? 0 : issued));
        CHECK(res[r].params == base[r].params);
      }
    }
  for (const auto& t : base[0].steps)
    for (const auto& e : t)
      if (e.kind == Kind::kBucketIssued) CHECK(e.allreduce);
}
