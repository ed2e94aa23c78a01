// `dsrun --rank_exec -- program`, the rank wrapper mpirun, hydra and srun start for each rank: the
// built binary run the way those tools run it (their rank variables in its environment), with
// real exits, real signals and a real parent that dies. The report it prints is what
// parseRankReport reads (runner_failures_test.cc); the whole contract per runner is in
// tests/e2e/exit_contract_e2e_test.cc.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "ds/config.h"
#include "launcher/runner_failures.h"
#include "tests/support/spawn_ranks.h"

using Catch::Matchers::Contains;
using ds::launcher::parseRankReport;
using ds::test::readFile;
using ds::test::runCommand;
using ds::test::TempDir;
using ds::test::writeFile;

namespace {

const std::string kWrap = std::string(DS_BINARY_DIR) + "/dsrun --rank_exec -- ";
// Open MPI's variables for rank 5 (local rank 1) of 8, as orted sets them.
const std::string kOmpiRank5 =
    "DS_JOB_TOKEN=t OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 "
    "OMPI_COMM_WORLD_LOCAL_SIZE=2 ";

// True once `path` holds a pid line (the program wrote it), within 20 s.
bool waitFile(const std::string& path) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (::access(path.c_str(), F_OK) == 0 && !readFile(path).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool alive(int pid) { return ::kill(pid, 0) == 0; }

// The first rank report among out's lines (as dsrun reads them).
std::optional<ds::launcher::RemoteFailure> reportIn(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (auto f = parseRankReport(line)) return f;
  return std::nullopt;
}

}  // namespace

TEST_CASE("rank_exec: a rank's exit code and signal come out unchanged, reported once",
          "[multiproc]") {
  std::string out;
  CHECK(runCommand(kOmpiRank5 + kWrap + "sh -c 'exit 3'", &out, std::chrono::seconds(30)) == 3);
  auto f = reportIn(out);
  REQUIRE(f);
  CHECK(f->rank == 5);
  CHECK(f->status == 3);
  CHECK_THAT(out, Contains("dsrun: rank 5 (local rank 1, pid "));

  // Killed by a signal: the wrapper dies of the same signal (the tool sees a signalled rank).
  CHECK(runCommand(kOmpiRank5 + kWrap + "sh -c 'kill -SEGV $$'", &out, std::chrono::seconds(30)) ==
        128 + SIGSEGV);
  f = reportIn(out);
  REQUIRE(f);
  CHECK(f->status == 128 + SIGSEGV);
  CHECK(f->detail == "was killed by signal 11 (SIGSEGV)");

  // Success: silent, 0.
  CHECK(runCommand(kOmpiRank5 + kWrap + "sh -c 'echo hi'", &out, std::chrono::seconds(30)) == 0);
  CHECK(out == "hi\n");

  // A program that cannot start: 127, reported as such.
  CHECK(runCommand(kOmpiRank5 + kWrap + "/no/such/program", &out, std::chrono::seconds(30)) == 127);
  CHECK_THAT(out, Contains("cannot execute '/no/such/program'"));
  f = reportIn(out);
  REQUIRE(f);
  CHECK(f->status == 127);
}

TEST_CASE("rank_exec: bad arguments are one clear error, exit 2", "[multiproc]") {
  std::string out;
  CHECK(runCommand(std::string(DS_BINARY_DIR) + "/dsrun --rank_exec sh", &out,
                   std::chrono::seconds(30)) == 2);
  CHECK_THAT(out, Contains("dsrun --rank_exec: expected '-- program [args...]'"));
}

// The tool stops the rank: SIGTERM to the wrapper reaches the rank; one that ignores it is
// SIGKILLed after DS_KILL_GRACE, and a stopped rank is not reported as a failure.
TEST_CASE("rank_exec: SIGTERM stops the rank within DS_KILL_GRACE, no report", "[multiproc]") {
  for (bool ignores : {false, true}) {
    TempDir dir;
    std::string trap = ignores ? "trap \"\" TERM; " : "";
    std::string cmd = "echo $$ > " + dir.file("wrapper") + "; " + kOmpiRank5 +
                      "DS_KILL_GRACE=1 exec " + kWrap + "sh -c '" + trap + "echo $$ > " +
                      dir.file("rank") + "; while :; do sleep 0.1; done'";
    std::string out;
    std::thread stopper([&] {
      if (!waitFile(dir.file("rank"))) return;
      ::kill(std::stoi(readFile(dir.file("wrapper"))), SIGTERM);
    });
    auto t0 = std::chrono::steady_clock::now();
    int rc = runCommand(cmd, &out, std::chrono::seconds(30));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stopper.join();
    INFO("ignores SIGTERM: " << ignores << "\n" << out);
    REQUIRE(waitFile(dir.file("rank")));
    CHECK(rc == 128 + (ignores ? SIGKILL : SIGTERM));
    CHECK_FALSE(alive(std::stoi(readFile(dir.file("rank")))));
    CHECK_FALSE(reportIn(out));
    CHECK(secs < 20);  // the loop would run until runCommand's 30 s timeout
  }
}

// orted, hydra's proxy or slurmstepd dying is a stop: the rank does not run on without it.
TEST_CASE("rank_exec: the rank is stopped when the wrapper's parent dies", "[multiproc]") {
  TempDir dir;
  // The parent shell starts the wrapper in the background and is then SIGKILLed.
  writeFile(dir.file("parent.sh"), "echo $$ > " + dir.file("parent") + "\n" + kOmpiRank5 + kWrap +
                                       "sh -c 'echo $$ > " + dir.file("rank") +
                                       "; while :; do sleep 0.1; done' &\nwait\n");
  std::string out;
  std::thread killer([&] {
    if (!waitFile(dir.file("rank"))) return;
    ::kill(std::stoi(readFile(dir.file("parent"))), SIGKILL);
  });
  runCommand("sh " + dir.file("parent.sh"), &out, std::chrono::seconds(30));
  killer.join();
  REQUIRE(waitFile(dir.file("rank")));
  int rank = std::stoi(readFile(dir.file("rank")));
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (alive(rank) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(alive(rank));
}
