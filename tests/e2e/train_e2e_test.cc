// End to end through the real binaries: `dsrun --num_gpus 2 train` on the built-in default plan
// (shortened with --set) exits 0 and prints step lines; a rank killed with SIGKILL during
// training at ZeRO stage 3 (and stage 2 with cpu optimizer offload) ends the whole job with
// status 137, and the latest checkpoint resumes on the killed run's trajectory; stage 0's
// gradients reduced through the peers' mappings give the CMA path's losses bit for bit.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "ds/config.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string bin(const std::string& name) { return std::string(DS_BINARY_DIR) + "/" + name; }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The pid of the dsrt rank whose command line mentions `marker` (a unique temp dir) and whose
// environment has RANK=<rank>; -1 if none.
int findRankPid(const std::string& marker, int rank) {
  DIR* d = ::opendir("/proc");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string cmd = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmd.find("dsrt") == std::string::npos || cmd.find(marker) == std::string::npos) continue;
    std::string env = slurp("/proc/" + std::to_string(pid) + "/environ");
    std::string want = "RANK=" + std::to_string(rank);
    for (size_t p = 0; (p = env.find(want, p)) != std::string::npos; p += want.size())
      if ((p == 0 || env[p - 1] == '\0') &&
          (p + want.size() == env.size() || env[p + want.size()] == '\0'))
        found = pid;
  }
  ::closedir(d);
  return found;
}

// The 4-decimal loss printed after `key` in a step line, or "".
std::string lossAt(const std::string& out, const std::string& key) {
  size_t p = out.find(key);
  return p == std::string::npos ? "" : out.substr(p + key.size(), 6);
}

std::string trainCmd(const std::string& dir, const std::string& extra, int ranks = 2) {
  return bin("dsrun") + " --num_gpus " + std::to_string(ranks) + " --master_port " +
         std::to_string(ds::test::freePort()) + " train --set train.checkpoint.dir=" + dir + " " +
         extra;
}

// The kill test's runs share one LR schedule whatever train.steps says, so the resumed run
// continues the same trajectory.
std::string fixedSchedule() { return " --set deepspeed.scheduler.params.total_num_steps=100000 "; }

}  // namespace

TEST_CASE("e2e: dsrun --num_gpus 2 train runs the default plan and prints step lines", "[e2e]") {
  TempDir dir;
  std::string out;
  int rc = runCommand(trainCmd(dir.path(), "--set train.steps=24 --set train.log_every=8"), &out,
                      std::chrono::seconds(180));
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find(" 8/24 | loss") != std::string::npos);
  CHECK(out.find(" 24/24 | loss") != std::string::npos);
  CHECK(out.find("val loss") != std::string::npos);
  CHECK(exists(dir.file("latest")));
  CHECK(exists(dir.file("run_summary.json")));
}

// Bad input (issue 15): a model whose ZeRO-formula states exceed the host's memory is refused
// before any rank allocates them (not ended by the kernel's OOM killer), each rank
// judged against its share of the host: its free memory over the job's 2 local ranks (LOCAL_SIZE).
// ~155e9 parameters: about 2.3 TiB of fp32 stage-0 states per rank.
TEST_CASE("e2e: dsrun --num_gpus 2 train refuses a model over the host's memory before allocating",
          "[e2e]") {
  TempDir dir;
  std::string out;
  const int rc =
      runCommand(trainCmd(dir.path(),
                          "--set model.gpt.n_layer=48 --set model.gpt.n_embd=16384 --set "
                          "model.gpt.n_head=128 --set train.steps=1 --set train.device=cpu"),
                 &out, std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 2);  // a configuration error on every rank (DESIGN.md exit status)
  // Every rank refuses; dsrun stops the others once the first exits, so a second rank's line may
  // not get printed before it is stopped.
  CHECK(out.find("ConfigError: memory: the plan needs") != std::string::npos);
  CHECK(out.find("checked before allocating them") != std::string::npos);
  CHECK(out.find("this host's share of free memory") != std::string::npos);
  CHECK(out.find(" over 2 local rank(s)") != std::string::npos);
  CHECK(out.find("154630651904 params") != std::string::npos);
  CHECK(out.find("no ZeRO/offload setting fits at this world size") != std::string::npos);
  CHECK(out.find("| loss") == std::string::npos);
}

