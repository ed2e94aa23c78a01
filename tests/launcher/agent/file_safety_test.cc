// Files the node agent creates at predictable names (--save_pid's /tmp/<pid>.dsrun, the per-rank
// logs <dir>/<stamp>_rank<r>.log): a real symlink planted there, or another user's file, stops
// the agent with exit 2 and a message naming the path, before any rank starts; the link's target
// is untouched.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "launcher/agent/rank_logs.h"
#include "tests/launcher/agent/agent_process.h"
#include "tests/launcher/agent/process_probe.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::test;
using Catch::Contains;

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int runAgent(const ds::launcher::JobSpec& spec, const TempDir& dir) {
  AgentProcess p = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
  return waitChild(p.pid).value_or(-1);
}

// The program leaves this file when it runs: proof that no rank started.
std::vector<std::string> touchProgram(const TempDir& dir) {
  return {"/bin/sh", "-c", "echo ran > " + dir.file("ran")};
}

}  // namespace

TEST_CASE("agent files: a symlink planted at the --save_pid name is refused, target untouched",
          "[multiproc]") {
  TempDir dir;
  writeFile(dir.file("victim"), "precious\n");
  auto spec = localSpec(1, touchProgram(dir), uniqueMarker("pidlink"), dir.path());
  spec.savePidFile = dir.file("4242.dsrun");
  REQUIRE(::symlink(dir.file("victim").c_str(), spec.savePidFile.c_str()) == 0);
  CHECK(runAgent(spec, dir) == 2);
  CHECK_THAT(readFile(dir.file("err")), Contains("--save_pid file " + spec.savePidFile) &&
                                            Contains("symbolic link") &&
                                            Contains(dir.file("victim")));
  CHECK(readFile(dir.file("victim")) == "precious\n");
  CHECK_FALSE(exists(dir.file("ran")));
}

TEST_CASE("agent files: another user's file at the --save_pid name is refused and kept",
          "[multiproc]") {
  if (::geteuid() != 0) DS_SKIP("needs root to make a file owned by another user (nobody)");
  TempDir dir;
  auto spec = localSpec(1, touchProgram(dir), uniqueMarker("pidforeign"), dir.path());
  spec.savePidFile = dir.file("4243.dsrun");
  writeFile(spec.savePidFile, "theirs\n");
  REQUIRE(::chown(spec.savePidFile.c_str(), 65534, 65534) == 0);
  CHECK(runAgent(spec, dir) == 2);
  CHECK_THAT(readFile(dir.file("err")),
             Contains(spec.savePidFile) && Contains("owned by uid 65534"));
  CHECK(readFile(spec.savePidFile) == "theirs\n");
  CHECK_FALSE(exists(dir.file("ran")));
}

TEST_CASE("agent files: our own stale --save_pid file is replaced and removed after",
          "[multiproc]") {
  TempDir dir;
  auto spec = localSpec(1, touchProgram(dir), uniqueMarker("pidstale"), dir.path());
  spec.savePidFile = dir.file("4244.dsrun");
  writeFile(spec.savePidFile, "999999\n");  // a SIGKILLed agent's
  CHECK(runAgent(spec, dir) == 0);
  CHECK(exists(dir.file("ran")));
  CHECK_FALSE(exists(spec.savePidFile));
}

TEST_CASE("agent files: a symlink planted at a rank log name is refused, target untouched",
          "[multiproc]") {
  TempDir dir;
  writeFile(dir.file("victim"), "precious\n");
  auto spec = localSpec(2, touchProgram(dir), uniqueMarker("loglink"), dir.path());
  spec.eachRankLogDir = dir.file("logs");
  REQUIRE(::mkdir(spec.eachRankLogDir.c_str(), 0755) == 0);
  // The name holds the start second: plant rank 1's name for every second of the next two
  // minutes, as an attacker guessing the time would.
  const time_t now = ::time(nullptr);
  for (time_t t = now - 1; t < now + 120; ++t) {
    struct tm tm;
    ::localtime_r(&t, &tm);
    char stamp[32];
    ::strftime(stamp, sizeof(stamp), "%Y%m%d%H%M%S", &tm);
    const std::string name = ds::launcher::rankLogPath(spec.eachRankLogDir, stamp, 1);
    REQUIRE(::symlink(dir.file("victim").c_str(), name.c_str()) == 0);
  }
  CHECK(runAgent(spec, dir) == 2);
  const std::string err = readFile(dir.file("err"));
  CHECK_THAT(err, Contains("rank log " + spec.eachRankLogDir + "/") &&
                      Contains("_rank1.log: refusing to write through a symbolic link") &&
                      Contains(dir.file("victim")));
  CHECK(readFile(dir.file("victim")) == "precious\n");
  CHECK_FALSE(exists(dir.file("ran")));
}

TEST_CASE("agent files: a SIGKILLed agent's --save_pid file is removed by the next agent",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("pidkilled");
  auto spec = localSpec(1, {"/bin/sh", "-c", "sleep 60 & wait"}, marker, dir.path());
  spec.savePidFile = dir.file("1111.dsrun");
  AgentProcess killed = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 2));
  REQUIRE(::kill(killed.pid, SIGKILL) == 0);
  CHECK(waitChild(killed.pid) == std::optional<int>(137));
  CHECK(waitMarkerGone(marker).empty());
  REQUIRE(readFile(spec.savePidFile) == std::to_string(killed.pid) + "\n");  // left behind
  writeFile(dir.file("3333.dsrun"), "1\n");                                  // pid 1 runs: kept
  auto next = localSpec(1, touchProgram(dir), uniqueMarker("pidnext"), dir.path());
  next.savePidFile = dir.file("2222.dsrun");
  CHECK(runAgent(next, dir) == 0);
  CHECK_FALSE(exists(dir.file("1111.dsrun")));
  CHECK(exists(dir.file("3333.dsrun")));
  CHECK_FALSE(exists(next.savePidFile));
}
