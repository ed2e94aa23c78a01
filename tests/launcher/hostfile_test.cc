// Hostfile parsing (DESIGN.md §4.1): every error kind names file, line and text; Open MPI and
// Kubeflow MPI-Operator lines parse; a missing explicit hostfile is an error, a missing default
// /job/hostfile means a local run.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "launcher/hostfile.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::launcher;
using Catch::Matchers::Contains;

namespace {
// The message of the ConfigError that parsing `text` throws ("" when it parses).
std::string parseError(const std::string& text, const std::string& path = "hosts") {
  try {
    parseHostfile(text, path);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("hostfile: DeepSpeed's good test vector parses in file order", "[unit]") {
  Hostfile hf = parseHostfile(
      "worker-1 slots=2\nworker-2 slots=2\n\nlocalhost slots=1\n123.23.12.10 slots=2\n"
      "#worker-1 slots=3\n# this is a comment\n",
      "hosts");
  REQUIRE(hf.hosts.size() == 4);
  CHECK(hf.hosts[0].host == "worker-1");
  CHECK(hf.hosts[0].slots == 2);
  CHECK(hf.hosts[1].host == "worker-2");
  CHECK(hf.hosts[2].host == "localhost");
  CHECK(hf.hosts[2].slots == 1);
  CHECK(hf.hosts[3].host == "123.23.12.10");
  CHECK(hf.hosts[3].line == 5);
  CHECK(hf.path == "hosts");
  CHECK(hf.find("worker-2") == &hf.hosts[1]);
  CHECK(hf.find("worker-3") == nullptr);
}

TEST_CASE("hostfile: slots default to 1, trailing comments, tabs and CRLF", "[unit]") {
  Hostfile hf = parseHostfile(
      "  a\t\r\nb slots=3   # eight GPUs, three free\r\n"
      "user@c slots=0\n   # indented comment\n",
      "h");
  REQUIRE(hf.hosts.size() == 3);
  CHECK(hf.hosts[0].host == "a");
  CHECK(hf.hosts[0].slots == 1);
  CHECK(hf.hosts[1].slots == 3);
  CHECK(hf.hosts[2].host == "user@c");
  CHECK(hf.hosts[2].slots == 0);
}

TEST_CASE("hostfile: Open MPI and Kubeflow MPI-Operator lines parse", "[unit]") {
  Hostfile ompi = parseHostfile("node01 slots=4 max_slots=8\nnode02 slots=4 max-slots=4\n", "o");
  REQUIRE(ompi.hosts.size() == 2);
  CHECK(ompi.hosts[0].slots == 4);
  CHECK(ompi.hosts[0].maxSlots == 8);
  CHECK(ompi.hosts[1].maxSlots == 4);
  // What the MPI-Operator writes to /etc/mpi/hostfile.
  Hostfile kf = parseHostfile(
      "pi-worker-0.pi-worker.default.svc slots=1\npi-worker-1.pi-worker.default.svc slots=1\n",
      "/etc/mpi/hostfile");
  REQUIRE(kf.hosts.size() == 2);
  CHECK(kf.hosts[1].host == "pi-worker-1.pi-worker.default.svc");
  CHECK(kf.hosts[1].maxSlots == 0);
}

TEST_CASE("hostfile: each bad line names file, line number and text", "[unit]") {
  struct Case {
    const char* text;
    int line;
    const char* bad;  // the offending line's text
    const char* why;  // a phrase of the explanation
  };
  const Case cases[] = {
      {"ok slots=1\nw1 slots = 4\n", 2, "w1 slots = 4", "expected key=value"},
      {"w1 slots=4extra\n", 1, "w1 slots=4extra", "non-negative integer"},
      {"w1 slots=-1\n", 1, "w1 slots=-1", "non-negative integer"},
      {"w1 slots=\n", 1, "w1 slots=", "non-negative integer"},
      {"this is bad slots=1\n", 1, "this is bad slots=1", "expected key=value"},
      {"w1 gpus=4\n", 1, "w1 gpus=4", "unknown key 'gpus'"},
      {"w1 slots=2 slots=3\n", 1, "w1 slots=2 slots=3", "slots given twice"},
      {"w1 slots=4 max_slots=2\n", 1, "w1 slots=4 max_slots=2", "less than slots"},
      {"\n\nbad;host slots=1\n", 3, "bad;host slots=1", "not a valid host name"},
      {"-oProxyCommand=x slots=1\n", 1, "-oProxyCommand=x slots=1", "not a valid host name"},
      {"$(reboot) slots=1\n", 1, "$(reboot) slots=1", "not a valid host name"},
      {"a@b@c slots=1\n", 1, "a@b@c slots=1", "not a valid host name"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    std::string msg = parseError(c.text, "/tmp/my hosts");
    CHECK_THAT(msg, Contains(fmt::format("/tmp/my hosts:{}:", c.line)));
    CHECK_THAT(msg, Contains(fmt::format("'{}'", c.bad)));
    CHECK_THAT(msg, Contains(c.why));
  }
}

TEST_CASE("hostfile: a duplicate host names both lines", "[unit]") {
  std::string msg = parseError("w1 slots=2\nw2 slots=2\n# x\nw1 slots=4\n", "hf");
  CHECK_THAT(msg, Contains("hf:4:"));
  CHECK_THAT(msg, Contains("'w1 slots=4'"));
  CHECK_THAT(msg, Contains("multiple entries for w1"));
  CHECK_THAT(msg, Contains("first on line 1"));
}

TEST_CASE("hostfile: an empty or comment-only file is an error naming the file", "[unit]") {
  for (const char* text : {"", "\n\n", "# only a comment\n   \n"}) {
    std::string msg = parseError(text, "/job/empty");
    CHECK_THAT(msg, Contains("/job/empty"));
    CHECK_THAT(msg, Contains("empty"));
  }
}

TEST_CASE("hostfile: a missing explicit hostfile is an error, the default means local", "[unit]") {
  ds::test::TempDir dir;
  std::string missing = dir.file("nope");
  try {
    loadHostfile(missing, /*isExplicit=*/true);
    FAIL("no error for a missing explicit hostfile");
  } catch (const ds::ConfigError& e) {
    CHECK_THAT(e.what(), Contains("--hostfile " + missing));
    CHECK_THAT(e.what(), Contains("No such file"));
  }
  CHECK_FALSE(loadHostfile(missing, /*isExplicit=*/false).has_value());
  CHECK_THROWS_WITH(loadHostfile(dir.path(), true), Contains("is a directory"));

  ds::test::writeFile(dir.file("hosts"), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  auto hf = loadHostfile(dir.file("hosts"), true);
  REQUIRE(hf.has_value());
  CHECK(hf->path == dir.file("hosts"));
  CHECK(hf->hosts.size() == 2);
  // A bad file on disk names its path and line.
  ds::test::writeFile(dir.file("bad"), "127.0.0.2 slots=2\n127.0.0.3 slots=x\n");
  CHECK_THROWS_WITH(loadHostfile(dir.file("bad"), false), Contains(dir.file("bad") + ":2:"));
}

TEST_CASE("hostfile: host tokens", "[unit]") {
  CHECK(isValidHostToken("worker-0"));
  CHECK(isValidHostToken("10.0.0.1"));
  CHECK(isValidHostToken("root@10.0.0.1"));
  CHECK(isValidHostToken("a_b.c-d"));
  CHECK_FALSE(isValidHostToken(""));
  CHECK_FALSE(isValidHostToken("-x"));
  CHECK_FALSE(isValidHostToken("a b"));
  CHECK_FALSE(isValidHostToken("a;b"));
  CHECK_FALSE(isValidHostToken("a,b"));
  CHECK_FALSE(isValidHostToken("a:0"));
  CHECK_FALSE(isValidHostToken("@host"));
  CHECK_FALSE(isValidHostToken("user@"));
  CHECK_FALSE(isValidHostToken("a'b"));
  CHECK_FALSE(isValidHostToken("a\nb"));
}
