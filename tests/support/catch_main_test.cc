// The custom Catch2 main (catch_main.cc): exact test specs select one case whatever its name
// holds, --ds-list-cases lists what CTest discovery registers, and DS_SKIP makes a run exit with
// kSkipExitCode and print the reason, unless something failed. The DS_SKIP checks re-run this
// binary on hidden cases ([.][support-child]).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "skip.h"
#include "spawn_ranks.h"
#include "test_spec.h"

using ds::test::exactTestSpec;

namespace {

const char* kOddName = R"(test spec: [brackets], a comma, a \ backslash, "quotes", ~tilde; semi)";
const char* kSkipChild = "support child: skips";
const char* kFailThenSkipChild = "support child: fails, then skips";

// Runs this binary with `args` (already shell-quoted); returns its exit status and output.
int runSelf(const std::string& args, std::string* out) {
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  return ds::test::runCommand("'" + exe + "' " + args, out, std::chrono::seconds(60));
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

TEST_CASE("test spec: special characters are escaped with a backslash", "[unit]") {
  CHECK(exactTestSpec("plain name: 1-2") == "plain name: 1-2");
  CHECK(exactTestSpec(R"(a, b [c] \d "e" ~f)") == R"(a\, b \[c\] \\d \"e\" \~f)");
  CHECK(exactTestSpec("-w x-y") == "\\-w x-y");
}

TEST_CASE(R"(test spec: [brackets], a comma, a \ backslash, "quotes", ~tilde; semi)", "[unit]") {
  // CTest runs this case by its exact spec with -w NoTests: reaching here is the check that the
  // spec selected it; the name is the one it was registered under.
  CHECK(Catch::getResultCapture().getCurrentTestName() == kOddName);
}

TEST_CASE("test spec: the exact spec of an odd name lists that case alone", "[unit]") {
  std::string out;
  REQUIRE(runSelf("--list-test-names-only " + shellQuote(exactTestSpec(kOddName)), &out) == 1);
  CHECK(out == std::string(kOddName) + "\n");
  // Unescaped, the same text is a different spec (tags, a comma split): not that case alone.
  REQUIRE(runSelf("--list-test-names-only " + shellQuote(kOddName), &out) >= 0);
  CHECK(out != std::string(kOddName) + "\n");
}

TEST_CASE("--ds-list-cases: name, spec and tags per visible case, hidden ones left out", "[unit]") {
  std::string out;
  REQUIRE(runSelf("--ds-list-cases", &out) == 0);
  INFO(out);
  CHECK(out.find(std::string(kOddName) + "\t" + exactTestSpec(kOddName) + "\tunit\n") !=
        std::string::npos);
  CHECK(out.find("support child") == std::string::npos);
}

TEST_CASE("support child: skips", "[.][support-child]") {
  CHECK(true);
  DS_SKIP("the reason, " << 42);
}

TEST_CASE("support child: fails, then skips", "[.][support-child]") {
  CHECK(false);
  DS_SKIP("never reported as a skip");
}

TEST_CASE("DS_SKIP: the run exits with the skip code and prints case and reason", "[unit]") {
  std::string out;
  CHECK(runSelf(shellQuote(exactTestSpec(kSkipChild)), &out) == ds::test::kSkipExitCode);
  INFO(out);
  CHECK(out.find("SKIPPED: support child: skips: the reason, 42\n") != std::string::npos);
}

TEST_CASE("DS_SKIP: a failure in the same run wins over the skip", "[unit]") {
  std::string out;
  int rc = runSelf(shellQuote(exactTestSpec(kFailThenSkipChild)), &out);
  INFO(out);
  CHECK(rc != 0);
  CHECK(rc != ds::test::kSkipExitCode);
}

TEST_CASE("-w NoTests: a spec that selects no case fails the run", "[unit]") {
  std::string out;
  CHECK(runSelf("'no such case at all' -w NoTests", &out) != 0);
}
