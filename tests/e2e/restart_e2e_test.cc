// dsrun --max_restarts end to end with the real binaries: one rank SIGKILLed at a random step
// (locally and over the ssh test cluster) makes dsrun stop the job, log the restart (failing rank,
// host, status) and start it again; every rank resumes from the latest checkpoint and the run's
// per-step losses equal the uninterrupted run's, bit for bit. A rank that fails every time ends
// the job after N+1 attempts with the last attempt's status; --max_restarts 0 is today's
// behaviour; a signal to dsrun is never restarted.
#include <random>
#include <thread>

#include "tests/e2e/restart_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

// A seed per run, printed so that a failure can be replayed (DS_FAULT_SEED=<seed>).
unsigned testSeed() {
  const char* s = std::getenv("DS_FAULT_SEED");
  static const unsigned seed =
      s && *s ? unsigned(std::strtoul(s, nullptr, 10)) : std::random_device{}();
  return seed;
}

// The uninterrupted run of `launch` (the reference trajectory).
Trajectory referenceRun(const std::string& launch, const ZeroConfig& z,
                        const std::string& envPrefix) {
  TempDir dir;
  TimedRun run = runTimed(trainCommand(dir, z, launch, envPrefix), std::chrono::seconds(300));
  INFO(run.output());
  REQUIRE(run.status == 0);
  Trajectory t = readTrajectory(dir.file("ckpt/run_summary.json"));
  REQUIRE(t.firstStep == 0);
  REQUIRE(t.losses.size() == static_cast<size_t>(kSteps));
  return t;
}

// Kills `rank` before a random step with --max_restarts 2: the job succeeds on attempt 2, the log
// names the failing rank and host, rank 0 resumes from the newest checkpoint before the kill,
// and the losses from there on are the uninterrupted run's.
void killAndRestart(const std::string& launch, int rank, const std::string& where,
                    const std::string& envPrefix = "") {
  const ZeroConfig z{2, "none"};
  const Trajectory full = referenceRun(launch, z, envPrefix);
  std::mt19937 rng(testSeed());
  const int step = std::uniform_int_distribution<int>(2, kSteps)(rng);
  const int resumeAt = (step - 1) / kCkptEvery * kCkptEvery;
  TempDir dir;
  const std::string env =
      envPrefix + "DS_FAULT_KILL=rank=" + std::to_string(rank) + ",step=" + std::to_string(step);
  TimedRun run =
      runTimed(trainCommand(dir, z, "--max_restarts 2 " + launch, env), std::chrono::seconds(300));
  INFO("seed " << testSeed() << ": rank " << rank << " killed before step " << step << "\n"
               << run.output());
  CHECK(run.status == 0);
  CHECK(run.count("DS_FAULT_KILL: rank") == 1);
  const std::string restart = "dsrun: restart 1 of 2: " + where +
                              " was killed by signal 9 (SIGKILL) (job status 137); starting "
                              "every rank again on the same hosts (DS_RESTART_ATTEMPT=1;";
  CHECK(run.find(restart) != nullptr);
  CHECK(run.find("dsrun: the job succeeded on attempt 2 of 3") != nullptr);
  if (resumeAt > 0)
    CHECK(run.find("dsrt train: restart attempt 1: resumed from step " + std::to_string(resumeAt) +
                   " (latest in ") != nullptr);
  else CHECK(run.find("dsrt train: restart attempt 1: no checkpoint in") != nullptr);
  const Trajectory resumed = readTrajectory(dir.file("ckpt/run_summary.json"));
  CHECK(resumed.firstStep == resumeAt);
  CHECK(sameTrajectory(full, resumed));
  CHECK(waitNoProcesses(dir.path(), std::chrono::seconds(10)).empty());
}

}  // namespace

TEST_CASE("restart: a rank SIGKILLed at a random step restarts the job; losses match (local)",
          "[e2e]") {
  std::mt19937 rng(testSeed() + 1);
  const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
  killAndRestart("--num_gpus 2 --master_port " + std::to_string(freePort()), rank,
                 "rank " + std::to_string(rank) + " (local rank " + std::to_string(rank) +
                     ") on host localhost");
}

TEST_CASE("restart: a rank SIGKILLed at a random step restarts the job; losses match (ssh)",
          "[e2e]") {
  DS_NEED_CLUSTER();
  TestCluster cluster(2);
  TempDir hosts;
  writeFile(hosts.file("hostfile"),
            cluster.addr(0) + " slots=2\n" + cluster.addr(1) + " slots=2\n");
  std::mt19937 rng(testSeed() + 2);
  const int rank = std::uniform_int_distribution<int>(0, 3)(rng);
  const int node = rank / 2;
  killAndRestart("--hostfile " + hosts.file("hostfile") + " --launcher ssh --master_addr " +
                     cluster.addr(0) + " --master_port " + std::to_string(freePort()),
                 rank,
                 "rank " + std::to_string(rank) + " (local rank " + std::to_string(rank % 2) +
                     ") on host " + cluster.addr(node),
                 cluster.envPrefix());
}

