// CSV monitor in DeepSpeed's layout, the step line, and which ranks write.
#include <catch2/catch.hpp>

#include <filesystem>

#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/step_line.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using Catch::Matchers::Contains;

TEST_CASE("csv monitor: one file per event, DeepSpeed names and header", "[unit]") {
  ds::test::TempDir dir;
  CsvMonitor m(MonitorConfig{true, dir.path(), "run1"});
  m.write(trainEvents(32, 2.25, 0.001, 1, 0.5));
  m.write(trainEvents(64, 2.0, 0.002, 1, 0.25));
  std::string base = dir.path() + "/run1/";
  CHECK(ds::test::readFile(base + "Train_Samples_train_loss.csv") ==
        "step,train_loss\n32,2.25\n64,2\n");
  CHECK(ds::test::readFile(base + "Train_Samples_lr.csv") == "step,lr\n32,0.001\n64,0.002\n");
  CHECK(std::filesystem::exists(base + "Train_Samples_loss_scale.csv"));
  m.write(timingEvents(64, 1.5, 2.5, 0.5, 0.25));
  CHECK(ds::test::readFile(base + "Train_Samples_elapsed_time_ms_backward_allreduce.csv") ==
        "step,elapsed_time_ms_backward_allreduce\n64,0.5\n");
  m.write({{"eval loss", 1.5, 64}});
  CHECK(ds::test::readFile(base + "eval_loss.csv") == "step,eval loss\n64,1.5\n");
}

TEST_CASE("monitors: only rank 0 writes, only enabled blocks", "[unit]") {
  ds::test::TempDir dir;
  DsConfig cfg;
  cfg.csvMonitor = {true, dir.path(), "j"};
  CHECK(MonitorSet(cfg, 1).empty());
  CHECK(MonitorSet(DsConfig{}, 0).empty());
  MonitorSet set(cfg, 0);
  CHECK_FALSE(set.empty());
  set.write(trainEvents(8, 1, 1, 1, 1));
  CHECK(std::filesystem::exists(dir.path() + "/j/Train_Samples_lr.csv"));
}

TEST_CASE("step line: every field of DESIGN §4.11", "[unit]") {
  StepMetrics m;
  m.step = 12;
  m.totalSteps = 200;
  m.loss = 3.14159;
  m.lr = 1e-3;
  m.lossScale = 65536;
  m.gradNorm = 0.5321;
  m.tokensPerSec = 12345;
  m.stepMs = 45.1;
  m.fwdMs = 10;
  m.bwdMs = 20;
  m.commMs = 5;
  m.optimMs = 8;
  std::string l = formatStepLine(m);
  CHECK(l ==
        "step    12/200 | loss 3.1416 | lr 1.00e-03 | scale 65536 | gnorm 0.532 | 12.3k tok/s "
        "| 45.1 ms (fwd 10.0 bwd 20.0 comm 5.0 optim 8.0)");
  m.skipped = true;
  CHECK_THAT(formatStepLine(m), Contains("SKIPPED (overflow)"));
  CHECK(formatEvalLine(100, 1.25, 1.2425) ==
        "eval step 100 | val loss 1.2500 | floor 1.2425 (+0.0075)");
  CHECK(formatEvalLine(100, 1.25, -1) == "eval step 100 | val loss 1.2500");
}

TEST_CASE("csv monitor: a symlink planted at a metric file is refused, its target untouched",
          "[unit]") {
  ds::test::TempDir dir, elsewhere;
  ds::test::writeFile(elsewhere.file("victim"), "precious\n");
  std::filesystem::create_directories(dir.path() + "/run1");
  const std::string planted = dir.path() + "/run1/Train_Samples_lr.csv";
  std::filesystem::create_symlink(elsewhere.file("victim"), planted);
  CsvMonitor m(MonitorConfig{true, dir.path(), "run1"});
  CHECK_THROWS_WITH(m.write(trainEvents(32, 2.25, 0.001, 1, 0.5)),
                    Contains("csv_monitor file " + planted) && Contains("symbolic link"));
  CHECK(ds::test::readFile(elsewhere.file("victim")) == "precious\n");
}