// Pipeline parallelism through the binaries (docs/plan.md "Pipeline parallelism"): 2 processes
// holding one stage each of a 4-block GPT print the startup layout and the same step and
// validation losses (4 decimals) as one `dsrt train` process with the same global batch.
TEST_CASE("e2e: dsrun --num_gpus 2 train at parallel.pipeline=2 prints one process's losses",
          "[e2e]") {
  TempDir dir, single;
  const std::string sets =
      " --set model.gpt.n_layer=4 --set deepspeed.gradient_accumulation_steps=4 --set "
      "train.steps=12 --set train.log_every=4 --set train.eval_every=12 --set train.device=cpu ";
  std::string piped, one;
  const int rc = runCommand(trainCmd(dir.path(), "--set parallel.pipeline=2" + sets), &piped,
                            std::chrono::seconds(180));
  INFO(piped);
  REQUIRE(rc == 0);
  CHECK(piped.find("rank 0: stage 0 (data 0), blocks [0, 3): embeddings, layers 0..1") !=
        std::string::npos);
  CHECK(piped.find("rank 1: stage 1 (data 0), blocks [3, 6): layers 2..3, head and loss") !=
        std::string::npos);
  const int rcOne =
      runCommand(bin("dsrt") + " train --set train.checkpoint.dir=" + single.path() + sets, &one,
                 std::chrono::seconds(180));
  INFO(one);
  REQUIRE(rcOne == 0);
  for (const char* key : {" 4/12 | loss ", " 12/12 | loss ", "val loss "}) {
    INFO(key);
    CHECK(!lossAt(one, key).empty());
    CHECK(lossAt(piped, key) == lossAt(one, key));
  }
}

// Tensor parallelism through the binaries (docs/plan.md "Tensor parallelism"): 2 processes
// holding half the heads, MLP columns and vocabulary rows each of a 4-block GPT print the startup
// shards and the same step and validation losses (4 decimals) as one `dsrt train` process; the
// checkpoint they write is the canonical one, which `dsrt train --resume` continues at 1 process.
TEST_CASE("e2e: dsrun --num_gpus 2 train at parallel.tensor=2 prints one process's losses",
          "[e2e]") {
  TempDir dir, single;
  const std::string sets =
      " --set model.gpt.n_layer=4 --set train.steps=12 --set train.log_every=4 --set "
      "train.eval_every=12 --set train.device=cpu ";
  std::string split, one;
  const int rc = runCommand(trainCmd(dir.path(), "--set parallel.tensor=2" + sets), &split,
                            std::chrono::seconds(180));
  INFO(split);
  REQUIRE(rc == 0);
  CHECK(split.find("rank 1: data 0 tensor 1: heads [2, 4) of 4, MLP columns [128, 256) of 256, "
                   "vocabulary rows [32, 64) of 64") != std::string::npos);
  const int rcOne =
      runCommand(bin("dsrt") + " train --set train.checkpoint.dir=" + single.path() + sets, &one,
                 std::chrono::seconds(180));
  INFO(one);
  REQUIRE(rcOne == 0);
  for (const char* key : {" 4/12 | loss ", " 12/12 | loss ", "val loss "}) {
    INFO(key);
    CHECK(!lossAt(one, key).empty());
    CHECK(lossAt(split, key) == lossAt(one, key));
  }
  std::string resumed;  // the T=2 checkpoint at one process: 4 more steps
  const int rcResume = runCommand(bin("dsrt") + " train --set train.checkpoint.dir=" + dir.path() +
                                      sets + " --set train.steps=16 --resume latest",
                                  &resumed, std::chrono::seconds(180));
  INFO(resumed);
  CHECK(rcResume == 0);
  CHECK(resumed.find("over 2 tensor ranks") != std::string::npos);
  CHECK(resumed.find(" 16/16 | loss ") != std::string::npos);
}

