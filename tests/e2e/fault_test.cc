// The fault set ([fault]): real SIGKILLs of one training rank (DS_FAULT_KILL: the rank kills
// itself at an exact point, as kill -9 from outside would) at a random step of every ZeRO stage x
// offload mode (none, cpu, nvme), with restarts on and off, and inside a checkpoint save. Each
// trial checks the outcome (exit status, the restart, no process left, `latest` intact) and that
// the resumed run's per-step losses are the uninterrupted run's, bit for bit.
// Short form (CI, the default): one trial per configuration with restarts, one stage-spread
// subset for the other two cases. Long form: DS_FAULT_TRIALS=N trials of every configuration in
// every case (bench/faults.sh, which writes bench/results/faults.txt from DS_FAULT_RECORD).
// DS_FAULT_SEED=<n> replays a run's random choices.
#include <cstdio>
#include <map>
#include <random>
#include <sstream>

#include "tests/e2e/restart_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

unsigned faultSeed() {
  const char* s = std::getenv("DS_FAULT_SEED");
  static const unsigned seed =
      s && *s ? unsigned(std::strtoul(s, nullptr, 10)) : std::random_device{}();
  return seed;
}

int longTrials() {
  const char* s = std::getenv("DS_FAULT_TRIALS");
  return s && *s ? std::max(0, std::atoi(s)) : 0;
}

std::mt19937& rng() {
  static std::mt19937 r(faultSeed());
  return r;
}

int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }

// The configurations a case runs: every one N times in the long form; in the short form all of
// them (every) or one per stage with a random offload mode.
std::vector<ZeroConfig> trialConfigs(bool every) {
  std::vector<ZeroConfig> all = allZeroConfigs(), out;
  if (int n = longTrials(); n > 0) {
    for (int i = 0; i < n; ++i) out.insert(out.end(), all.begin(), all.end());
    return out;
  }
  if (every) return all;
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<ZeroConfig> of;
    for (const auto& z : all)
      if (z.stage == stage) of.push_back(z);
    out.push_back(of[static_cast<size_t>(pick(0, static_cast<int>(of.size()) - 1))]);
  }
  return out;
}

const std::string kLaunch = "--num_gpus 2 --master_port ";

// The uninterrupted run of each configuration, once per process.
const Trajectory& reference(const ZeroConfig& z) {
  static std::map<std::string, Trajectory> cache;
  auto it = cache.find(z.name());
  if (it != cache.end()) return it->second;
  TempDir dir;
  TimedRun run = runTimed(trainCommand(dir, z, kLaunch + std::to_string(freePort())),
                          std::chrono::seconds(300));
  INFO(z.name() << "\n" << run.output());
  REQUIRE(run.status == 0);
  Trajectory t = readTrajectory(dir.file("ckpt/run_summary.json"));
  REQUIRE(t.losses.size() == static_cast<size_t>(kSteps));
  return cache[z.name()] = t;
}

// One trial's outcome, as bench/results/faults.txt lists it.
struct Trial {
  std::string kind;  // restart | no-restart | save
  ZeroConfig z;
  int rank = 0, step = 0, expectStatus = 0, status = -1, orphans = -1;
  long expectResume = 0, resumedFrom = -1;
  double secs = -1;  // the kill to dsrun's restart line (restarts) or to dsrun's exit
  bool trajectory = false, clean = false;
};

void record(const Trial& t) {
  const char* path = std::getenv("DS_FAULT_RECORD");
  if (!path || !*path) return;
  std::FILE* f = std::fopen(path, "a");
  if (!f) return;
  std::fprintf(f,
               "%-10s | stage %d offload %-4s | rank %d | step %2d | status %3d (want %3d) | "
               "%5.2f s | orphans %d | resumed from %2ld (want %2ld) | trajectory %s | %s\n",
               t.kind.c_str(), t.z.stage, t.z.offload.c_str(), t.rank, t.step, t.status,
               t.expectStatus, t.secs, t.orphans, t.resumedFrom, t.expectResume,
               t.trajectory ? "equal" : "DIFFERS", t.clean ? "clean" : "FAILED");
  std::fclose(f);
}

// After dsrun exits: processes left that mention the trial's dir (none may be), counted at once.
int orphansOf(const TempDir& dir) {
  int now = static_cast<int>(processesWith(dir.path()).size());
  waitNoProcesses(dir.path(), std::chrono::seconds(10));  // a failed trial leaves the next clean
  return now;
}

