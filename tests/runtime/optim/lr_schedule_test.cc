// LR schedules against DeepSpeed's formulas evaluated by hand at chosen iterations, including
// the first step (iteration -1) and DeepSpeed's max(2, warmup_num_steps) clamp.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "runtime/optim/lr_schedule.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

TEST_CASE("lr: no scheduler is the optimizer's lr", "[unit]") {
  auto s = makeLrSchedule(SchedulerConfig{}, 3e-4);
  CHECK(s->lrForStep(0) == 3e-4);
  CHECK(s->lrAt(1000) == 3e-4);
}

TEST_CASE("lr: WarmupLR log and linear", "[unit]") {
  SchedulerConfig c;
  c.type = "WarmupLR";
  c.warmupMinLr = 1e-5;
  c.warmupMaxLr = 1e-3;
  c.warmupNumSteps = 10;
  auto s = makeLrSchedule(c, 0.5);  // base lr ignored by WarmupLR
  CHECK(s->lrAt(-1) == 1e-5);       // set at construction: the first step's lr
  CHECK(s->lrForStep(0) == 1e-5);
  CHECK(s->lrAt(0) == Approx(1e-5));  // log(1) = 0
  CHECK(s->lrAt(4) == Approx(1e-5 + (1e-3 - 1e-5) * std::log(5.0) / std::log(10.0)));
  CHECK(s->lrAt(9) == Approx(1e-3));
  CHECK(s->lrAt(500) == 1e-3);
  c.warmupType = "linear";
  auto l = makeLrSchedule(c, 0.5);
  CHECK(l->lrAt(5) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5));
  c.warmupNumSteps = 1;  // clamped to 2 as DeepSpeed does
  auto t = makeLrSchedule(c, 0.5);
  CHECK(t->lrAt(1) == Approx(1e-5 + (1e-3 - 1e-5) * 0.5));
}

TEST_CASE("lr: WarmupDecayLR decays linearly to 0 at total_num_steps", "[unit]") {
  SchedulerConfig c;
  c.type = "WarmupDecayLR";
  c.warmupNumSteps = 10;
  c.totalNumSteps = 20;
  c.warmupType = "linear";
  auto s = makeLrSchedule(c, 1);
  CHECK(s->lrAt(10) == Approx(1e-3));
  CHECK(s->lrAt(15) == Approx(0.5e-3));
  CHECK(s->lrAt(20) == 0.0);
  CHECK(s->lrAt(25) == 0.0);
}

TEST_CASE("lr: WarmupCosineLR scales the optimizer lr by its ratio", "[unit]") {
  SchedulerConfig c;
  c.type = "WarmupCosineLR";
  c.warmupNumSteps = 10;
  c.totalNumSteps = 20;
  c.warmupMinRatio = 0.1;
  c.warmupType = "linear";
  auto s = makeLrSchedule(c, 2e-3);
  CHECK(s->lrAt(-1) == 0.0);
  CHECK(s->lrAt(0) == Approx(2e-3 * 0.1));
  CHECK(s->lrAt(5) == Approx(2e-3 * (0.1 + 0.5 * 0.9)));
  double r = (1 + std::cos(std::numbers::pi * 1 / 10)) / 2;
  CHECK(s->lrAt(10) == Approx(2e-3 * (1e-4 + (1 - 1e-4) * r)));
  CHECK(s->lrAt(19) == Approx(2e-3 * 1e-4));  // cos(pi) = -1: cos_min_ratio
}

TEST_CASE("lr: bad scheduler configs are named", "[unit]") {
  SchedulerConfig c;
  c.type = "OneCycle";
  CHECK_THROWS_WITH(makeLrSchedule(c, 1), Contains("scheduler.type: unknown scheduler 'OneCycle'"));
  c.type = "WarmupDecayLR";
  CHECK_THROWS_WITH(makeLrSchedule(c, 1),
                    Contains("scheduler.params.total_num_steps: required by WarmupDecayLR"));
  c.type = "WarmupLR";
  c.warmupType = "cubic";
  CHECK_THROWS_AS(makeLrSchedule(c, 1), ds::ConfigError);
}

TEST_CASE("lr: WarmupCosineLR with total <= warmup warms up, then holds cos_min_ratio", "[unit]") {
  SchedulerConfig c;
  c.type = "WarmupCosineLR";
  c.warmupNumSteps = 20;
  c.totalNumSteps = 10;  // derived from a 10-step run of a plan with a 20-step warmup
  c.warmupType = "linear";
  c.cosMinRatio = 0.1;
  auto s = makeLrSchedule(c, 1.0);
  CHECK(s->lrAt(0) == Approx(0.0));
  CHECK(s->lrAt(9) == Approx(9.0 / 20));
  CHECK(s->lrAt(25) == Approx(0.1));
}