// Pipeline x tensor through the binaries (docs/plan.md "Pipeline x tensor"): 4 local processes,
// 2 stages of a 4-block GPT each split over 2 tensor ranks, print the grid and the same step and
// validation losses (4 decimals) as one `dsrt train` process; their canonical checkpoint
// continues at one process.
TEST_CASE(
    "e2e: dsrun --num_gpus 4 train at parallel.pipeline=2 x tensor=2 prints one "
    "process's losses",
    "[e2e]") {
  TempDir dir, single;
  const std::string sets =
      " --set model.gpt.n_layer=4 --set deepspeed.gradient_accumulation_steps=2 --set "
      "train.steps=12 --set train.log_every=4 --set train.eval_every=12 --set train.device=cpu ";
  std::string grid, one;
  const int rc = runCommand(
      trainCmd(dir.path(), "--set parallel.pipeline=2 --set parallel.tensor=2" + sets, 4), &grid,
      std::chrono::seconds(300));
  INFO(grid);
  REQUIRE(rc == 0);
  CHECK(grid.find("data 1 x pipeline 2 x tensor 2") != std::string::npos);
  CHECK(grid.find("rank 3: stage 1 (data 0, tensor 1), blocks [3, 6): layers 2..3, head and "
                  "loss") != std::string::npos);
  CHECK(grid.find("rank 3: data 0 tensor 1: heads [2, 4) of 4") != std::string::npos);
  const int rcOne =
      runCommand(bin("dsrt") + " train --set train.checkpoint.dir=" + single.path() + sets, &one,
                 std::chrono::seconds(180));
  INFO(one);
  REQUIRE(rcOne == 0);
  for (const char* key : {" 4/12 | loss ", " 12/12 | loss ", "val loss "}) {
    INFO(key);
    CHECK(!lossAt(one, key).empty());
    CHECK(lossAt(grid, key) == lossAt(one, key));
  }
  std::string resumed;  // the P=2 x T=2 checkpoint at one process: 4 more steps
  const int rcResume = runCommand(bin("dsrt") + " train --set train.checkpoint.dir=" + dir.path() +
                                      sets + " --set train.steps=16 --resume latest",
                                  &resumed, std::chrono::seconds(180));
  INFO(resumed);
  CHECK(rcResume == 0);
  CHECK(resumed.find("in 2 pipeline stages over 2 tensor ranks") != std::string::npos);
  CHECK(resumed.find(" 16/16 | loss ") != std::string::npos);
}

namespace {

// Whether `dir` holds a checkpoint tag (global_stepN, possibly being saved) newer than `saved`.
bool newerTag(const std::string& dir, long saved) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool newer = false;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, "global_step", 11) == 0 && std::atol(e->d_name + 11) > saved)
      newer = true;
  ::closedir(d);
  return newer;
}