namespace {

// The pid of the dsrt rank whose command line mentions `marker` and whose environment has
// RANK=<rank>; -1 if none.
int findRankPid(const std::string& marker, int rank) {
  for (int pid : processesWith(marker)) {
    if (readFile("/proc/" + std::to_string(pid) + "/cmdline").find("dsrt") == std::string::npos)
      continue;
    std::string env = readFile("/proc/" + std::to_string(pid) + "/environ");
    const std::string want = std::string("\0RANK=", 6) + std::to_string(rank) + '\0';
    if (("\0" + env).find(want) != std::string::npos) return pid;
  }
  return -1;
}

}  // namespace

TEST_CASE("restart: a rank SIGKILLed from outside restarts the job; losses match", "[e2e]") {
  const ZeroConfig z{2, "none"};
  const std::string launch = "--num_gpus 2 --master_port " + std::to_string(freePort());
  const Trajectory full = referenceRun(launch, z, "");
  std::mt19937 rng(testSeed() + 3);
  const int victimRank = std::uniform_int_distribution<int>(0, 1)(rng);
  const long after = 3 * std::uniform_int_distribution<long>(1, 2)(rng);  // a checkpoint step
  TempDir dir;
  TimedRun run;
  std::thread job([&] {
    run = runTimed(trainCommand(dir, z, "--max_restarts 1 " + launch), std::chrono::seconds(300));
  });
  // Both ranks are frozen (SIGSTOP) while `latest` is checked, so the job cannot finish between
  // the check and the kill; once `latest` names the chosen tag, the victim gets SIGKILL.
  bool killed = false;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!killed && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int r0 = findRankPid(dir.path(), 0), r1 = findRankPid(dir.path(), 1);
    if (r0 <= 0 || r1 <= 0) continue;
    ::kill(r0, SIGSTOP);
    ::kill(r1, SIGSTOP);
    const std::string latest = readFile(dir.file("ckpt/latest"));
    if (latest.rfind("global_step", 0) == 0 && std::atol(latest.c_str() + 11) >= after) {
      const int victim = victimRank == 0 ? r0 : r1;
      ::kill(victim, SIGKILL);
      killed = true;
      // The survivor stays frozen until the agent has reaped the victim: woken at once, it could
      // fail on the broken connection before the agent saw the kill, and be named instead.
      const auto reapBy = Clock::now() + std::chrono::seconds(30);
      while (::access(("/proc/" + std::to_string(victim)).c_str(), F_OK) == 0 &&
             Clock::now() < reapBy)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(r0, SIGCONT);
    ::kill(r1, SIGCONT);
  }
  job.join();
  INFO("seed " << testSeed() << ": rank " << victimRank << " killed once latest >= step " << after
               << "\n"
               << run.output());
  REQUIRE(killed);
  CHECK(run.status == 0);
  CHECK(run.find("dsrun: restart 1 of 1: rank " + std::to_string(victimRank) + " (local rank " +
                 std::to_string(victimRank) +
                 ") on host localhost was killed by signal 9 (SIGKILL) (job status 137)") !=
        nullptr);
  const TimedLine* resumedLine = run.find("dsrt train: restart attempt 1: resumed from step ");
  REQUIRE(resumedLine != nullptr);
  const long from =
      std::atol(resumedLine->text.c_str() + resumedLine->text.find("from step ") + 10);
  const Trajectory resumed = readTrajectory(dir.file("ckpt/run_summary.json"));
  CHECK(from >= 3);
  CHECK(resumed.firstStep == from);
  CHECK(sameTrajectory(full, resumed));
  CHECK(waitNoProcesses(dir.path(), std::chrono::seconds(10)).empty());
}

