// Helpers shared by the remote-launch end-to-end tests (ssh, pdsh, openmpi, mpich, slurm): the
// rank probe script, reading what each rank saw, the process-table check, and dsrun run in the
// background with a deadline. Header-only; each *_test.cc includes it. Not a mock: everything
// runs the real dsrun binary against the real test cluster.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/rank_env.h"
#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/test_cluster.h"

namespace ds::test::e2e {

using Clock = std::chrono::steady_clock;

inline std::string dsrunPath() { return std::string(DS_BINARY_DIR) + "/dsrun"; }

// The rank program: `sh <dir>/rank.sh <dir> <mode>`. Writes its whole environment to
// <dir>/env.<rank>, prints one "probe r=<rank> up" line (worded so that no check for a failure
// summary, "rank 3 ... on host 127.0.0.3", can match it), then: ok -> exit 0; failN -> rank N exits
// 3 after 0.5 s, the others wait; killN -> rank N SIGKILLs itself after 0.5 s, the others wait;
// hang -> every rank waits. Waiting ranks loop on short sleeps so that a signal ends them.
inline std::string writeRankScript(const TempDir& dir) {
  std::string path = dir.file("rank.sh");
  writeFile(path,
            "#!/bin/sh\n"
            "out=$1; mode=$2\n"
            "r=${RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-x}}}}\n"
            "env > \"$out/env.tmp.$$\" && mv \"$out/env.tmp.$$\" \"$out/env.$r\"\n"
            "echo \"probe r=$r up, ssh ${SSH_CONNECTION:-none}\"\n"
            "case $mode in\n"
            "  ok) exit 0 ;;\n"
            "  fail*) if [ \"$r\" = \"${mode#fail}\" ]; then sleep 0.5; exit 3; fi ;;\n"
            "  kill*) if [ \"$r\" = \"${mode#kill}\" ]; then sleep 0.5; kill -9 $$; fi ;;\n"
            "esac\n"
            "i=0; while [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done\n");
  return path;
}

// Every env.<rank> file in dir, parsed.
inline std::vector<EnvMap> readRankEnvs(const TempDir& dir) {
  std::vector<EnvMap> out;
  DIR* d = opendir(dir.path().c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("env.", 0) != 0 || name.rfind("env.tmp", 0) == 0) continue;
    EnvMap m;
    std::istringstream in(readFile(dir.file(name)));
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
    }
    out.push_back(std::move(m));
  }
  closedir(d);
  return out;
}

// The server address of the ssh session a rank descends from ("local" when none).
inline std::string serverAddr(const EnvMap& env) {
  auto it = env.find("SSH_CONNECTION");
  if (it == env.end()) return "local";
  std::istringstream in(it->second);
  std::string a, b, c;
  in >> a >> b >> c;
  return c;
}

// Checks hosts x perHost ranks: each rank once, on host addrs[rank / perHost], with the derived
// (and, when rawVars, the literal) RANK, LOCAL_RANK, WORLD_SIZE, CROSS_RANK, MASTER_*.
inline void checkRanks(const std::vector<EnvMap>& envs, const std::vector<std::string>& addrs,
                       int perHost, const std::string& masterAddr, int masterPort, bool rawVars) {
  const int world = static_cast<int>(addrs.size()) * perHost;
  REQUIRE(static_cast<int>(envs.size()) == world);
  std::vector<int> seen(world, 0);
  for (const auto& env : envs) {
    RankEnv r = deriveRankEnv(env);
    INFO("rank " << r.rank << " on " << serverAddr(env));
    REQUIRE(r.rank >= 0);
    REQUIRE(r.rank < world);
    ++seen[r.rank];
    CHECK(r.worldSize == world);
    CHECK(r.localRank == r.rank % perHost);
    CHECK(r.crossRank == r.rank / perHost);
    CHECK(r.masterAddr == masterAddr);
    CHECK(r.masterPort == masterPort);
    CHECK(serverAddr(env) == addrs[r.rank / perHost]);
    if (rawVars) {
      CHECK(env.at("RANK") == std::to_string(r.rank));
      CHECK(env.at("LOCAL_RANK") == std::to_string(r.rank % perHost));
      CHECK(env.at("WORLD_SIZE") == std::to_string(world));
      CHECK(env.at("CROSS_RANK") == std::to_string(r.rank / perHost));
      CHECK(env.at("MASTER_ADDR") == masterAddr);
      CHECK(env.at("MASTER_PORT") == std::to_string(masterPort));
    }
  }
  for (int i = 0; i < world; ++i) CHECK(seen[i] == 1);
}

