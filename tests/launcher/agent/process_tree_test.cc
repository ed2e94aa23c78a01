// findDescendants on the real process table: children and grandchildren, also those that left
// the group and session with setsid (as pdsh's ssh clients do), and nothing else.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "launcher/agent/child_process.h"
#include "launcher/agent/process_tree.h"
#include "tests/launcher/agent/process_probe.h"

using namespace ds::launcher;

TEST_CASE("findDescendants finds children and setsid'd grandchildren, not the root or others",
          "[multiproc]") {
  std::string inside = ds::test::uniqueMarker("tree_in");
  std::string outside = ds::test::uniqueMarker("tree_out");
  SpawnOptions o;
  o.env = {{"MARK", inside}, {"PATH", "/usr/bin:/bin"}};
  o.argv = {"/bin/sh", "-c", "setsid sleep 60 & sh -c 'sleep 60 & wait' & wait"};
  pid_t root = spawnChild(o);
  o.env = {{"MARK", outside}, {"PATH", "/usr/bin:/bin"}};
  o.argv = {"/bin/sleep", "60"};
  pid_t other = spawnChild(o);
  REQUIRE(ds::test::waitMarkerCount(inside, 4));  // sh, setsid sleep, sh, sleep

  auto table = std::make_unique<ProcTable>();
  std::vector<pid_t> out(ProcTable::kMax);
  size_t n = findDescendants(&root, 1, table.get(), out.data(), out.size());
  out.resize(n);
  std::sort(out.begin(), out.end());
  std::vector<pid_t> expected = ds::test::pidsWithMarker(inside);
  expected.erase(std::remove(expected.begin(), expected.end(), root), expected.end());
  std::sort(expected.begin(), expected.end());
  CHECK(out == expected);
  CHECK(n == 3);
  CHECK(std::find(out.begin(), out.end(), other) == out.end());

  CHECK(signalDescendants(root, SIGKILL) == 3);
  ::kill(root, SIGKILL);
  ::kill(other, SIGKILL);
  ds::test::waitChild(root);
  ds::test::waitChild(other);
  CHECK(ds::test::waitMarkerGone(inside).empty());
}
