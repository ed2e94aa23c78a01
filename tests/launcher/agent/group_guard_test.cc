// GroupGuard: when the process holding it is SIGKILLed, every registered group dies, including
// members that do not have a parent-death signal; unregistered groups are left alone.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "launcher/agent/child_process.h"
#include "launcher/agent/group_guard.h"
#include "tests/launcher/agent/process_probe.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;

TEST_CASE("GroupGuard kills registered groups when its owner is SIGKILLed", "[multiproc]") {
  std::string guarded = ds::test::uniqueMarker("guarded");
  std::string free = ds::test::uniqueMarker("free");
  Pipe ready = makePipe("test");
  pid_t owner = fork();
  if (owner == 0) {
    GroupGuard guard;
    SpawnOptions o;
    o.dieWithParent = false;  // only the guard can stop these
    o.argv = {"/bin/sh", "-c", "sleep 60 & sleep 60 & wait"};
    o.env = {{"MARK", guarded}, {"PATH", "/usr/bin:/bin"}};
    guard.add(spawnChild(o));
    o.env = {{"MARK", free}, {"PATH", "/usr/bin:/bin"}};
    o.argv = {"/bin/sleep", "60"};
    pid_t unguarded = spawnChild(o);
    (void)!::write(ready.write.get(), &unguarded, sizeof(unguarded));
    ::pause();
    _exit(0);
  }
  ready.write.reset();
  pid_t unguarded = 0;
  REQUIRE(::read(ready.read.get(), &unguarded, sizeof(unguarded)) == sizeof(unguarded));
  REQUIRE(ds::test::waitMarkerCount(guarded, 3));
  ::kill(owner, SIGKILL);
  ds::test::waitChild(owner);
  CHECK(ds::test::waitMarkerGone(guarded).empty());
  CHECK(ds::test::pidsWithMarker(free) == std::vector<pid_t>{unguarded});
  ::kill(unguarded, SIGKILL);
  CHECK(ds::test::waitMarkerGone(free).empty());
}

TEST_CASE("GroupGuard also kills a registered leader's descendants in other sessions",
          "[multiproc]") {
  std::string marker = ds::test::uniqueMarker("guarded_setsid");
  Pipe ready = makePipe("test");
  pid_t owner = fork();
  if (owner == 0) {
    GroupGuard guard;
    SpawnOptions o;
    o.dieWithParent = false;
    // As pdsh runs its ssh clients: each under setsid, out of the leader's group and session.
    o.argv = {"/bin/sh", "-c", "setsid sleep 60 & setsid sleep 60 & wait"};
    o.env = {{"MARK", marker}, {"PATH", "/usr/bin:/bin"}};
    guard.add(spawnChild(o));
    (void)!::write(ready.write.get(), "r", 1);  // registered: the test may kill us now
    ::pause();
    _exit(0);
  }
  ready.write.reset();
  char r = 0;
  REQUIRE(::read(ready.read.get(), &r, 1) == 1);
  REQUIRE(ds::test::waitMarkerCount(marker, 3));
  ::kill(owner, SIGKILL);
  ds::test::waitChild(owner);
  auto left = ds::test::waitMarkerGone(marker);
  INFO("left:\n" << ds::test::describePids(left));
  CHECK(left.empty());
}

namespace {
// Waits up to 5 s for path to exist.
bool waitFile(const std::string& path) {
  for (int i = 0; i < 250; ++i) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    ::usleep(20 * 1000);
  }
  return false;
}
}  // namespace

TEST_CASE("GroupGuard runs the owner-death command only when its owner dies", "[multiproc]") {
  ds::test::TempDir dir;
  std::string marker = ds::test::uniqueMarker("guard_cmd");
  Pipe ready = makePipe("test");
  pid_t owner = fork();
  if (owner == 0) {
    GroupGuard guard({"/bin/sh", "-c",
                      "echo ran > " + dir.file("ran.tmp") + " && mv " + dir.file("ran.tmp") + " " +
                          dir.file("ran")});
    SpawnOptions o;
    o.dieWithParent = false;
    o.argv = {"/bin/sleep", "60"};
    o.env = {{"MARK", marker}, {"PATH", "/usr/bin:/bin"}};
    guard.add(spawnChild(o));
    (void)!::write(ready.write.get(), "r", 1);
    ::pause();
    _exit(0);
  }
  ready.write.reset();
  char r = 0;
  REQUIRE(::read(ready.read.get(), &r, 1) == 1);
  REQUIRE(ds::test::waitMarkerCount(marker, 1));
  ::kill(owner, SIGKILL);
  ds::test::waitChild(owner);
  REQUIRE(waitFile(dir.file("ran")));
  CHECK(ds::test::slurp(dir.file("ran")) == "ran\n");
  auto left = ds::test::waitMarkerGone(marker);
  INFO("left:\n" << ds::test::describePids(left));
  CHECK(left.empty());

  // A normal end (the destructor ran): no command.
  pid_t owner2 = fork();
  if (owner2 == 0) {
    { GroupGuard guard({"/bin/sh", "-c", "touch " + dir.file("ran2")}); }
    _exit(0);
  }
  CHECK(ds::test::waitChild(owner2) == std::optional<int>(0));
  ::usleep(500 * 1000);  // the command, were it started, would have touched the file by now
  CHECK(::access(dir.file("ran2").c_str(), F_OK) != 0);
}