TEST_CASE("restart: a rank that fails every time ends the job after N+1 attempts", "[e2e]") {
  TempDir dir;
  const std::string script = writeRankScript(dir);
  const std::string cmd = "cd " + dir.path() + " && exec " + dsrunPath() +
                          " --num_gpus 2 --max_restarts 2 --no_local_rank --master_port " +
                          std::to_string(freePort()) + " sh " + script + " " + dir.path() +
                          " fail1";
  TimedRun run = runTimed(cmd, std::chrono::seconds(120));
  INFO(run.output());
  CHECK(run.status == 3);                 // the last attempt's: rank 1 exits 3
  CHECK(run.count("probe r=1 up") == 3);  // it prints before it fails: once per attempt
  CHECK(run.find("dsrun: restart 1 of 2: rank 1 (local rank 1) on host localhost exited with "
                 "code 3 (job status 3)") != nullptr);
  CHECK(run.find("dsrun: restart 2 of 2: rank 1 (local rank 1) on host localhost exited with "
                 "code 3 (job status 3)") != nullptr);
  CHECK(run.find("dsrun: no restarts left (2 of 2 used): rank 1 (local rank 1) on host "
                 "localhost exited with code 3 (job status 3)") != nullptr);
  CHECK(run.count("dsrun: restart ") == 2);
  CHECK(waitNoProcesses(script, std::chrono::seconds(10)).empty());
}

TEST_CASE("restart: a training rank SIGKILLed on every attempt ends the job with 137", "[e2e]") {
  TempDir dir;
  const std::string launch =
      "--num_gpus 2 --max_restarts 1 --master_port " + std::to_string(freePort());
  TimedRun run = runTimed(
      trainCommand(dir, ZeroConfig{1, "none"}, launch, "DS_FAULT_KILL=rank=0,step=5,attempt=any"),
      std::chrono::seconds(300));
  INFO(run.output());
  CHECK(run.status == 137);
  CHECK(run.count("DS_FAULT_KILL: rank 0 sends itself SIGKILL before step 5") == 2);
  CHECK(run.find("dsrt train: restart attempt 1: resumed from step 3 (latest in ") != nullptr);
  CHECK(run.find("dsrun: no restarts left (1 of 1 used): rank 0 (local rank 0) on host "
                 "localhost was killed by signal 9 (SIGKILL) (job status 137)") != nullptr);
  CHECK(waitNoProcesses(dir.path(), std::chrono::seconds(10)).empty());
}

TEST_CASE("restart: --max_restarts 0 is today's behaviour (the kill ends the job)", "[e2e]") {
  TempDir dir;
  const std::string launch =
      "--num_gpus 2 --max_restarts 0 --master_port " + std::to_string(freePort());
  TimedRun run =
      runTimed(trainCommand(dir, ZeroConfig{0, "none"}, launch, "DS_FAULT_KILL=rank=1,step=4"),
               std::chrono::seconds(300));
  INFO(run.output());
  CHECK(run.status == 137);
  CHECK(run.count("dsrun: restart") == 0);
  CHECK(run.count("no restarts left") == 0);
  CHECK(run.find("dsrun: rank 1 (local rank 1) on host localhost was killed by signal 9 "
                 "(SIGKILL); stopping the other 1 rank(s)") != nullptr);
  CHECK(readFile(dir.file("ckpt/latest")) == "global_step3\n");
}

TEST_CASE("restart: a signal to dsrun stops the job and is not restarted", "[e2e]") {
  TempDir dir;
  const std::string script = writeRankScript(dir);
  Background bg("exec " + dsrunPath() + " --num_gpus 2 --max_restarts 3 --no_local_rank " +
                    "--master_port " + std::to_string(freePort()) + " sh " + script + " " +
                    dir.path() + " hang",
                dir.file("out"));
  bool up = waitRanksUp(dir, 2, std::chrono::seconds(60));
  INFO(bg.output());
  REQUIRE(up);
  bg.signal(SIGTERM);
  int rc = bg.wait(std::chrono::seconds(60));
  CHECK(rc == 143);
  CHECK(bg.output().find("dsrun: restart") == std::string::npos);
  CHECK(waitNoProcesses(script, std::chrono::seconds(10)).empty());
}

TEST_CASE("restart: --max_restarts -1 and --max_restarts with --no_ssh are bad input", "[e2e]") {
  std::string out;
  int rc = runCommand(dsrunPath() + " --max_restarts -1 true", &out, std::chrono::seconds(30));
  CHECK(rc == 2);
  CHECK(out.find("--max_restarts -1: expected a number of restarts >= 0") != std::string::npos);
  rc = runCommand(dsrunPath() + " --max_restarts 1 --no_ssh --node_rank 0 true", &out,
                  std::chrono::seconds(30));
  CHECK(rc == 2);
  CHECK(out.find("--max_restarts 1 needs one dsrun that starts every host") != std::string::npos);
}

