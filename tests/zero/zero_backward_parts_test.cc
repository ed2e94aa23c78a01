// Stage 3 with backward parts (zero::ParamInfo::backwardPart, BlockHooks::beforeBackwardPart): the
// ToyModel's blocks read W_b in part 0 and add c_b's gradient in part 1. At the part boundary the
// engine releases W_b's gathered copy and reduces its gradient, and only then prefetches the
// previous block's part 0, so a block's backward ends holding less than without parts; training
// is bitwise the same as without parts (world 2 and 3, overlap on and off, accumulation) and as
// stage 0 at world 2. Also: the index refuses parts it cannot honour, and the engine a part hook
// for a block without parts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "tests/zero/zero_ranks.h"
#include "zero/param_index.h"

using namespace ds;
using namespace ds::zero;
using ds::test::ToyModel;
using ds::test::toyStage3;
using ds::test::ZeroJob;

namespace {

// Stage 0, then stage 3 without overlap_comm and with it (and 2 micro-steps); records the largest
// number of gathered elements live at the end of a backward block's compute (blocks 1..L-1, every
// rank).
std::vector<ds::test::ZeroRun> train(ToyModel& m, int world, size_t& liveAtEnd) {
  std::mutex mu;
  liveAtEnd = 0;
  m.inBlock = [&](ZeroEngine& e, int block, bool backward) {
    if (!backward || block == 0 || e.pipeline().liveElems == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    liveAtEnd = std::max(liveAtEnd, e.pipeline().liveElems);
  };
  ZeroJob base;
  base.gas = 1;  // stage 3 reduces every micro-step: the same sums as stage 0 only at gas 1
  base.clip = 0;
  std::vector<ZeroJob> jobs{base};
  for (bool overlap : {false, true}) {
    ZeroJob j = base;
    j.z = toyStage3(overlap);
    j.gas = overlap ? 2 : 1;  // accumulation: parts reduce each micro-step's gradients too
    jobs.push_back(j);
  }
  auto runs = ds::test::runZeroJobs(m, world, jobs);
  m.inBlock = nullptr;
  return runs;
}

}  // namespace

TEST_CASE("zero backward parts: stage 3 releases and reduces part by part, same bits",
          "[multirank]") {
  const int L = 4;
  ToyModel plain(L, 10);
  ToyModel parted(L, 10, false, false, /*backwardParts=*/true);
  REQUIRE(parted.params[2].backwardPart == 1);  // c0
  for (int world : {2, 3}) {
    INFO("world " << world);
    size_t livePlain = 0, liveParted = 0;
    const auto a = train(plain, world, livePlain);
    const auto b = train(parted, world, liveParted);
    REQUIRE(a[0].losses.back() < a[0].losses.front());
    for (size_t i = 1; i < a.size(); ++i) {
      INFO("overlap " << (i == 2));
      CHECK(b[i].ranksAgree);
      CHECK(b[i].losses == a[i].losses);
      CHECK(std::memcmp(b[i].params.data(), a[i].params.data(), a[i].params.size() * 4) == 0);
      if (world == 2 && i == 1) CHECK(b[i].losses == a[0].losses);
    }
    // Without parts a block ends its backward holding W_b, c_b and the prefetched W_{b-1},
    // c_{b-1}; with parts W_b is gone before the prefetch (which takes part 0 only: W_{b-1}).
    const size_t chunkW = (100 + size_t(world) - 1) / size_t(world);
    CHECK(liveParted > 0);
    CHECK(liveParted + chunkW * size_t(world) <= livePlain);
  }
}

TEST_CASE("zero backward parts: the index and the engine refuse parts they cannot honour",
          "[unit]") {
  ToyModel m(3, 4);
  SECTION("a tied parameter with a part > 0") {
    auto params = m.params;
    params[0].backwardPart = 1;  // E: blocks {0, 2}
    REQUIRE_THROWS_WITH(ParamIndex(params, 3),
                        Catch::Contains("'E'") && Catch::Contains("several blocks"));
  }
  SECTION("a negative part") {
    auto params = m.params;
    params[1].backwardPart = -1;
    REQUIRE_THROWS_WITH(ParamIndex(params, 3),
                        Catch::Contains("'W0'") && Catch::Contains("expected >= 0"));
  }
  SECTION("the part hook of a block without parts") {
    ZeroOptions z;
    z.stage = 3;
    ZeroEngine eng(m.params, m.L, nullptr, z, ds::test::toyOptimizer());
    eng.setParams(m.init().data());
    eng.beginStep(true);
    eng.beforeBackward(2);
    REQUIRE_THROWS_AS(eng.beforeBackwardPart(2, 1), InternalError);
  }
}
