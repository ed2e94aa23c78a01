// Stage 3 with a parameter tied across adjacent AND distant blocks: the ToyModel's E is used by
// blocks 0, 1 and L-1 (tieNext), persistence threshold 0 so E is gathered and released like any
// other parameter. The engine's trace shows E kept gathered from block 0 into block 1 (no second
// gather, no release in between), released once block 1 is done, gathered again for block L-1,
// and its gradient (summed over the three uses) reduced once per step; training matches stage 0
// bitwise at world 2 (gas 1: same summation order) and within 1e-5 at world 3.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tests/zero/zero_ranks.h"

using namespace ds;
using namespace ds::zero;
using ds::test::ToyModel;
using ds::test::toyStage3;
using ds::test::ZeroJob;
using Kind = TraceEvent::Kind;

namespace {

// Index of the first event (kind, id) at or after `from`; -1 when none.
ptrdiff_t find(const std::vector<TraceEvent>& t, Kind k, int64_t id, size_t from = 0) {
  for (size_t i = from; i < t.size(); ++i)
    if (t[i].kind == k && t[i].id == id) return ptrdiff_t(i);
  return -1;
}

size_t count(const std::vector<TraceEvent>& t, Kind k, int64_t id, size_t a, size_t b) {
  size_t n = 0;
  for (size_t i = a; i < b && i < t.size(); ++i) n += t[i].kind == k && t[i].id == id;
  return n;
}

}  // namespace

TEST_CASE(
    "zero tied parameters: stage 3 gathers/releases a param tied to adjacent and distant "
    "blocks and matches stage 0",
    "[multirank]") {
  const int L = 4;
  const ToyModel m(L, 10, false, /*tieNextBlock=*/true);
  REQUIRE(m.params[0].blocks == std::vector<int>({0, 1, L - 1}));
  for (int world : {2, 3}) {
    INFO("world " << world);
    std::vector<TraceEvent> trace;  // rank 0, the first step
    std::vector<ZeroJob> jobs;
    ZeroJob base;
    base.gas = 1;
    base.clip = 0;
    jobs.push_back(base);  // stage 0
    for (bool overlap : {false, true}) {
      ZeroJob j = base;
      j.z = toyStage3(overlap);
      j.steps = 20;
      if (!overlap) {
        j.setup = [](ZeroEngine& e, int) { e.enableTrace(true); };
        j.finish = [&trace](ZeroEngine& e, int r) {
          if (r == 0) trace = e.takeTrace();
        };
      }
      jobs.push_back(j);
    }
    auto runs = ds::test::runZeroJobs(m, world, jobs);
    REQUIRE(runs[0].losses.back() < runs[0].losses.front());
    for (size_t i = 1; i < runs.size(); ++i) {
      INFO("overlap " << (i == 2));
      CHECK(runs[i].ranksAgree);
      if (world == 2) {
        CHECK(runs[i].losses == runs[0].losses);
        CHECK(std::memcmp(runs[i].params.data(), runs[0].params.data(),
                          runs[0].params.size() * 4) == 0);
      } else {
        CHECK(ds::test::maxRelDiff(runs[i].losses, runs[0].losses) <= 1e-5);
      }
    }

    // The first step's events (up to the second step's first forward).
    REQUIRE_FALSE(trace.empty());
    const ptrdiff_t f0 = find(trace, Kind::kBeforeForward, 0);
    const ptrdiff_t f0end = find(trace, Kind::kAfterForward, 0);
    const ptrdiff_t f1 = find(trace, Kind::kBeforeForward, 1);
    const ptrdiff_t f1end = find(trace, Kind::kAfterForward, 1);
    const ptrdiff_t fL = find(trace, Kind::kBeforeForward, L - 1);
    const ptrdiff_t b0end = find(trace, Kind::kAfterBackward, 0);
    const ptrdiff_t bL = find(trace, Kind::kBeforeBackward, L - 1);
    const ptrdiff_t bLend = find(trace, Kind::kAfterBackward, L - 1);
    const ptrdiff_t b1 = find(trace, Kind::kBeforeBackward, 1);
    REQUIRE(f0 >= 0);
    REQUIRE(b0end > f0);
    // the step ends at the next step's first forward (the hooks note themselves first)
    const ptrdiff_t next = find(trace, Kind::kBeforeForward, 0, size_t(b0end));
    REQUIRE(next > b0end);
    const size_t end = size_t(next);
    // E gathered for block 0, kept into block 1 (adjacent): one gather, no release in between.
    CHECK(find(trace, Kind::kGatherIssued, 0) > f0);
    CHECK(find(trace, Kind::kGatherIssued, 0) < f0end);
    CHECK(count(trace, Kind::kGatherIssued, 0, size_t(f0), size_t(f1end)) == 1);
    CHECK(count(trace, Kind::kReleased, 0, size_t(f0), size_t(f1end)) == 0);
    CHECK(f1 > f0end);
    // released after block 1 (block 2 does not use it), gathered again for block L-1 (distant)
    const ptrdiff_t rel1 = find(trace, Kind::kReleased, 0, size_t(f1end));
    REQUIRE(rel1 > 0);
    CHECK(rel1 < fL);
    const ptrdiff_t g2 = find(trace, Kind::kGatherIssued, 0, size_t(rel1));
    REQUIRE(g2 > 0);
    CHECK(g2 < find(trace, Kind::kAfterForward, L - 1));
    // kept from block L-1's forward into its backward, released after it, gathered once more
    // for block 1's backward, kept into block 0's, released at the end of backward
    CHECK(count(trace, Kind::kReleased, 0, size_t(g2), size_t(bL)) == 0);
    const ptrdiff_t rel2 = find(trace, Kind::kReleased, 0, size_t(bLend));
    REQUIRE(rel2 > 0);
    CHECK(rel2 < b1);
    CHECK(count(trace, Kind::kGatherIssued, 0, size_t(rel2), size_t(b1)) == 1);
    CHECK(count(trace, Kind::kGatherIssued, 0, size_t(b1), end) == 0);
    CHECK(count(trace, Kind::kReleased, 0, size_t(b1), end) == 1);
    CHECK(count(trace, Kind::kGatherIssued, 0, size_t(f0), end) == 3);
    // every gather of E was waited for
    CHECK(count(trace, Kind::kGatherWaited, 0, size_t(f0), end) == 3);
  }
}
