// The node agent end to end through agentMain in a real child process: the rank environment, line
// relay, per-rank logs, the first failure's status and summary, teardown on signals and on the
// ssh session's EOF, and no rank left behind in any of these cases.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "launcher/agent/core_binding.h"
#include "tests/launcher/agent/agent_process.h"
#include "tests/launcher/agent/process_probe.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::test;
using ds::launcher::JobSpec;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// Runs the agent to completion and returns its status (-1 on timeout).
int runAgent(const JobSpec& spec, int node, const TempDir& dir, const ds::EnvMap& env = {}) {
  AgentProcess p = startAgent(spec, node, false, dir.file("out"), dir.file("err"), env);
  return waitChild(p.pid).value_or(-1);
}

// Ranks that wait for a long time, leaving a background child in their group.
const std::vector<std::string> kSleeper = {"/bin/sh", "-c", "sleep 60 & wait"};

// Children of `parent` in state Z (exited, not reaped), from /proc/<pid>/stat.
std::vector<pid_t> zombieChildren(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = slurp(e.path().string() + "/stat");
    auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;
    std::istringstream rest(stat.substr(paren + 2));  // "<state> <ppid> ..."
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state == 'Z') out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

}  // namespace

TEST_CASE("agent: each rank gets the rank environment and its --local_rank", "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("env");
  JobSpec spec = localSpec(
      4,
      {"/bin/sh", "-c",
       "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE LOCAL_SIZE=$LOCAL_SIZE "
       "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE CROSS_RANK=$CROSS_RANK CROSS_SIZE=$CROSS_SIZE "
       "MASTER=$MASTER_ADDR:$MASTER_PORT JOB=$DS_JOB_ID TOKEN=$DS_JOB_TOKEN "
       "OMP=${OMP_NUM_THREADS:+set} PWD=$(pwd) ARG=$1",
       "sh"},
      marker, dir.path());
  spec.hosts.insert(spec.hosts.begin(), ds::launcher::HostSlots{"other", {0, 1, 2}});
  REQUIRE(runAgent(spec, 1, dir) == 0);
  auto out = lines(readFile(dir.file("out")));
  REQUIRE(out.size() == 4);
  std::sort(out.begin(), out.end());
  for (int l = 0; l < 4; ++l)
    CHECK(out[l] == fmt::format("[{}] RANK={} LOCAL_RANK={} WORLD_SIZE=7 LOCAL_SIZE=4 "
                                "LOCAL_WORLD_SIZE=4 CROSS_RANK=1 CROSS_SIZE=2 "
                                "MASTER=127.0.0.1:29512 JOB=dsrun-agenttest TOKEN={} OMP=set "
                                "PWD={} ARG=--local_rank={}",
                                3 + l, 3 + l, l, kTestToken, dir.path(), l));
}

TEST_CASE("agent: --no_local_rank leaves the arguments untouched", "[multiproc]") {
  TempDir dir;
  JobSpec spec = localSpec(1, {"/bin/sh", "-c", "echo \"args:$#:$1\"", "sh", "a b;c"},
                           uniqueMarker("args"), dir.path());
  spec.noLocalRank = true;
  REQUIRE(runAgent(spec, 0, dir) == 0);
  CHECK(readFile(dir.file("out")) == "[0] args:1:a b;c\n");
}

TEST_CASE("agent: output lines are whole, prefixed, complete; stderr stays stderr", "[multiproc]") {
  TempDir dir;
  JobSpec spec = localSpec(
      4,
      {"/bin/sh", "-c",
       "i=0; while [ $i -lt 300 ]; do echo \"line-$RANK-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; "
       "i=$((i+1)); done; echo oops-$RANK >&2; printf tail-$RANK"},
      uniqueMarker("out"), dir.path());
  REQUIRE(runAgent(spec, 0, dir) == 0);
  auto out = lines(readFile(dir.file("out")));
  CHECK(out.size() == 4 * 301);
  std::regex line(R"(\[(\d)\] (line-(\d)-\d+-x+|tail-(\d)))");
  std::map<std::string, int> perRank;
  for (const auto& l : out) {
    std::smatch m;
    INFO(l);
    REQUIRE(std::regex_match(l, m, line));
    CHECK((m[3].matched ? m[3] : m[4]) == m[1].str());
    perRank[m[1]]++;
  }
  for (int r = 0; r < 4; ++r) CHECK(perRank[std::to_string(r)] == 301);
  std::string err = readFile(dir.file("err"));
  for (int r = 0; r < 4; ++r)
    CHECK(err.find(fmt::format("[{}] oops-{}\n", r, r)) != std::string::npos);
}

