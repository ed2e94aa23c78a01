// Resource selection (DESIGN.md §4.2, reference/launcher.md §6): DeepSpeed's documented semantics
// and error texts, without its regressions (bare --include host keeps all slots, include slots
// are checked against the hostfile).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "launcher/resources.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

namespace {
Hostfile pool2x4() { return parseHostfile("worker-0 slots=4\nworker-1 slots=4\n", "hosts"); }

std::vector<HostSlots> select(const std::string& inc, const std::string& exc, int nodes = -1,
                              int gpus = -1, const Hostfile& pool = pool2x4()) {
  return selectResources(pool, ResourceFilter{inc, exc, nodes, gpus});
}

std::string selectError(const std::string& inc, const std::string& exc, int nodes = -1,
                        int gpus = -1, const Hostfile& pool = pool2x4()) {
  try {
    select(inc, exc, nodes, gpus, pool);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "";
}

bool same(const std::vector<HostSlots>& got, const std::vector<HostSlots>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].host != want[i].host || got[i].slots != want[i].slots) return false;
  return true;
}
}  // namespace

TEST_CASE("resources: no filter keeps every slot of every host in file order", "[unit]") {
  CHECK(same(select("", ""), {{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}}));
}

TEST_CASE("resources: --include, fixed regressions of DeepSpeed PR #6530", "[unit]") {
  // DeepSpeed drops worker-0 here; the documented semantics keep all its slots.
  CHECK(same(select("worker-0@worker-1:0,2", ""),
             {{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 2}}}));
  // DeepSpeed yields {} then an IndexError.
  CHECK(same(select("worker-0", ""), {{"worker-0", {0, 1, 2, 3}}}));
  // DeepSpeed accepts slot 7 of a 4-slot host.
  std::string msg = selectError("worker-1:7", "");
  CHECK_THAT(msg, Contains("No slot '7' specified on host 'worker-1'"));
  CHECK_THAT(msg, Contains("hostfile hosts gives it 4 slots"));
}

TEST_CASE("resources: --include merges, sorts and de-duplicates, keeps hostfile order", "[unit]") {
  CHECK(same(select("worker-0:1@worker-0:0,1", ""), {{"worker-0", {0, 1}}}));
  CHECK(same(select("worker-1:3,1", ""), {{"worker-1", {1, 3}}}));
  CHECK(same(select("worker-1:2@worker-0:3", ""), {{"worker-0", {3}}, {"worker-1", {2}}}));
  // A bare mention of a host wins over a slot list for the same host.
  CHECK(same(select("worker-0:1@worker-0", ""), {{"worker-0", {0, 1, 2, 3}}}));
}

TEST_CASE("resources: --exclude drops slots or whole hosts", "[unit]") {
  CHECK(same(select("", "worker-0:0@worker-1"), {{"worker-0", {1, 2, 3}}}));
  CHECK(same(select("", "worker-1:0,3"), {{"worker-0", {0, 1, 2, 3}}, {"worker-1", {1, 2}}}));
  CHECK_THAT(selectError("", "worker-1:7"), Contains("No slot '7' specified on host 'worker-1'"));
  CHECK_THAT(selectError("", "worker-0@worker-1"), Contains("no slots left to run on"));
}

TEST_CASE("resources: unknown hosts and bad specs name the flag and the text", "[unit]") {
  CHECK_THAT(selectError("jeff", ""), Contains("Hostname 'jeff' not found in hostfile hosts"));
  CHECK_THAT(selectError("", "worker-0@jeff:1"), Contains("Hostname 'jeff' not found"));
  for (const char* bad : {"worker-0:0:1", ":1", "worker-0:", "worker-0@", "@worker-0"}) {
    INFO(bad);
    std::string msg = selectError(bad, "");
    CHECK_THAT(msg, Contains("--include: bad node spec"));
    CHECK_THAT(msg, Contains(std::string("'") + bad + "'"));
  }
  for (const char* bad : {"worker-0:a", "worker-0:1,,2", "worker-0:-1", "worker-0:1 "}) {
    INFO(bad);
    CHECK_THAT(selectError("", bad), Contains("--exclude: bad slot"));
  }
}

TEST_CASE("resources: conflicting flags use DeepSpeed's texts", "[unit]") {
  CHECK_THAT(selectError("worker-0", "worker-1"),
             Contains("include_str and exclude_str are mutually exclusive"));
  CHECK_THAT(selectError("worker-0", "", -1, 2),
             Contains("Cannot specify num_nodes/gpus with include/exclude"));
  CHECK_THAT(selectError("", "worker-0:1", 1, -1),
             Contains("Cannot specify num_nodes/gpus with include/exclude"));
}

TEST_CASE("resources: --num_nodes takes the first hosts, --num_gpus the first slots", "[unit]") {
  Hostfile three = parseHostfile("a slots=2\nb slots=4\nc slots=4\n", "h3");
  CHECK(same(select("", "", 2, -1, three), {{"a", {0, 1}}, {"b", {0, 1, 2, 3}}}));
  CHECK(same(select("", "", -1, 2, three), {{"a", {0, 1}}, {"b", {0, 1}}, {"c", {0, 1}}}));
  CHECK(same(select("", "", 1, 1, three), {{"a", {0}}}));
  // --num_gpus is checked against every selected host (DeepSpeed does not).
  std::string msg = selectError("", "", -1, 3, three);
  CHECK_THAT(msg, Contains("--num_gpus 3: host 'a' has only 2 slots"));
  CHECK_THAT(selectError("", "", 4, -1, three), Contains("--num_nodes 4: hostfile h3 has only 3"));
  CHECK_THAT(selectError("", "", 0, -1, three), Contains("--num_nodes must be a positive"));
  CHECK_THAT(selectError("", "", -1, 0, three), Contains("--num_gpus must be a positive"));
}

TEST_CASE("resources: hosts with slots=0 are dropped, never an empty node", "[unit]") {
  Hostfile hf = parseHostfile("a slots=0\nb slots=2\n", "h");
  CHECK(same(select("", "", -1, -1, hf), {{"b", {0, 1}}}));
  CHECK_THAT(selectError("a:0", "", -1, -1, hf), Contains("No slot '0' specified on host 'a'"));
}

TEST_CASE("resources: parseNodeSpecs grammar", "[unit]") {
  auto specs = parseNodeSpecs("h1:3,1,3@h2@h1:0", "--include");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].host == "h1");
  CHECK(specs[0].slots == std::vector<int>{0, 1, 3});
  CHECK(specs[1].host == "h2");
  CHECK(specs[1].slots.empty());
}
