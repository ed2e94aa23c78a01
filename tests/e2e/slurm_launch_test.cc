// dsrun --launcher slurm: the srun command through --dry_run (what it prints is exactly what
// would run), and end to end on a one-host Slurm (munged + slurmctld + slurmd started by
// scripts/test_cluster.sh slurm-start; DS_SKIP when Debian's slurmd/slurmctld/munge are absent).
#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

// Skips the test case (DS_SKIP) when the one-host Slurm cannot run here. In the TEST_CASE body.
#define DS_NEED_SLURM()                                                                       \
  do {                                                                                        \
    if (auto why = TestSlurm::skipReason(); !why.empty()) DS_SKIP("one-host slurm: " << why); \
  } while (0)

TEST_CASE("slurm launch (--dry_run): srun command, exports, token never printed", "[e2e]") {
  TempDir tmp;
  writeFile(tmp.file("hostfile"), "127.0.0.2 slots=2\n127.0.0.3 slots=2\n");
  std::string out;
  int rc = runCommand(dsrunPath() + " --hostfile " + tmp.file("hostfile") +
                          " --launcher slurm --master_addr 127.0.0.2 --master_port 29512 "
                          "--export 'FOO=x;y' --dry_run /bin/echo hi",
                      &out, std::chrono::seconds(60));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("srun -n 4 --nodes 2 --ntasks-per-node 2") != std::string::npos);
  CHECK(out.find("--nodelist=127.0.0.2,127.0.0.3") != std::string::npos);
  CHECK(out.find("--export=ALL --kill-on-bad-exit=1") != std::string::npos);
  CHECK(out.find("MASTER_ADDR=127.0.0.2") != std::string::npos);
  CHECK(out.find("MASTER_PORT=29512") != std::string::npos);
  CHECK(out.find("FOO='x;y'") != std::string::npos);
  CHECK(out.find("DS_JOB_TOKEN=<hidden>") != std::string::npos);
  CHECK(out.find("/bin/echo hi") != std::string::npos);
}

namespace {
std::string slurmCommand(const TestSlurm& slurm, const TempDir& tmp, const std::string& script,
                         int port, const std::string& mode) {
  writeFile(tmp.file("hostfile"), slurm.node() + " slots=2\n");
  return "cd " + tmp.path() + " && " + slurm.envPrefix() + "exec " + dsrunPath() + " --hostfile " +
         tmp.file("hostfile") + " --launcher slurm --force_multi --master_addr 127.0.0.1 " +
         "--master_port " + std::to_string(port) + " --no_local_rank sh " + script + " " +
         tmp.path() + " " + mode;
}
}  // namespace

TEST_CASE("slurm launch: one-host Slurm, 1 node x 2 ranks through srun", "[e2e]") {
  DS_NEED_SLURM();
  TestSlurm slurm;
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  int port = freePort();
  std::string out;
  int rc =
      runCommand(slurmCommand(slurm, tmp, script, port, "ok"), &out, std::chrono::seconds(120));
  INFO(out);
  REQUIRE(rc == 0);
  auto envs = readRankEnvs(tmp);
  REQUIRE(envs.size() == 2);
  std::vector<int> seen(2, 0);
  for (const auto& env : envs) {
    ds::RankEnv r = ds::deriveRankEnv(env);
    REQUIRE(r.rank >= 0);
    REQUIRE(r.rank < 2);
    ++seen[r.rank];
    CHECK(r.worldSize == 2);
    CHECK(r.localRank == r.rank);
    CHECK(r.crossRank == 0);
    CHECK(r.masterAddr == "127.0.0.1");
    CHECK(r.masterPort == port);
  }
  CHECK(seen == std::vector<int>{1, 1});
}

// srun --kill-on-bad-exit=1 stops the other task; srun itself then exits 143 (the killed task's
// status), so dsrun takes 3 from the rank wrapper's report (srun's own "task 1: Exited with exit
// code 3" line is the fallback).
TEST_CASE("slurm launch: rank 1 exits 3 -> job exits 3 within seconds", "[e2e]") {
  DS_NEED_SLURM();
  TestSlurm slurm;
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  std::string out;
  auto t0 = Clock::now();
  int rc = runCommand(slurmCommand(slurm, tmp, script, freePort(), "fail1"), &out,
                      std::chrono::seconds(60));
  INFO(out);
  CHECK(rc == 3);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 30);  // rank 0 waits 120 s
  checkSummaryLines(out, {"srun: error: " + slurm.node() + ": task 1: Exited with exit code 3",
                          "dsrun: rank 1 (local rank 1) on host " + slurm.node() +
                              " (node 0) failed (exited with code 3): job status 3"});
  CHECK(waitNoProcesses(script, std::chrono::seconds(15)).empty());
}

