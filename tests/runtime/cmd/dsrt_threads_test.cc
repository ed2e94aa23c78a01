// `dsrt train` applies the CPU thread policy (runtime/tensor/thread_policy.h) and reports it: the
// startup line and the run summary's "threads" block name the OpenMP count, OpenBLAS's 1 thread
// and where the count came from (train.threads over OMP_NUM_THREADS over cores / local ranks).
// Behaviour only: no timing.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using Catch::Matchers::Contains;
using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string trainCommand(const TempDir& dir, const std::string& env, const std::string& sets) {
  ds::test::writeFile(dir.file("plan.yaml"),
                      "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, "
                      "vocab_size: 64}\ntrain: {steps: 2}\ndeepspeed:\n"
                      "  train_batch_size: 4\n  train_micro_batch_size_per_gpu: 4\n");
  return "cd " + dir.path() +
         " && env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_SIZE -u MASTER_ADDR -u MASTER_PORT "
         "-u OMP_NUM_THREADS " +
         env + " " + DS_BINARY_DIR + "/dsrt train plan.yaml --summary s.json " + sets + " 2>&1";
}

nlohmann::json summary(const TempDir& dir) {
  std::ifstream f(dir.file("s.json"));
  return nlohmann::json::parse(f);
}

}  // namespace

TEST_CASE("dsrt train: reports the thread policy it applied", "[unit]") {
  TempDir dir;
  std::string out;
  SECTION("train.threads wins over OMP_NUM_THREADS") {
    int rc = runCommand(trainCommand(dir, "OMP_NUM_THREADS=2", "--set train.threads=3"), &out,
                        std::chrono::seconds(120));
    INFO(out);
    REQUIRE(rc == 0);
    CHECK_THAT(out, Contains("threads 3 (from train.threads;"));
    CHECK_THAT(out, Contains("OpenBLAS 1 thread per call"));
    auto j = summary(dir);
    CHECK(j["threads"]["omp"] == 3);
    CHECK(j["threads"]["blas"] == 1);
    CHECK_THAT(j["threads"]["policy"].get<std::string>(), Contains("from train.threads"));
  }
  SECTION("OMP_NUM_THREADS when the plan says auto") {
    int rc =
        runCommand(trainCommand(dir, "OMP_NUM_THREADS=2", ""), &out, std::chrono::seconds(120));
    INFO(out);
    REQUIRE(rc == 0);
    CHECK(summary(dir)["threads"]["omp"] == 2);
    CHECK_THAT(out, Contains("threads 2 (from OMP_NUM_THREADS;"));
  }
  SECTION("auto: cores / local ranks") {
    int rc = runCommand(trainCommand(dir, "", ""), &out, std::chrono::seconds(120));
    INFO(out);
    REQUIRE(rc == 0);
    CHECK_THAT(out, Contains("(auto: "));
    CHECK(summary(dir)["threads"]["omp"].get<int>() >= 1);
  }
  SECTION("a bad OMP_NUM_THREADS is refused naming it") {
    int rc =
        runCommand(trainCommand(dir, "OMP_NUM_THREADS=lots", ""), &out, std::chrono::seconds(120));
    INFO(out);
    CHECK(rc != 0);
    CHECK_THAT(out, Contains("OMP_NUM_THREADS='lots'"));
  }
  SECTION("a negative train.threads is refused naming the key") {
    int rc = runCommand(trainCommand(dir, "", "--set train.threads=-1"), &out,
                        std::chrono::seconds(120));
    INFO(out);
    CHECK(rc != 0);
    CHECK_THAT(out, Contains("threads"));
  }
}
