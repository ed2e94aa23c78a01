// The CPU thread policy's decision (runtime/tensor/thread_policy.h): cores, local ranks and the
// overrides (train.threads / --threads, OMP_NUM_THREADS) -> OpenMP threads and OpenBLAS threads,
// the line it logs, and that applying it sets OpenMP's team and holds OpenBLAS at 1 thread.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "runtime/tensor/thread_policy.h"
#include "runtime/tensor/threads.h"

using ds::runtime::decideThreadPolicy;
using ds::runtime::describeThreadPolicy;
using ds::runtime::ThreadPolicyInput;

namespace {

ThreadPolicyInput in(int cores, int local, int requested = 0, const char* omp = nullptr) {
  ThreadPolicyInput i;
  i.cores = cores;
  i.localRanks = local;
  i.requested = requested;
  if (omp != nullptr) i.omp = omp;
  return i;
}

}  // namespace

TEST_CASE("thread policy: auto is cores / local ranks, at least 1, OpenBLAS always 1", "[unit]") {
  auto p = decideThreadPolicy(in(16, 1));
  CHECK(p.threads == 16);
  CHECK(p.blasThreads == 1);
  CHECK(p.source == "auto");
  CHECK(decideThreadPolicy(in(16, 4)).threads == 4);
  CHECK(decideThreadPolicy(in(2, 2)).threads == 1);
  CHECK(decideThreadPolicy(in(10, 4)).threads == 2);  // floor: never oversubscribe by default
  CHECK(decideThreadPolicy(in(2, 8)).threads == 1);   // more ranks than cores: still 1
  CHECK(decideThreadPolicy(in(2, 8)).blasThreads == 1);
}

TEST_CASE("thread policy: OMP_NUM_THREADS overrides auto, the plan key overrides both", "[unit]") {
  auto p = decideThreadPolicy(in(16, 4, 0, "3"));
  CHECK(p.threads == 3);
  CHECK(p.source == "OMP_NUM_THREADS");
  CHECK(decideThreadPolicy(in(16, 4, 0, "6,2")).threads == 6);   // nested list: outermost level
  CHECK(decideThreadPolicy(in(16, 4, 0, "")).source == "auto");  // empty counts as unset
  p = decideThreadPolicy(in(16, 4, 5, "3"));
  CHECK(p.threads == 5);
  CHECK(p.source == "train.threads");
  CHECK(p.blasThreads == 1);
  CHECK(decideThreadPolicy(in(16, 4, 5), "--threads").source == "--threads");
}

TEST_CASE("thread policy: a bad OMP_NUM_THREADS or request is a ConfigError naming it", "[unit]") {
  for (const char* bad : {"0", "-1", "two", "4x"}) {
    INFO(bad);
    try {
      decideThreadPolicy(in(4, 1, 0, bad));
      FAIL("accepted OMP_NUM_THREADS=" << bad);
    } catch (const ds::ConfigError& e) {
      CHECK_THAT(e.what(), Catch::Contains("OMP_NUM_THREADS"));
    }
  }
  CHECK_THROWS_WITH(decideThreadPolicy(in(4, 1, -2)), Catch::Contains("train.threads"));
}

TEST_CASE("thread policy: the logged line names the count, its source and oversubscription",
          "[unit]") {
  auto s = describeThreadPolicy(decideThreadPolicy(in(2, 1)));
  CHECK_THAT(s, Catch::Contains("threads 2 (auto: 2 cores / 1 local rank)"));
  CHECK_THAT(s, Catch::Contains("OpenBLAS 1 thread per call"));
  CHECK_THAT(s, !Catch::Contains("oversubscribed"));
  s = describeThreadPolicy(decideThreadPolicy(in(2, 2, 2)));
  CHECK_THAT(s, Catch::Contains("from train.threads"));
  CHECK_THAT(s, Catch::Contains("oversubscribed: 2 ranks x 2 threads on 2 cores"));
}

TEST_CASE("thread policy: input reads LOCAL_SIZE and OMP_NUM_THREADS from the environment",
          "[unit]") {
  auto i = ds::runtime::threadPolicyInput({{"RANK", "0"},
                                           {"WORLD_SIZE", "3"},
                                           {"LOCAL_RANK", "0"},
                                           {"LOCAL_SIZE", "3"},
                                           {"OMP_NUM_THREADS", "7"}},
                                          0);
  CHECK(i.localRanks == 3);
  CHECK(i.cores >= 1);
  REQUIRE(i.omp.has_value());
  CHECK(*i.omp == "7");
  CHECK_FALSE(ds::runtime::threadPolicyInput({}, 4).omp.has_value());
  CHECK(ds::runtime::threadPolicyInput({}, 4).requested == 4);
}

TEST_CASE("thread policy: apply sets OpenMP's team, OpenBLAS 1 thread, and is remembered",
          "[unit]") {
  const int before = ds::runtime::computeThreads();
  auto p = decideThreadPolicy(in(8, 1, 3));
  ds::runtime::applyThreadPolicy(p);
  CHECK(ds::runtime::computeThreads() == 3);
  CHECK(ds::runtime::blasThreads() == 1);
  auto got = ds::runtime::appliedThreadPolicy();
  REQUIRE(got.has_value());
  CHECK(got->threads == 3);
  CHECK(got->source == "train.threads");
  ds::runtime::setComputeThreads(before);
}