TEST_CASE("agent: --enable_each_rank_log writes one file per rank and nothing to the console",
          "[multiproc]") {
  TempDir dir;
  JobSpec spec = localSpec(3, {"/bin/sh", "-c", "echo out-$RANK; echo err-$RANK >&2"},
                           uniqueMarker("logs"), dir.path());
  spec.eachRankLogDir = dir.file("logs/sub");
  REQUIRE(runAgent(spec, 0, dir) == 0);
  CHECK(readFile(dir.file("out")).empty());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(spec.eachRankLogDir))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() == 3);
  for (int r = 0; r < 3; ++r) {
    CHECK(std::regex_match(names[r], std::regex(fmt::format(R"(\d{{14}}_rank{}\.log)", r))));
    CHECK(readFile(spec.eachRankLogDir + "/" + names[r]) == fmt::format("out-{}\nerr-{}\n", r, r));
  }
  writeFile(dir.file("afile"), "x");
  spec.eachRankLogDir = dir.file("afile");
  CHECK(runAgent(spec, 0, dir) == 2);
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("should not be a file, it should be a directory"));
}

TEST_CASE("agent: a rank exiting 3 stops the others; the job exits 3 naming rank and host",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("exit3");
  JobSpec spec = localSpec(
      4, {"/bin/sh", "-c", "if [ \"$LOCAL_RANK\" = 2 ]; then exit 3; fi; sleep 60 & wait"}, marker,
      dir.path());
  CHECK(runAgent(spec, 0, dir) == 3);
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("rank 2 (local rank 2) on host localhost exited with code 3"));
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("agent: a rank killed by SIGKILL gives 137", "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("kill9");
  JobSpec spec = localSpec(
      3, {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi; sleep 60 & wait"}, marker,
      dir.path());
  CHECK(runAgent(spec, 0, dir) == 137);
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("rank 1 (local rank 1) on host localhost was killed by signal 9 "
                             "(SIGKILL)"));
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("agent: ranks that ignore SIGTERM are killed after the grace period", "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("grace");
  JobSpec spec =
      localSpec(3,
                {"/bin/sh", "-c",
                 "trap '' TERM; if [ \"$RANK\" = 0 ]; then sleep 0.2; exit 4; fi; sleep 60 & wait"},
                marker, dir.path());
  CHECK(runAgent(spec, 0, dir, {{"DS_KILL_GRACE", "0.3"}}) == 4);
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("agent: a program that cannot start gives 127 and says why", "[multiproc]") {
  TempDir dir;
  JobSpec spec = localSpec(2, {"no-such-dsrun-program"}, uniqueMarker("exec"), dir.path());
  CHECK(runAgent(spec, 0, dir) == 127);
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("rank 0 on host localhost could not start: cannot execute "
                             "'no-such-dsrun-program'"));
}

TEST_CASE("agent: SIGTERM, SIGINT and SIGHUP stop every rank with a non-zero status",
          "[multiproc]") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    TempDir dir;
    std::string marker = uniqueMarker("sig");
    JobSpec spec = localSpec(4, kSleeper, marker, dir.path());
    AgentProcess p = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
    REQUIRE(waitMarkerCount(marker, 8));  // 4 shells + 4 sleeps
    ::kill(p.pid, sig);
    CHECK(waitChild(p.pid) == std::optional<int>(128 + sig));
    CHECK(waitMarkerGone(marker).empty());
    CHECK_THAT(readFile(dir.file("err")), Catch::Contains("stopped 4 rank(s) on host localhost"));
  }
}

