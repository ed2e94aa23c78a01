// The restart loop (launcher/restart_loop.h) with a scripted attempt function: how many attempts
// run, what each one's ranks are told (DS_RESTART_ATTEMPT), which status comes back, that a
// signal to dsrun is never restarted; the agent failure-line parser and the flag checks.
#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "core/error.h"
#include "launcher/restart_loop.h"

using ds::launcher::AttemptNotes;
using ds::launcher::JobSpec;
using ds::launcher::runWithRestarts;

namespace {

// Runs the loop with attempts that return statuses[k] (noting a rank failure first); records the
// DS_RESTART_ATTEMPT each attempt saw ("-" when unset).
std::vector<std::string> attemptsSeen(int maxRestarts, const std::vector<int>& statuses,
                                      int* status, int signalOnAttempt = -1) {
  JobSpec spec;
  spec.exports.emplace("KEEP", std::string("1"));  // (operator= of a literal: GCC 12 -Wrestrict)
  std::vector<std::string> seen;
  *status = runWithRestarts(spec, maxRestarts, [&](const JobSpec& s) {
    auto it = s.exports.find(ds::launcher::kRestartAttemptVar);
    seen.push_back(it == s.exports.end() ? "-" : it->second);
    CHECK(s.exports.at("KEEP") == "1");
    const int k = static_cast<int>(seen.size()) - 1;
    int st = statuses.at(static_cast<size_t>(k));
    if (st != 0) ds::launcher::noteRankFailure("rank 1 (local rank 1) on host h", "exited");
    if (k == signalOnAttempt) ds::launcher::noteStopSignal(SIGTERM);
    return st;
  });
  return seen;
}

}  // namespace

TEST_CASE("restart loop: --max_restarts 0 runs the job once, untouched", "[unit]") {
  int status = -1;
  auto seen = attemptsSeen(0, {137}, &status);
  CHECK(seen == std::vector<std::string>{"-"});
  CHECK(status == 137);
}

TEST_CASE("restart loop: a failing job runs N+1 times and returns the last status", "[unit]") {
  int status = -1;
  auto seen = attemptsSeen(2, {137, 3, 5}, &status);
  CHECK(seen == std::vector<std::string>{"0", "1", "2"});
  CHECK(status == 5);
}

TEST_CASE("restart loop: a job that succeeds after a restart returns 0 and stops", "[unit]") {
  int status = -1;
  auto seen = attemptsSeen(3, {137, 0, 9, 9}, &status);
  CHECK(seen == std::vector<std::string>{"0", "1"});
  CHECK(status == 0);
}

TEST_CASE("restart loop: a stop signal to dsrun is not restarted", "[unit]") {
  int status = -1;
  auto seen = attemptsSeen(3, {143, 0}, &status, /*signalOnAttempt=*/0);
  CHECK(seen == std::vector<std::string>{"0"});
  CHECK(status == 143);
}

TEST_CASE("restart loop: the notes keep the first failure of an attempt", "[unit]") {
  ds::launcher::resetAttemptNotes();
  ds::launcher::noteRankFailure("rank 3 (local rank 1) on host b", "exited with code 3");
  ds::launcher::noteRankFailure("rank 0 (local rank 0) on host a", "was killed by signal 15");
  AttemptNotes n = ds::launcher::attemptNotes();
  CHECK(n.where == "rank 3 (local rank 1) on host b");
  CHECK(n.how == "exited with code 3");
  CHECK(n.stopSignal == 0);
  ds::launcher::resetAttemptNotes();
  CHECK(ds::launcher::attemptNotes().where.empty());
}

TEST_CASE("restart loop: a SIGKILL noted after an exit with a code names the cause", "[unit]") {
  ds::launcher::resetAttemptNotes();
  ds::launcher::noteRankFailure("rank 1 (local rank 1) on host a", "exited with code 1");
  ds::launcher::noteRankFailure("rank 0 (local rank 0) on host a",
                                "was killed by signal 9 (SIGKILL)");
  CHECK(ds::launcher::attemptNotes().where == "rank 0 (local rank 0) on host a");
  // Only over an exit with a code: a first signal stays, and so does a first SIGKILL.
  ds::launcher::noteRankFailure("rank 2 (local rank 0) on host b",
                                "was killed by signal 9 (SIGKILL)");
  CHECK(ds::launcher::attemptNotes().where == "rank 0 (local rank 0) on host a");
  ds::launcher::resetAttemptNotes();
  ds::launcher::noteRankFailure("rank 1 (local rank 1) on host a",
                                "was killed by signal 11 (SIGSEGV)");
  ds::launcher::noteRankFailure("rank 0 (local rank 0) on host a",
                                "was killed by signal 9 (SIGKILL)");
  CHECK(ds::launcher::attemptNotes().where == "rank 1 (local rank 1) on host a");
  ds::launcher::resetAttemptNotes();
}

TEST_CASE("restart loop: the node agent's failure line is parsed, other lines are not", "[unit]") {
  std::string where, how;
  using ds::launcher::parseAgentFailureLine;
  REQUIRE(parseAgentFailureLine(
      "dsrun: rank 3 (local rank 1) on host 127.0.0.3 was killed by signal 9 (SIGKILL); "
      "stopping the other 1 rank(s)",
      &where, &how));
  CHECK(where == "rank 3 (local rank 1) on host 127.0.0.3");
  CHECK(how == "was killed by signal 9 (SIGKILL)");
  REQUIRE(parseAgentFailureLine(
      "127.0.0.3: dsrun: rank 2 (local rank 0) on host 127.0.0.3 exited with code 3\r", &where,
      &how));  // behind pdsh's prefix, with a pty's \r
  CHECK(where == "rank 2 (local rank 0) on host 127.0.0.3");
  CHECK(how == "exited with code 3");
  REQUIRE(
      parseAgentFailureLine("dsrun: rank 0 (local rank 0) on host h was killed by signal 9 "
                            "(SIGKILL) while the job was stopping",
                            &where, &how));
  CHECK(how == "was killed by signal 9 (SIGKILL)");
  // A rank's own output is prefixed "[r] " by its agent: it cannot pose as the agent.
  CHECK_FALSE(parseAgentFailureLine("[1] dsrun: rank 0 (local rank 0) on host h exited with code 3",
                                    &where, &how));
  CHECK_FALSE(parseAgentFailureLine(
      "127.0.0.3: [1] dsrun: rank 0 (local rank 0) on host h exited with code 3", &where, &how));
  CHECK_FALSE(
      parseAgentFailureLine("dsrun: rank 0 (local rank 0) on host h said hello", &where, &how));
  CHECK_FALSE(
      parseAgentFailureLine("dsrun: stopped 2 rank(s) on host h after SIGTERM", &where, &how));
}

TEST_CASE("restart loop: --max_restarts below 0, or above 0 with --no_ssh, is an error", "[unit]") {
  using ds::launcher::checkMaxRestarts;
  CHECK_NOTHROW(checkMaxRestarts(0, false));
  CHECK_NOTHROW(checkMaxRestarts(0, true));
  CHECK_NOTHROW(checkMaxRestarts(5, false));
  CHECK_THROWS_WITH(checkMaxRestarts(-1, false),
                    "--max_restarts -1: expected a number of restarts >= 0");
  CHECK_THROWS_WITH(checkMaxRestarts(2, true), Catch::Matchers::Contains("with --no_ssh"));
  CHECK_THROWS_AS(checkMaxRestarts(2, true), ds::ConfigError);
}
