// GroupGuard: when the process holding it is SIGKILLed, every registered group dies, including
// members that do not have a parent-death signal; unregistered groups are left alone.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "launcher/agent/child_process.h"
#include "launcher/agent/group_guard.h"
#include "tests/launcher/agent/process_probe.h"

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
  pid_t owner = fork();
  if (owner == 0) {
    GroupGuard guard;
    SpawnOptions o;
    o.dieWithParent = false;
    // As pdsh runs its ssh clients: each under setsid, out of the leader's group and session.
    o.argv = {"/bin/sh", "-c", "setsid sleep 60 & setsid sleep 60 & wait"};
    o.env = {{"MARK", marker}, {"PATH", "/usr/bin:/bin"}};
    guard.add(spawnChild(o));
    ::pause();
    _exit(0);
  }
  REQUIRE(ds::test::waitMarkerCount(marker, 3));
  ::kill(owner, SIGKILL);
  ds::test::waitChild(owner);
  CHECK(ds::test::waitMarkerGone(marker).empty());
}
