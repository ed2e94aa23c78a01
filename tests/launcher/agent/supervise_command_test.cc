// superviseCommand (the pdsh/mpirun/srun wrapper) on real shell commands in a child process:
// status passthrough, the extra environment, signal forwarding to the whole process group, and
// the group killed when the supervisor itself is SIGKILLed; pdsh-style children in their own
// sessions reached too, and failure lines on the child's stderr deciding the status.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "launcher/runners.h"
#include "tests/launcher/agent/process_probe.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::test;

namespace {

pid_t startSupervised(const std::vector<std::string>& argv, const ds::EnvMap& env,
                      const std::string& errPath, const std::string& outPath = "/dev/null",
                      const ds::launcher::SuperviseOptions& options = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("DS_KILL_GRACE", "0.5", 1);
    ::_exit(ds::launcher::superviseCommand(argv, env, options));
  }
  return pid;
}

}  // namespace

TEST_CASE("superviseCommand returns the command's status and passes the extra environment",
          "[multiproc]") {
  TempDir dir;
  pid_t pid = startSupervised({"sh", "-c", "echo \"$EXTRA\"; exit 7"}, {{"EXTRA", "a b"}},
                              dir.file("err"), dir.file("out"));
  CHECK(waitChild(pid) == std::optional<int>(7));
  CHECK(readFile(dir.file("out")) == "a b\n");
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("dsrun: sh exited with code 7"));
  pid = startSupervised({"no-such-launcher-xyz"}, {}, dir.file("err"));
  CHECK(waitChild(pid) == std::optional<int>(127));
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("cannot execute 'no-such-launcher-xyz'"));
}

TEST_CASE("superviseCommand forwards SIGTERM/SIGINT to the command's whole group", "[multiproc]") {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    std::string marker = uniqueMarker("supervised");
    // The command ignores SIGINT/SIGTERM in its children: only the grace SIGKILL ends them.
    pid_t pid = startSupervised({"sh", "-c", "trap '' INT TERM; sleep 60 & sleep 60 & wait"},
                                {{"MARK", marker}}, dir.file("err"));
    REQUIRE(waitMarkerCount(marker, 3));
    ::kill(pid, sig);
    auto st = waitChild(pid);
    REQUIRE(st);
    // The contract: 128 + the signal dsrun got, not the command's own status (the grace SIGKILL,
    // which the summary still names).
    CHECK(*st == 128 + sig);
    CHECK(waitMarkerGone(marker).empty());
    CHECK_THAT(readFile(dir.file("err")), Catch::Contains("received SIG"));
    CHECK_THAT(readFile(dir.file("err")), Catch::Contains("sh was killed by signal 9 (SIGKILL)"));
  }
}

TEST_CASE("superviseCommand: SIGKILL of the supervisor kills the command's group", "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("supkill");
  pid_t pid = startSupervised({"sh", "-c", "sleep 60 & sleep 60 & wait"}, {{"MARK", marker}},
                              dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 3));
  ::kill(pid, SIGKILL);
  waitChild(pid);
  CHECK(waitMarkerGone(marker).empty());
}

namespace {

// What dsrun's pdsh runner passes (main.cc), with a fixed host description.
ds::launcher::SuperviseOptions pdshStyle() {
  ds::launcher::SuperviseOptions o;
  o.failureLine = ds::launcher::parsePdshFailure;
  o.describe = [](const ds::launcher::RemoteFailure& f) {
    return "host " + f.host + " (node 1, ranks 2-3)";
  };
  o.stopOnFailure = true;
  o.signalDescendants = true;
  return o;
}

}  // namespace

TEST_CASE(
    "superviseCommand: a pdsh failure line stops the job (setsid'd clients included) and "
    "becomes its status",
    "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("pdshfail");
  // A stand-in for pdsh: two "ssh clients" in their own sessions, one host reported failed.
  pid_t pid = startSupervised({"sh", "-c",
                               "setsid sleep 60 & setsid sleep 60 & sleep 0.2; echo 'some output'; "
                               "echo 'pdsh@me: hostB: ssh exited with exit code 3' >&2; wait"},
                              {{"MARK", marker}}, dir.file("err"), dir.file("out"), pdshStyle());
  auto st = waitChild(pid);
  REQUIRE(st);
  CHECK(*st == 3);
  CHECK(waitMarkerGone(marker, std::chrono::seconds(5)).empty());
  std::string err = readFile(dir.file("err"));
  CHECK_THAT(err, Catch::Contains("pdsh@me: hostB: ssh exited with exit code 3\n"));
  CHECK_THAT(err, Catch::Contains("dsrun: host hostB (node 1, ranks 2-3) failed (ssh exited with "
                                  "exit code 3): job status 3; stopping the job on every host"));
  CHECK(readFile(dir.file("out")) == "some output\n");
}

TEST_CASE("superviseCommand: SIGTERM/SIGINT reach the command's descendants in other sessions",
          "[multiproc]") {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    std::string marker = uniqueMarker("pdshsig");
    pid_t pid = startSupervised({"sh", "-c", "setsid sleep 60 & setsid sleep 60 & wait"},
                                {{"MARK", marker}}, dir.file("err"), "/dev/null", pdshStyle());
    REQUIRE(waitMarkerCount(marker, 3));
    ::kill(pid, sig);
    auto st = waitChild(pid);
    REQUIRE(st);
    CHECK(*st == 128 + sig);
    // Well before the 0.5 s grace SIGKILL would matter: SIGTERM itself ended them.
    CHECK(waitMarkerGone(marker, std::chrono::seconds(5)).empty());
  }
}

TEST_CASE("superviseCommand: SIGKILL of the supervisor kills descendants in other sessions",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("pdshkill");
  pid_t pid = startSupervised({"sh", "-c", "setsid sleep 60 & setsid sleep 60 & wait"},
                              {{"MARK", marker}}, dir.file("err"), "/dev/null", pdshStyle());
  REQUIRE(waitMarkerCount(marker, 3));
  ::kill(pid, SIGKILL);
  waitChild(pid);
  CHECK(waitMarkerGone(marker, std::chrono::seconds(5)).empty());
}

TEST_CASE("superviseCommand: srun's failing task code wins over srun's own status", "[multiproc]") {
  TempDir dir;
  ds::launcher::SuperviseOptions o;
  o.failureLine = ds::launcher::parseSrunFailure;
  // srun --kill-on-bad-exit: the failing task's line, then the killed task's, then status 143.
  pid_t pid = startSupervised({"sh", "-c",
                               "echo 'srun: error: vm: task 1: Exited with exit code 3' >&2; "
                               "echo 'srun: error: vm: task 0: Terminated' >&2; exit 143"},
                              {}, dir.file("err"), "/dev/null", o);
  CHECK(waitChild(pid) == std::optional<int>(3));
  CHECK_THAT(
      readFile(dir.file("err")),
      Catch::Contains("dsrun: host vm failed (task 1: Exited with exit code 3): job status 3"));
  // No failure line: the command's own status, as before.
  pid = startSupervised({"sh", "-c", "echo 'srun: error: other trouble' >&2; exit 5"}, {},
                        dir.file("err"), "/dev/null", o);
  CHECK(waitChild(pid) == std::optional<int>(5));
}