// One trial with restarts on: rank `t.rank` dies (before step t.step, or in its save); the job
// succeeds on attempt 2 and its losses from the resumed step on are the reference's.
void restartTrial(Trial& t, const std::string& at) {
  const Trajectory& full = reference(t.z);
  TempDir dir;
  const std::string env = "DS_FAULT_KILL=rank=" + std::to_string(t.rank) +
                          ",step=" + std::to_string(t.step) + ",at=" + at;
  TimedRun run = runTimed(
      trainCommand(dir, t.z, "--max_restarts 1 " + kLaunch + std::to_string(freePort()), env),
      std::chrono::seconds(300));
  t.orphans = orphansOf(dir);
  t.status = run.status;
  const TimedLine* restart = run.find("dsrun: restart 1 of 1: rank " + std::to_string(t.rank));
  const double killedAt = faultKillTime(run);
  if (restart && killedAt > 0) t.secs = restart->at - killedAt;
  Trajectory resumed = readTrajectory(dir.file("ckpt/run_summary.json"));
  t.resumedFrom = resumed.firstStep;
  t.trajectory = sameTrajectory(full, resumed);
  const bool latestFinal = readFile(dir.file("ckpt/latest")) == "global_step16\n";
  t.clean = t.status == 0 && restart && t.orphans == 0 && t.resumedFrom == t.expectResume &&
            t.trajectory && latestFinal;
  record(t);
  INFO(t.z.name() << ", seed " << faultSeed() << ": rank " << t.rank << " killed at " << at << " "
                  << t.step << "\n"
                  << run.output());
  CHECK(t.status == 0);
  CHECK(restart != nullptr);
  CHECK(run.count("DS_FAULT_KILL: rank") == 1);
  CHECK(t.orphans == 0);
  CHECK(t.resumedFrom == t.expectResume);
  CHECK(t.trajectory);
  CHECK(latestFinal);  // the next saves into the same folder worked
}

}  // namespace

TEST_CASE("fault: a rank SIGKILLed at a random step, every ZeRO stage x offload, restarts on",
          "[fault]") {
  for (const ZeroConfig& z : trialConfigs(/*every=*/true)) {
    Trial t;
    t.kind = "restart";
    t.z = z;
    t.rank = pick(0, 1);
    t.step = pick(2, kSteps);
    t.expectResume = (t.step - 1) / kCkptEvery * kCkptEvery;
    restartTrial(t, "step");
  }
}

TEST_CASE("fault: a rank SIGKILLed inside a checkpoint save, restarts on", "[fault]") {
  for (const ZeroConfig& z : trialConfigs(/*every=*/false)) {
    Trial t;
    t.kind = "save";
    t.z = z;
    t.rank = pick(0, 1);
    t.step = pick(1, (kSteps - 1) / kCkptEvery) * kCkptEvery;  // a periodic save: 3, 6, ... 15
    t.expectResume = t.step - kCkptEvery;                      // `latest` had not moved yet
    restartTrial(t, "save");
  }
}

TEST_CASE("fault: a rank SIGKILLed at a random step without restarts: 137, latest resumes",
          "[fault]") {
  for (const ZeroConfig& z : trialConfigs(/*every=*/false)) {
    Trial t;
    t.kind = "no-restart";
    t.z = z;
    t.rank = pick(0, 1);
    t.step = pick(2, kSteps);
    t.expectStatus = 137;
    t.expectResume = (t.step - 1) / kCkptEvery * kCkptEvery;
    const Trajectory& full = reference(z);
    TempDir dir;
    const std::string env =
        "DS_FAULT_KILL=rank=" + std::to_string(t.rank) + ",step=" + std::to_string(t.step);
    TimedRun run = runTimed(trainCommand(dir, z, kLaunch + std::to_string(freePort()), env),
                            std::chrono::seconds(300));
    t.orphans = orphansOf(dir);
    t.status = run.status;
    const double killedAt = faultKillTime(run);
    if (killedAt > 0) t.secs = run.exitAt - killedAt;
    const std::string latest = readFile(dir.file("ckpt/latest"));
    const std::string want = "global_step" + std::to_string(t.expectResume) + "\n";
    // The same command resumes from `latest` and continues the uninterrupted trajectory.
    TimedRun again = runTimed(trainCommand(dir, z, kLaunch + std::to_string(freePort())) +
                                  (t.expectResume > 0 ? " --resume latest" : ""),
                              std::chrono::seconds(300));
    Trajectory resumed = readTrajectory(dir.file("ckpt/run_summary.json"));
    t.resumedFrom = resumed.firstStep;
    t.trajectory = again.status == 0 && sameTrajectory(full, resumed);
    const bool latestOk = t.expectResume == 0 || latest == want;
    t.clean = t.status == 137 && t.orphans == 0 && latestOk && t.resumedFrom == t.expectResume &&
              t.trajectory;
    record(t);
    INFO(z.name() << ", seed " << faultSeed() << ": rank " << t.rank << " killed before step "
                  << t.step << "\n"
                  << run.output() << "\n--- resumed:\n"
                  << again.output());
    CHECK(t.status == 137);
    CHECK(t.orphans == 0);
    CHECK(latestOk);
    CHECK(t.resumedFrom == t.expectResume);
    CHECK(t.trajectory);
  }
}