// Pids (other than ours) whose command line contains `needle`.
inline std::vector<int> processesWith(const std::string& needle) {
  std::vector<int> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmd = readFile("/proc/" + std::to_string(pid) + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) out.push_back(pid);
  }
  closedir(d);
  return out;
}

// Polls until no process mentions needle; returns what is left after the deadline.
inline std::vector<int> waitNoProcesses(const std::string& needle,
                                        std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = processesWith(needle);
    if (left.empty() || Clock::now() > deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// `sh -c cmd` in the background, its own process group, output to a file. The destructor kills
// the group (leftovers of a failed test) and reaps.
class Background {
 public:
  Background(const std::string& cmd, const std::string& outFile) : out_(outFile) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      int fd = open(outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid_, pid_);
  }
  ~Background() {
    if (!done_) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }
  void signal(int sig) { kill(pid_, sig); }
  // Exit status (128+signal when killed), or -1 when still running at the deadline.
  int wait(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!done_) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        done_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (Clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  std::string output() const { return readFile(out_); }

 private:
  std::string out_;
  int pid_ = -1;
  bool done_ = false;
  int status_ = -1;
};

// Waits until n env.<rank> files exist (all ranks started) or the timeout passes.
inline bool waitRanksUp(const TempDir& dir, int n, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (static_cast<int>(readRankEnvs(dir).size()) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace ds::test::e2e

namespace ds::test::e2e {

// One remote-launch scenario against the test cluster: the job dir, hostfile, rank script and the
// dsrun command line for `launcher`.
struct RemoteJob {
  TestCluster cluster{2};
  TempDir tmp;
  std::string script = writeRankScript(tmp);
  int masterPort = freePort();
  std::string masterAddr = "127.0.0.2";

  // hosts: as written in the hostfile (addresses or ssh_config aliases), 2 slots each.
  std::string command(const std::string& launcher, const std::string& mode,
                      const std::vector<std::string>& hosts,
                      const std::string& extraFlags = "") const {
    std::string hf;
    for (const auto& h : hosts) hf += h + " slots=2\n";
    writeFile(tmp.file("hostfile"), hf);
    return "cd " + tmp.path() + " && " + cluster.envPrefix() +
           "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 exec " + dsrunPath() +
           " --hostfile " + tmp.file("hostfile") + " --launcher " + launcher + " --master_addr " +
           masterAddr + " --master_port " + std::to_string(masterPort) + " --no_local_rank " +
           extraFlags + " sh " + script + " " + tmp.path() + " " + mode;
  }
  std::vector<std::string> addrs() const { return {cluster.addr(0), cluster.addr(1)}; }
};

// Skips the test case (DS_SKIP) when the test cluster cannot run here. In the TEST_CASE body.
#define DS_NEED_CLUSTER()                                                 \
  do {                                                                    \
    if (auto why = ::ds::test::TestCluster::skipReason(); !why.empty()) { \
      DS_SKIP("test cluster: " << why);                                   \
    }                                                                     \
  } while (0)

// 2 hosts x 2 ranks: every rank's environment.
inline void caseRanks(const std::string& launcher, const std::vector<std::string>& hostNames,
                      const std::string& extraFlags, bool rawVars) {
  RemoteJob job;
  std::string out;
  int rc = runCommand(job.command(launcher, "ok", hostNames, extraFlags), &out,
                      std::chrono::seconds(120));
  INFO(out);
  REQUIRE(rc == 0);
  checkRanks(readRankEnvs(job.tmp), job.addrs(), 2, job.masterAddr, job.masterPort, rawVars);
}

// The lines of `out` that contain `needle`, for the failure messages below.
inline std::string linesWith(const std::string& out, const std::string& needle) {
  std::istringstream in(out);
  std::string res;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) res += line + "\n";
  return res;
}

// Each expected summary line must appear as a whole line of out (a prefix such as pdsh's
// "127.0.0.3: " is part of what the caller expects; a pty's "\r\n" counts as "\n").
inline void checkSummaryLines(std::string out, const std::vector<std::string>& expected) {
  std::erase(out, '\r');
  for (const auto& want : expected) {
    INFO("expected the whole line: " << want << "\ndsrun lines:\n" << linesWith(out, "dsrun"));
    CHECK((out.rfind(want + "\n", 0) == 0 || out.find("\n" + want + "\n") != std::string::npos));
  }
}

// One of `alternatives` is a whole line of out.
inline void checkOneOfLines(std::string out, const std::vector<std::string>& alternatives) {
  std::erase(out, '\r');
  bool found = false;
  for (const auto& want : alternatives)
    found = found || out.rfind(want + "\n", 0) == 0 || out.find("\n" + want + "\n") != out.npos;
  INFO("expected one of these whole lines:\n"
       <<
       [&] {
         std::string all;
         for (const auto& a : alternatives) all += a + "\n";
         return all;
       }()
       << "dsrun lines:\n"
       << linesWith(out, "dsrun"));
  CHECK(found);
}

// Rank 3 (on the second host) exits 3: the job exits 3 within seconds, dsrun prints `summary`
// (each a whole line of its output: rank, local rank, host, cause) and one of `oneOf` (when
// given), and every rank is gone.
inline void caseFail3(const std::string& launcher, const std::string& extraFlags,
                      const std::vector<std::string>& summary,
                      const std::vector<std::string>& oneOf = {}) {
  RemoteJob job;
  std::string out;
  auto t0 = Clock::now();
  int rc = runCommand(job.command(launcher, "fail3", job.addrs(), extraFlags), &out,
                      std::chrono::seconds(120));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(out);
  CHECK(rc == 3);
  CHECK(secs < 60);  // the waiting ranks would take 120 s on their own
  checkSummaryLines(out, summary);
  if (!oneOf.empty()) checkOneOfLines(out, oneOf);
  CHECK(waitNoProcesses(job.script, std::chrono::seconds(15)).empty());
}

// Rank 3 (on the second host) dies by SIGKILL: the job exits 137, dsrun prints `summary`, and
// every rank is gone.
inline void caseKill9(const std::string& launcher, const std::string& extraFlags,
                      const std::vector<std::string>& summary,
                      const std::vector<std::string>& oneOf = {}) {
  RemoteJob job;
  std::string out;
  int rc = runCommand(job.command(launcher, "kill3", job.addrs(), extraFlags), &out,
                      std::chrono::seconds(120));
  INFO(out);
  CHECK(rc == 137);
  checkSummaryLines(out, summary);
  if (!oneOf.empty()) checkOneOfLines(out, oneOf);
  CHECK(waitNoProcesses(job.script, std::chrono::seconds(15)).empty());
}

// A signal to dsrun once every rank runs: dsrun exits non-zero, no rank is left on any host.
inline void caseSignal(const std::string& launcher, int sig, const std::string& extraFlags) {
  RemoteJob job;
  Background bg(job.command(launcher, "hang", job.addrs(), extraFlags), job.tmp.file("out"));
  bool up = waitRanksUp(job.tmp, 4, std::chrono::seconds(90));
  INFO(bg.output());
  REQUIRE(up);
  REQUIRE(processesWith(job.script).size() >= 4);
  bg.signal(sig);
  int rc = bg.wait(std::chrono::seconds(60));
  CHECK(rc != 0);
  CHECK(rc != -1);
  auto left = waitNoProcesses(job.script, std::chrono::seconds(sig == SIGKILL ? 20 : 15));
  CHECK(left.empty());
}

}  // namespace ds::test::e2e