// Trains at the given ZeRO settings on 2 ranks with a checkpoint every 2 steps and SIGKILLs rank 1
// at a moment when the killed run has provably logged the step after the checkpoint `latest`
// names: both ranks are frozen (SIGSTOP), `latest` = S is read, the log must already show step
// S+1 and no newer tag may be in the making (rank 0 publishes `latest` only after a barrier with
// rank 1, so S stays the latest once rank 1 is dead); otherwise both continue and the check is
// retried. Then the job must end with 137 naming rank 1, and `--resume latest` must reproduce the
// killed run's loss at step S+1 (same trajectory), at the same ZeRO settings. Every wait is
// bounded.
void killAndResume(const std::string& zero) {
  TempDir dir;
  const std::string marker = dir.path(), log = dir.file("killed.log");
  std::string ignored;
  int rc = -1;
  std::thread job([&] {
    rc = runCommand(trainCmd(marker,
                             "--set train.steps=100000 --set train.checkpoint.every=2 "
                             "--set train.eval_every=0 --set train.log_every=1" +
                                 fixedSchedule() + zero) +
                        " >" + log + " 2>&1",
                    &ignored, std::chrono::seconds(240));
  });
  long saved = -1;
  bool killed = false;
  int victim = -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!exists(dir.file("latest"))) continue;
    const int r0 = findRankPid(marker, 0), r1 = findRankPid(marker, 1);
    if (r0 <= 0 || r1 <= 0) continue;
    victim = r1;
    ::kill(r0, SIGSTOP);
    ::kill(r1, SIGSTOP);
    const std::string tag = slurp(dir.file("latest"));
    const long s = tag.rfind("global_step", 0) == 0 ? std::atol(tag.c_str() + 11) : -1;
    const std::string next = " " + std::to_string(s + 1) + "/100000 | loss ";
    if (s > 0 && !newerTag(marker, s) && slurp(log).find(next) != std::string::npos) {
      ::kill(r1, SIGKILL);
      killed = true;
      saved = s;
    }
    ::kill(r0, SIGCONT);
    if (!killed) ::kill(r1, SIGCONT);
  }
  if (!killed && victim > 0) ::kill(victim, SIGKILL);  // end the job: the test fails below
  job.join();
  const std::string out = slurp(log);
  INFO(out);
  REQUIRE(killed);
  CHECK(rc == 137);
  CHECK(out.find("rank 1") != std::string::npos);
  CHECK(slurp(dir.file("latest")) == "global_step" + std::to_string(saved) + "\n");

  std::string out2;
  int rc2 = runCommand(
      trainCmd(marker,
               "--resume latest --set train.eval_every=0 " + fixedSchedule() +
                   "--set train.log_every=1 --set train.steps=" + std::to_string(saved + 2) + zero),
      &out2, std::chrono::seconds(180));
  INFO(out2);
  CHECK(rc2 == 0);
  CHECK(out2.find("resumed from") != std::string::npos);
  const std::string next = std::to_string(saved + 1), last = std::to_string(saved + 2);
  CHECK(out2.find(" " + last + "/" + last + " | loss") != std::string::npos);
  // Same trajectory: step saved+1's loss after the resume is the killed run's.
  const std::string before = lossAt(out, " " + next + "/100000 | loss ");
  const std::string after = lossAt(out2, " " + next + "/" + last + " | loss ");
  REQUIRE_FALSE(before.empty());
  CHECK(before == after);
}

}  // namespace

TEST_CASE("e2e: a rank killed during training ends the job with 137; latest resumes (ZeRO 3)",
          "[e2e]") {
  killAndResume(" --set deepspeed.zero_optimization.stage=3");
}

TEST_CASE(
    "e2e: a rank killed during training ends the job with 137; latest resumes (ZeRO 2, "
    "optimizer offload cpu)",
    "[e2e]") {
  killAndResume(
      " --set deepspeed.zero_optimization.stage=2"
      " --set deepspeed.zero_optimization.offload_optimizer.device=cpu");
}

// Stage 0's gradients are registered shared memory that the shm transport reduces through the
// peers' mappings (docs/comm.md "Registered buffers"): the run's losses are bitwise those of the
// same run copying with CMA (DS_COMM_SHM_MAP=0), and the startup table's buffers line carries the
// peers' mapped gradient pages only when they are mapped.
TEST_CASE("e2e: stage 0 on 2 ranks, gradients reduced in place by the peers: CMA's losses",
          "[e2e]") {
  auto run = [&](const std::string& map, std::string* losses, double* buffersMiB) {
    TempDir dir;
    std::string out;
    int rc = runCommand("DS_COMM_SHM_CMA_MIN_BYTES=4096 DS_COMM_SHM_MAP=" + map + " " +
                            trainCmd(dir.path(),
                                     "--set train.steps=12 --set train.log_every=4 "
                                     "--set train.eval_every=0") +
                            " 2>&1",
                        &out, std::chrono::seconds(180));
    INFO(out);
    REQUIRE(rc == 0);
    const std::string summary = slurp(dir.file("run_summary.json"));
    const size_t at = summary.find("\"losses\"");
    REQUIRE(at != std::string::npos);
    *losses = summary.substr(at, summary.find(']', at) - at);
    const size_t line = out.find("  buffers ");
    REQUIRE(line != std::string::npos);
    *buffersMiB = std::stod(out.substr(line + 10, 60));
  };
  std::string mapped, copied;
  double mappedMiB = 0, copiedMiB = 0;
  run("1", &mapped, &mappedMiB);
  run("0", &copied, &copiedMiB);
  CHECK(mapped == copied);
  CHECK(mapped.size() > 20);  // twelve losses, not an empty list
  CHECK(mappedMiB > copiedMiB);
}
