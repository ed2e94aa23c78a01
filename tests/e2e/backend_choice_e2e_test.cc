// The comm backend precedence through the real binaries (dsrun, then dsrt train on 2 ranks):
// dsrun's --comm_backend beats the plan's comm_backend, and the plan beats DS_COMM_BACKEND. The
// losing choice is one that cannot run here (mpi outside mpirun, an unknown name), so the job
// succeeds only when the winner is the one the precedence says; the last case shows the losing
// choice really is read (alone, it fails naming the setting).
#include <catch2/catch.hpp>

#include <string>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string bin(const std::string& name) { return std::string(DS_BINARY_DIR) + "/" + name; }

// `dsrun --num_gpus 2 <dsrunFlags> train` for two steps, output in the temp dir.
std::string train(const TempDir& dir, const std::string& envPrefix, const std::string& dsrunFlags,
                  const std::string& trainFlags) {
  return envPrefix + " " + bin("dsrun") + " --num_gpus 2 --master_port " +
         std::to_string(ds::test::freePort()) + " " + dsrunFlags +
         " train --set train.steps=2 --set train.log_every=1 --set train.eval_every=0"
         " --set train.checkpoint.dir=" +
         dir.path() + " " + trainFlags + " 2>&1";
}

}  // namespace

TEST_CASE("e2e backend choice: dsrun --comm_backend beats the plan's comm_backend", "[e2e]") {
  TempDir dir;
  std::string out;
  // The plan asks for mpi, which refuses to run outside mpirun (or is not built).
  int rc = runCommand(
      train(dir, "DS_TIMEOUT=60", "--comm_backend gloo", "--set deepspeed.comm_backend=mpi"), &out,
      std::chrono::seconds(180));
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("comm backend 'gloo' (from dsrun --comm_backend"));
}

TEST_CASE("e2e backend choice: dsrt --comm_backend beats dsrun's and the plan's", "[e2e]") {
  TempDir dir;
  std::string out;
  int rc = runCommand(train(dir, "DS_TIMEOUT=60 DS_COMM_BACKEND_FLAG=mpi", "",
                            "--set deepspeed.comm_backend=mpi --comm_backend gloo"),
                      &out, std::chrono::seconds(180));
  INFO(out);
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("comm backend 'gloo' (from dsrt --comm_backend)"));
}

TEST_CASE("e2e backend choice: the plan beats DS_COMM_BACKEND, which alone is obeyed", "[e2e]") {
  {
    TempDir dir;
    std::string out;
    int rc = runCommand(train(dir, "DS_TIMEOUT=60 DS_COMM_BACKEND=carrier-pigeon", "",
                              "--set deepspeed.comm_backend=gloo"),
                        &out, std::chrono::seconds(180));
    INFO(out);
    CHECK(rc == 0);
    CHECK_THAT(out, Catch::Contains("comm backend 'gloo' (from the plan's comm_backend)"));
  }
  {
    TempDir dir;
    std::string out;
    int rc = runCommand(train(dir, "DS_TIMEOUT=60 DS_COMM_BACKEND=carrier-pigeon", "", ""), &out,
                        std::chrono::seconds(180));
    INFO(out);
    CHECK(rc != 0);
    CHECK_THAT(out, Catch::Contains("'carrier-pigeon' is not built") &&
                        Catch::Contains("(chosen by DS_COMM_BACKEND)"));
  }
}