namespace {

// Rank 3 (on the second test-cluster host) exits 3 on every attempt under `launcher`: two
// attempts, the restart line names `failure` (the rank where the runner reports it, else the
// host), the job exits 3 and nothing is left on either host.
void remoteFailsEveryTime(const std::string& launcher, const std::string& failure) {
  RemoteJob job;
  TimedRun run = runTimed(job.command(launcher, "fail3", job.addrs(), "--max_restarts 1"),
                          std::chrono::seconds(120));
  INFO(run.output());
  CHECK(run.status == 3);
  CHECK(run.count("probe r=3 up") == 2);  // it prints before it fails: once per attempt
  const TimedLine* restart = run.find("dsrun: restart 1 of 1: ");
  REQUIRE(restart != nullptr);
  CHECK(restart->text.find(failure + " (job status 3); starting every rank again") !=
        std::string::npos);
  CHECK(run.find("dsrun: no restarts left (1 of 1 used): ") != nullptr);
  CHECK(waitNoProcesses(job.script, std::chrono::seconds(15)).empty());
}

}  // namespace

TEST_CASE("restart: over ssh, a rank that fails every time ends the job after 2 attempts",
          "[e2e]") {
  DS_NEED_CLUSTER();
  remoteFailsEveryTime("ssh", "rank 3 (local rank 1) on host 127.0.0.3 exited with code 3");
}

TEST_CASE("restart: over pdsh, a rank that fails every time ends the job after 2 attempts",
          "[e2e]") {
  DS_NEED_CLUSTER();
  // pdsh relays the agents' lines through their pty, on its stdout: it names the host.
  remoteFailsEveryTime("pdsh", "host 127.0.0.3 (node 1, ranks 2-3) ssh exited with exit code 3");
}

TEST_CASE("restart: over ssh, a signal to dsrun stops the job and is not restarted", "[e2e]") {
  DS_NEED_CLUSTER();
  RemoteJob job;
  Background bg(job.command("ssh", "hang", job.addrs(), "--max_restarts 3"), job.tmp.file("out"));
  bool up = waitRanksUp(job.tmp, 4, std::chrono::seconds(90));
  INFO(bg.output());
  REQUIRE(up);
  bg.signal(SIGTERM);
  int rc = bg.wait(std::chrono::seconds(60));
  CHECK(rc == 143);
  CHECK(bg.output().find("dsrun: restart") == std::string::npos);
  CHECK(waitNoProcesses(job.script, std::chrono::seconds(15)).empty());
}

TEST_CASE("restart: under openmpi, a rank that fails every time ends the job after 2 attempts",
          "[e2e]") {
  DS_NEED_CLUSTER();
  // mpirun's report names the rank; the hostfile dsrun wrote places it.
  remoteFailsEveryTime("openmpi",
                       "rank 3 (local rank 1) on host 127.0.0.3 (node 1) exited with code 3");
}

TEST_CASE("restart: a rank SIGKILLed from outside while the job stops is named as the cause",
          "[e2e]") {
  // Attempt 0: rank 1 exits 3 (the first failure); rank 0 ignores the agent's SIGTERM, and the
  // test SIGKILLs it during the grace, as kill -9 or the OOM killer would. Attempt 1 succeeds.
  TempDir dir;
  const std::string script = dir.file("rank.sh");
  writeFile(script,
            "#!/bin/sh\n"
            "[ \"$DS_RESTART_ATTEMPT\" = 1 ] && exit 0\n"
            "if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 3; fi\n"
            "trap '' TERM\n"
            "touch \"$1/up.$RANK\"\n"
            "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n");
  Background bg("DS_KILL_GRACE=60 exec " + dsrunPath() + " --num_gpus 2 --max_restarts 1 " +
                    "--no_local_rank --master_port " + std::to_string(freePort()) + " sh " +
                    script + " " + dir.path(),
                dir.file("out"));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (bg.output().find("stopping the other 1 rank(s)") == std::string::npos &&
         Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int victim = -1;
  for (int pid : processesWith(script))
    if (('\0' + readFile("/proc/" + std::to_string(pid) + "/environ"))
            .find(std::string("\0RANK=0\0", 8)) != std::string::npos)
      victim = pid;
  INFO(bg.output());
  REQUIRE(victim > 0);
  ::kill(victim, SIGKILL);
  int rc = bg.wait(std::chrono::seconds(60));
  INFO(bg.output());
  CHECK(rc == 0);
  const std::string out = bg.output();
  CHECK(out.find("dsrun: rank 0 (local rank 0) on host localhost was killed by signal 9 "
                 "(SIGKILL) while the job was stopping") != std::string::npos);
  CHECK(out.find("dsrun: restart 1 of 1: rank 0 (local rank 0) on host localhost was killed by "
                 "signal 9 (SIGKILL) (job status 137)") != std::string::npos);
}