TEST_CASE("slurm launch: rank 1 killed by SIGKILL -> job exits 137", "[e2e]") {
  DS_NEED_SLURM();
  TestSlurm slurm;
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  std::string out;
  int rc = runCommand(slurmCommand(slurm, tmp, script, freePort(), "kill1"), &out,
                      std::chrono::seconds(60));
  INFO(out);
  CHECK(rc == 137);  // from the wrapper's report (srun: "task 1: Killed")
  checkSummaryLines(out, {"dsrun: rank 1 (local rank 1) on host " + slurm.node() +
                          " (node 0) failed (was killed by signal 9 (SIGKILL)): job status 137"});
  CHECK(waitNoProcesses(script, std::chrono::seconds(15)).empty());
}

namespace {
// The tasks run under slurmstepd, not under srun: dsrun's signal must reach them through Slurm
// (srun cancels the step), and when dsrun dies by SIGKILL its guard cancels the step.
void slurmSignalCase(int sig) {
  TestSlurm slurm;
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  Background bg(slurmCommand(slurm, tmp, script, freePort(), "hang"), tmp.file("out"));
  bool up = waitRanksUp(tmp, 2, std::chrono::seconds(60));
  INFO(bg.output());
  REQUIRE(up);
  REQUIRE(processesWith(script).size() >= 2);
  bg.signal(sig);
  int rc = bg.wait(std::chrono::seconds(60));
  CHECK(rc != 0);
  CHECK(rc != -1);
  auto left = waitNoProcesses(script, std::chrono::seconds(20));
  INFO("left: " << left.size() << " process(es)");
  CHECK(left.empty());
}
}  // namespace

TEST_CASE("slurm launch: SIGTERM to dsrun leaves no rank, status non-zero", "[e2e]") {
  DS_NEED_SLURM();
  slurmSignalCase(SIGTERM);
}

TEST_CASE("slurm launch: SIGINT to dsrun leaves no rank, status non-zero", "[e2e]") {
  DS_NEED_SLURM();
  slurmSignalCase(SIGINT);
}

TEST_CASE("slurm launch: SIGKILL to dsrun leaves no rank after a few seconds", "[e2e]") {
  DS_NEED_SLURM();
  slurmSignalCase(SIGKILL);
}

// Inside an allocation (salloc) srun only adds a step: the guard cancels the step squeue lists
// under the job's name, not the allocation.
TEST_CASE("slurm launch: inside salloc, SIGKILL to dsrun leaves no rank", "[e2e]") {
  DS_NEED_SLURM();
  TestSlurm slurm;
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  std::string dsrun = slurmCommand(slurm, tmp, script, freePort(), "hang");
  dsrun = dsrun.substr(dsrun.find("exec ") + 5);  // the dsrun command line alone
  std::string pidFile = tmp.file("dsrun.pid");
  // salloc runs a shell that starts dsrun and records its pid; dsrun is then SIGKILLed. The shell
  // holds the allocation (whose end would kill the tasks anyway) until the test is done.
  std::string done = tmp.file("done");
  std::string cmd = "cd " + tmp.path() + " && " + slurm.envPrefix() + "exec salloc -n 2 sh -c '" +
                    dsrun + " & echo $! > " + pidFile + "; wait; i=0; while [ ! -e " + done +
                    " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done'";
  Background bg(cmd, tmp.file("out"));
  bool up = waitRanksUp(tmp, 2, std::chrono::seconds(60));
  INFO(bg.output());
  REQUIRE(up);
  int pid = std::stoi(readFile(pidFile));
  REQUIRE(kill(pid, SIGKILL) == 0);
  // The tasks, not the salloc shell (whose command line holds dsrun's, script included).
  auto tasks = [&] {
    std::vector<int> out;
    for (int p : processesWith(script))
      if (readFile("/proc/" + std::to_string(p) + "/cmdline").find("--launcher") ==
          std::string::npos)
        out.push_back(p);
    return out;
  };
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!tasks().empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO("left: " << tasks().size() << " task(s)");
  CHECK(tasks().empty());
  writeFile(done, "");
  CHECK(bg.wait(std::chrono::seconds(30)) == 0);
}
