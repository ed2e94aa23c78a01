// dsrun end to end on this machine (the local runner: no hostfile): the built `dsrun` binary with
// small shell programs as ranks. Rank environment, output prefixes, the failing rank's status and
// summary, and teardown on SIGTERM/SIGINT/SIGKILL of dsrun checked in the real process table.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "ds/config.h"
#include "tests/launcher/agent/process_probe.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::test;

namespace {

std::string dsrunBinary() { return std::string(DS_BINARY_DIR) + "/dsrun"; }

// Starts dsrun with `args` in dir (stdout -> dir/out, stderr -> dir/err, stdin /dev/null).
// `marker` is put in dsrun's environment, so every rank and its children carry it too.
pid_t startDsrun(const std::vector<std::string>& args, const TempDir& dir,
                 const std::string& marker, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {dsrunBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(dir.file("err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (::chdir(dir.path().c_str()) != 0) ::_exit(126);
    ::setenv("DS_TEST_MARKER", marker.c_str(), 1);
    for (const auto& kv : env)  // "K=V" sets, "K" unsets
      kv.find('=') == std::string::npos ? ::unsetenv(kv.c_str()) : ::putenv(::strdup(kv.c_str()));
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return pid;
}

int runDsrun(const std::vector<std::string>& args, const TempDir& dir, const std::string& marker,
             const std::vector<std::string>& env = {}) {
  return waitChild(startDsrun(args, dir, marker, env), std::chrono::seconds(60)).value_or(-1);
}

std::map<std::string, std::string> parseWords(const std::string& line) {
  std::map<std::string, std::string> m;
  std::istringstream in(line);
  for (std::string w; in >> w;)
    if (auto eq = w.find('='); eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
  return m;
}

// A rank that stays up (a background child in its group) until it is signalled.
const std::vector<std::string> kSleeper = {"sh", "-c", "sleep 60 & wait"};

}  // namespace

TEST_CASE("dsrun local: 8 ranks get RANK, LOCAL_RANK, WORLD_SIZE, CROSS_RANK, MASTER_*", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2eenv");
  int port = freePort();
  REQUIRE(runDsrun({"--num_gpus", "8", "--master_port", std::to_string(port), "sh", "-c",
                    "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
                    "LOCAL_SIZE=$LOCAL_SIZE CROSS_RANK=$CROSS_RANK CROSS_SIZE=$CROSS_SIZE "
                    "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT TOKEN=${#DS_JOB_TOKEN} "
                    "ARG=$0"},
                   dir, marker) == 0);
  std::istringstream out(readFile(dir.file("out")));
  std::vector<bool> seen(8, false);
  int lines = 0;
  for (std::string line; std::getline(out, line); ++lines) {
    INFO(line);
    REQUIRE(line.size() > 4);
    REQUIRE(line[0] == '[');
    int prefixRank = std::stoi(line.substr(1));
    auto w = parseWords(line.substr(line.find(']') + 1));
    int rank = std::stoi(w["RANK"]);
    CHECK(rank == prefixRank);
    CHECK(w["LOCAL_RANK"] == w["RANK"]);
    CHECK(w["WORLD_SIZE"] == "8");
    CHECK(w["LOCAL_SIZE"] == "8");
    CHECK(w["CROSS_RANK"] == "0");
    CHECK(w["CROSS_SIZE"] == "1");
    CHECK(w["MASTER_ADDR"] == "127.0.0.1");
    CHECK(w["MASTER_PORT"] == std::to_string(port));
    CHECK(w["TOKEN"] == "32");  // the secret is there (length only: never printed)
    CHECK(w["ARG"] == "--local_rank=" + w["LOCAL_RANK"]);
    REQUIRE((rank >= 0 && rank < 8));
    CHECK_FALSE(seen[rank]);
    seen[rank] = true;
  }
  CHECK(lines == 8);
  CHECK(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
}

TEST_CASE("dsrun local: a rank exiting 3 makes the job exit 3, naming rank and host", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2eexit3");
  CHECK(runDsrun({"--num_gpus", "4", "sh", "-c",
                  "if [ \"$RANK\" = 3 ]; then exit 3; fi; sleep 60 & wait"},
                 dir, marker) == 3);
  std::string err = readFile(dir.file("err"));
  CHECK_THAT(err, Catch::Contains("rank 3 (local rank 3) on host localhost exited with code 3"));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);  // one summary line, nothing else
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("dsrun local: a rank killed by SIGKILL gives 137", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2ekill");
  CHECK(runDsrun({"--num_gpus", "2", "sh", "-c",
                  "if [ \"$RANK\" = 0 ]; then kill -KILL $$; fi; sleep 60 & wait"},
                 dir, marker) == 137);
  CHECK_THAT(readFile(dir.file("err")),
             Catch::Contains("rank 0 (local rank 0) on host localhost was killed by signal 9"));
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("dsrun local: SIGTERM or SIGINT to dsrun stops every rank, status non-zero", "[e2e]") {
  for (int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    std::string marker = uniqueMarker("e2esig");
    std::vector<std::string> args = {"--num_gpus", "4"};
    args.insert(args.end(), kSleeper.begin(), kSleeper.end());
    pid_t pid = startDsrun(args, dir, marker);
    REQUIRE(waitMarkerCount(marker, 1 + 4 + 4 + 1));  // dsrun, guard, 4 shells, 4 sleeps
    ::kill(pid, sig);
    auto st = waitChild(pid);
    REQUIRE(st);
    CHECK(*st == 128 + sig);
    CHECK(waitMarkerGone(marker).empty());
  }
}

TEST_CASE("dsrun local: SIGKILL to dsrun leaves no rank after a few seconds", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2esigkill");
  std::vector<std::string> args = {"--num_gpus", "4"};
  args.insert(args.end(), kSleeper.begin(), kSleeper.end());
  pid_t pid = startDsrun(args, dir, marker);
  REQUIRE(waitMarkerCount(marker, 1 + 4 + 4 + 1));
  ::kill(pid, SIGKILL);
  CHECK(waitChild(pid) == std::optional<int>(137));
  CHECK(waitMarkerGone(marker, std::chrono::seconds(10)).empty());
}

TEST_CASE("dsrun local: --enable_each_rank_log and --no_local_rank", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2elogs");
  REQUIRE(runDsrun({"--num_gpus", "2", "--no_local_rank", "--enable_each_rank_log",
                    dir.file("logs"), "sh", "-c", "echo hello $RANK $#"},
                   dir, marker) == 0);
  CHECK(readFile(dir.file("out")).empty());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("logs"))) {
    std::string name = e.path().filename();
    std::string rank = name.substr(name.find("_rank") + 5, 1);
    CHECK(readFile(e.path()) == "hello " + rank + " 0\n");
    ++files;
  }
  CHECK(files == 2);
}

TEST_CASE("dsrun local: --save_pid writes /tmp/<dsrun pid>.dsrun while the job runs", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2epid");
  std::vector<std::string> args = {"--num_gpus", "1", "--save_pid"};
  args.insert(args.end(), kSleeper.begin(), kSleeper.end());
  pid_t pid = startDsrun(args, dir, marker);
  REQUIRE(waitMarkerCount(marker, 1 + 1 + 1 + 1));
  std::string pidFile = "/tmp/" + std::to_string(pid) + ".dsrun";
  CHECK(readFile(pidFile) == std::to_string(pid) + "\n");
  ::kill(pid, SIGTERM);
  CHECK(waitChild(pid) == std::optional<int>(143));
  CHECK_FALSE(std::filesystem::exists(pidFile));
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("dsrun local: --bind_cores_to_rank pins each rank and sets OMP_NUM_THREADS", "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2ebind");
  REQUIRE(runDsrun({"--num_gpus", "1", "--bind_cores_to_rank", "sh", "-c",
                    "echo $(grep Cpus_allowed_list /proc/self/status | cut -f2) "
                    "omp=$OMP_NUM_THREADS"},
                   dir, marker, {"OMP_NUM_THREADS"}) == 0);
  // One rank gets every CPU dsrun may use; OMP_NUM_THREADS is their number.
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  std::string status = readFile("/proc/self/status");
  auto at = status.find("Cpus_allowed_list:\t") + 19;
  std::string mine = status.substr(at, status.find('\n', at) - at);
  CHECK(readFile(dir.file("out")) == fmt::format("[0] {} omp={}\n", mine, CPU_COUNT(&set)));
}

TEST_CASE("dsrun local: dsrt hello joins 3 ranks through the store and checks an allreduce",
          "[e2e]") {
  TempDir dir;
  std::string marker = uniqueMarker("e2ehello");
  REQUIRE(runDsrun({"--num_gpus", "3", "--master_port", std::to_string(freePort()),
                    "--comm_backend", "gloo", "hello", "--allreduce"},
                   dir, marker) == 0);
  std::string out = readFile(dir.file("out"));
  for (int r = 0; r < 3; ++r) {
    INFO(out);
    CHECK_THAT(out, Catch::Contains(fmt::format("RANK={} LOCAL_RANK={} WORLD_SIZE=3", r, r)));
    CHECK_THAT(out, Catch::Contains(fmt::format("[rank {}] all 3 ranks joined", r)));
    CHECK_THAT(out, Catch::Contains(fmt::format("[rank {}] allreduce over gloo ok (sum 6)", r)));
  }
  CHECK(waitMarkerGone(marker).empty());
}

TEST_CASE("dsrt hello: a rank that never arrives is named when the rendezvous times out", "[e2e]") {
  TempDir dir;
  // Only rank 0 of 3 runs: it hosts the store and waits DS_TIMEOUT for ranks 1 and 2.
  std::vector<std::string> argv = {std::string(DS_BINARY_DIR) + "/dsrt", "hello"};
  pid_t pid = ::fork();
  if (pid == 0) {
    int err = ::open(dir.file("err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int out = ::open("/dev/null", O_WRONLY);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const char* k : {"LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
      ::unsetenv(k);
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", "3", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(freePort()).c_str(), 1);
    ::setenv("DS_TIMEOUT", "1", 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  auto status = waitChild(pid, std::chrono::seconds(30));
  REQUIRE(status.has_value());
  CHECK(*status != 0);
  std::string err = readFile(dir.file("err"));
  INFO(err);
  CHECK_THAT(err, Catch::Contains("1, 2"));
  CHECK_THAT(err, Catch::Contains("DS_TIMEOUT=1"));
}