// A rank that ends while the others run is reaped at once: the agent keeps no zombie child.
TEST_CASE("agent: a rank that exits 0 early is reaped (no zombie) while the others run",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("zombie");
  JobSpec spec = localSpec(
      3, {"/bin/sh", "-c", "if [ \"$LOCAL_RANK\" = 1 ]; then exit 0; fi; sleep 60 & wait"}, marker,
      dir.path());
  AgentProcess p = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 4));  // ranks 0 and 2: 2 shells + 2 sleeps
  // Rank 1 has exited by now or soon; unreaped it would stay a zombie child of the agent.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<pid_t> zombies = zombieChildren(p.pid);
  while (!zombies.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    zombies = zombieChildren(p.pid);
  }
  CHECK(zombies.empty());
  CHECK(::kill(p.pid, 0) == 0);  // the agent still runs ranks 0 and 2
  ::kill(p.pid, SIGTERM);
  CHECK(waitChild(p.pid) == std::optional<int>(128 + SIGTERM));
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("agent: SIGKILL of the agent leaves no rank behind", "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("sigkill");
  JobSpec spec = localSpec(4, kSleeper, marker, dir.path());
  AgentProcess p = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 8));
  ::kill(p.pid, SIGKILL);
  CHECK(waitChild(p.pid) == std::optional<int>(137));
  auto left = waitMarkerGone(marker);
  INFO("left:\n" << describePids(left));
  CHECK(left.empty());
}

TEST_CASE("agent --token_stdin: the token comes from stdin; EOF on stdin tears down",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("watchdog");
  JobSpec spec = localSpec(2, {"/bin/sh", "-c", "echo token=$DS_JOB_TOKEN; sleep 60 & wait"},
                           marker, dir.path());
  AgentProcess p = startAgent(spec, 0, true, dir.file("out"), dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 4));
  p.stdinWrite.reset();  // the ssh session is gone
  CHECK(waitChild(p.pid) == std::optional<int>(128 + SIGHUP));
  CHECK(waitMarkerGone(marker).empty());
  CHECK(readFile(dir.file("out")).find(std::string("token=") + kTestToken) != std::string::npos);
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("EOF on stdin"));
}

TEST_CASE("agent: bad invocations are errors naming what is wrong", "[multiproc]") {
  TempDir dir;
  JobSpec spec = localSpec(1, {"/bin/true"}, uniqueMarker("bad"), dir.path());
  AgentProcess p = startAgent(spec, 0, true, dir.file("out"), dir.file("err"), {}, "TOKEN=nope\n");
  CHECK(waitChild(p.pid) == std::optional<int>(2));
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("expected the first stdin line to be DS_JOB_TOKEN=<token>"));
  CHECK(runAgent(spec, 3, dir) == 2);
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("node rank 3 is out of range"));
  CHECK(runAgent(spec, 0, dir, {{"DS_KILL_GRACE", "soon"}}) == 2);
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("DS_KILL_GRACE"));
  char a0[] = "dsrun", a1[] = "--agent", a2[] = "--node_rank", a3[] = "0";
  char* argv[] = {a0, a1, a2, a3, nullptr};
  CHECK(ds::launcher::agentMain(4, argv) == 2);
}

TEST_CASE("agent: --save_pid file holds the agent's pid while it runs and is removed after",
          "[multiproc]") {
  TempDir dir;
  std::string marker = uniqueMarker("pid");
  JobSpec spec = localSpec(1, kSleeper, marker, dir.path());
  spec.savePidFile = dir.file("job.pid");
  AgentProcess p = startAgent(spec, 0, false, dir.file("out"), dir.file("err"));
  REQUIRE(waitMarkerCount(marker, 2));
  CHECK(readFile(spec.savePidFile) == std::to_string(p.pid) + "\n");
  ::kill(p.pid, SIGTERM);
  CHECK(waitChild(p.pid) == std::optional<int>(143));
  CHECK_FALSE(std::filesystem::exists(spec.savePidFile));
}

TEST_CASE("agent: --bind_core_list pins each rank to its slice", "[multiproc]") {
  TempDir dir;
  int cpu = ds::launcher::allowedCpus().back();
  JobSpec spec =
      localSpec(1,
                {"/bin/sh", "-c",
                 "echo $(grep Cpus_allowed_list /proc/self/status | cut -f2) omp=$OMP_NUM_THREADS"},
                uniqueMarker("bind"), dir.path());
  spec.bindCoresToRank = true;
  spec.bindCoreList = std::to_string(cpu);
  REQUIRE(runAgent(spec, 0, dir) == 0);
  CHECK(readFile(dir.file("out")) == fmt::format("[0] {} omp=1\n", cpu));
  spec = localSpec(3, {"/bin/true"}, uniqueMarker("bind2"), dir.path());
  spec.bindCoreList = std::to_string(cpu);
  CHECK(runAgent(spec, 0, dir) == 2);
  CHECK_THAT(readFile(dir.file("err")), Catch::Contains("cannot be split among 3 local ranks"));
}
