// The exit-status contract (DESIGN.md §4.4, docs/launcher.md "Exit status and teardown"), one
// table for every runner: local, ssh, pdsh, openmpi, mpich and slurm each run the same scenarios
// with 4 ranks: all exit 0 -> 0; rank 2 exits 3 -> 3; rank 2 SIGKILLed -> 137; SIGTERM to dsrun
// -> 143; and with ranks that ignore SIGTERM (and SIGINT), a failure or a SIGTERM still ends the
// whole job within about one grace period (DS_KILL_GRACE=3: under 3 x 3 s, where one grace per
// rank would be 4 x 3 s). After each scenario every rank's pid (written by the rank itself) must be
// gone: no orphan. Real dsrun, real tools (test cluster sshd, pdsh, mpirun, hydra, one-host Slurm),
// real signals; a runner that cannot run here is skipped with the reason.
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <memory>

#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

constexpr int kRanks = 4;
constexpr int kGraceSeconds = 3;

// The rank program: `sh <dir>/contract.sh <dir> <mode>`. Writes its pid to <dir>/pid.<rank>, then
// (except `ok`) waits for <dir>/go and: failN -> rank N exits 3; killN -> rank N SIGKILLs itself;
// hang -> every rank waits. A `stub` prefix (stubfail2, stubhang) ignores SIGTERM and SIGINT
// first, in the rank and in the `sleep`s it starts. Waiting ranks loop on short sleeps.
std::string writeContractScript(const TempDir& dir) {
  std::string path = dir.file("contract.sh");
  writeFile(path,
            "#!/bin/sh\n"
            "out=$1; mode=$2\n"
            "r=${RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-x}}}}\n"
            "case $mode in stub*) trap '' TERM INT; mode=${mode#stub} ;; esac\n"
            "echo $$ > \"$out/pid.tmp.$r\" && mv \"$out/pid.tmp.$r\" \"$out/pid.$r\"\n"
            "[ \"$mode\" = ok ] && exit 0\n"
            "i=0; while [ ! -e \"$out/go\" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
            "case $mode in\n"
            "  fail*) [ \"$r\" = \"${mode#fail}\" ] && exit 3 ;;\n"
            "  kill*) [ \"$r\" = \"${mode#kill}\" ] && kill -9 $$ ;;\n"
            "esac\n"
            "i=0; while [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done\n");
  return path;
}

struct Scenario {
  const char* name;
  const char* mode;  // the rank program's mode
  int signal;        // sent to dsrun once every rank runs; 0: none
  int expected;      // dsrun's exit status
  const char* says;  // a phrase of the failing rank's report in dsrun's output; "" for none
};

const Scenario kScenarios[] = {
    {"every rank exits 0", "ok", 0, 0, ""},
    {"rank 2 exits 3", "fail2", 0, 3, "exited with code 3"},
    {"rank 2 is SIGKILLed", "kill2", 0, 128 + SIGKILL, "was killed by signal 9 (SIGKILL)"},
    {"SIGTERM to dsrun", "hang", SIGTERM, 128 + SIGTERM, ""},
    {"ranks ignore SIGTERM, rank 2 exits 3", "stubfail2", 0, 3, "exited with code 3"},
    {"ranks ignore SIGTERM, SIGTERM to dsrun", "stubhang", SIGTERM, 128 + SIGTERM, ""},
};

// The rank pids written to dir/pid.<rank>.
std::vector<int> rankPids(const TempDir& dir) {
  std::vector<int> out;
  for (int r = 0; r < kRanks; ++r) {
    std::string f = dir.file("pid." + std::to_string(r));
    if (::access(f.c_str(), F_OK) == 0) out.push_back(std::stoi(readFile(f)));
  }
  return out;
}

// True while pid is a live (not zombie) process running the rank script.
bool rankAlive(int pid, const std::string& script) {
  std::string proc = "/proc/" + std::to_string(pid);
  if (::access((proc + "/stat").c_str(), F_OK) != 0) return false;
  std::string stat = readFile(proc + "/stat");
  auto paren = stat.rfind(") ");
  if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return false;
  return readFile(proc + "/cmdline").find(script) != std::string::npos;
}

// Runs one runner's jobs: `command(dir, script, mode)` is the shell command (ending in
// `exec dsrun ...`) that runs `sh script dir mode` as 4 ranks with DS_KILL_GRACE=3.
using CommandFor =
    std::function<std::string(const TempDir&, const std::string&, const std::string&)>;

void runScenario(const Scenario& sc, const CommandFor& command) {
  TempDir tmp;
  std::string script = writeContractScript(tmp);
  INFO("scenario: " << sc.name);
  Background bg(command(tmp, script, sc.mode), tmp.file("out"));
  auto upBy = Clock::now() + std::chrono::seconds(90);
  while (static_cast<int>(rankPids(tmp).size()) < kRanks && Clock::now() < upBy &&
         bg.wait(std::chrono::milliseconds(0)) == -1)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<int> pids = rankPids(tmp);
  INFO("dsrun output:\n" << bg.output());
  REQUIRE(static_cast<int>(pids.size()) == kRanks);
  const auto t0 = Clock::now();  // every rank runs: the failure or the signal starts now
  writeFile(tmp.file("go"), "");
  if (sc.signal != 0) bg.signal(sc.signal);
  int rc = bg.wait(std::chrono::seconds(120));
  // The job has ended when dsrun has returned and no rank (nor anything running the script: a
  // wrapper, a sleep) is left on any host.
  auto gone = [&] {
    for (int pid : pids)
      if (rankAlive(pid, script)) return false;
    return processesWith(script).empty();
  };
  auto deadline = Clock::now() + std::chrono::seconds(4 * kGraceSeconds + 10);
  while (!gone() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO("output:\n" << bg.output() << "\njob over " << secs << " s after all ranks ran");
  CHECK(rc == sc.expected);
  CHECK(gone());
  std::vector<int> left;
  for (int pid : pids)
    if (rankAlive(pid, script)) left.push_back(pid);
  CHECK(left.empty());
  // One grace period (3 s) plus the tools' own start and stop, not one grace per rank (12 s).
  CHECK(secs < 3 * kGraceSeconds);
  if (*sc.says != '\0') {
    CHECK(bg.output().find("rank 2 (local rank ") != std::string::npos);
    CHECK(bg.output().find(sc.says) != std::string::npos);
  }
}

void runContract(const CommandFor& command) {
  for (const auto& sc : kScenarios) runScenario(sc, command);
}

std::string dsrunTail(const TempDir& tmp, const std::string& script, const std::string& mode) {
  return " --master_port " + std::to_string(freePort()) + " --no_local_rank sh " + script + " " +
         tmp.path() + " " + mode;
}

std::string envPrefix() {
  return "DS_KILL_GRACE=" + std::to_string(kGraceSeconds) +
         " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
}

// Several "hosts" on one machine: no shared-memory BTL, no binding (openmpi_launch_test.cc).
const char* kMpiFlags =
    " --launcher_args '--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include "
    "lo --bind-to none --mca mpi_yield_when_idle 1'";

// ssh, pdsh, openmpi, mpich: the test cluster's two hosts, 2 ranks each.
void runOnCluster(const std::string& launcher, const std::string& flags) {
  TestCluster cluster(2);
  runContract([&](const TempDir& tmp, const std::string& script, const std::string& mode) {
    writeFile(tmp.file("hostfile"),
              cluster.addr(0) + " slots=2\n" + cluster.addr(1) + " slots=2\n");
    return "cd " + tmp.path() + " && " + cluster.envPrefix() + envPrefix() + "exec " + dsrunPath() +
           " --hostfile " + tmp.file("hostfile") + " --launcher " + launcher + " --master_addr " +
           cluster.addr(0) + flags + dsrunTail(tmp, script, mode);
  });
}

// Debian's path of the tool (where the other e2e tests look too).
bool installed(const std::string& tool) {
  return ::access(("/usr/bin/" + tool).c_str(), X_OK) == 0;
}

}  // namespace

TEST_CASE("exit contract: local runner", "[e2e]") {
  runContract([](const TempDir& tmp, const std::string& script, const std::string& mode) {
    return "cd " + tmp.path() + " && " + envPrefix() + "exec " + dsrunPath() + " --num_gpus " +
           std::to_string(kRanks) + dsrunTail(tmp, script, mode);
  });
}

TEST_CASE("exit contract: ssh runner", "[e2e]") {
  DS_NEED_CLUSTER();
  runOnCluster("ssh", "");
}

TEST_CASE("exit contract: pdsh runner", "[e2e]") {
  DS_NEED_CLUSTER();
  if (!installed("pdsh")) DS_SKIP("no /usr/bin/pdsh (apt-get install pdsh)");
  runOnCluster("pdsh", "");
}

TEST_CASE("exit contract: openmpi runner", "[e2e]") {
  DS_NEED_CLUSTER();
  if (!installed("mpirun")) DS_SKIP("no /usr/bin/mpirun (apt-get install openmpi-bin)");
  runOnCluster("openmpi", kMpiFlags);
}

TEST_CASE("exit contract: mpich runner", "[e2e]") {
  DS_NEED_CLUSTER();
  if (!installed("mpiexec.hydra")) DS_SKIP("no /usr/bin/mpiexec.hydra (apt-get install mpich)");
  runOnCluster("mpich", "");
}

TEST_CASE("exit contract: slurm runner", "[e2e]") {
  if (auto why = TestSlurm::skipReason(); !why.empty()) DS_SKIP("one-host slurm: " << why);
  TestSlurm slurm;
  runContract([&](const TempDir& tmp, const std::string& script, const std::string& mode) {
    writeFile(tmp.file("hostfile"), slurm.node() + " slots=" + std::to_string(kRanks) + "\n");
    return "cd " + tmp.path() + " && " + slurm.envPrefix() + envPrefix() + "exec " + dsrunPath() +
           " --hostfile " + tmp.file("hostfile") +
           " --launcher slurm --force_multi --master_addr 127.0.0.1" + dsrunTail(tmp, script, mode);
  });
}
