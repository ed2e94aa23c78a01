// The pdsh/srun/mpirun failure-line parsers on the lines these tools really print (copied from
// runs against the test cluster and the one-host Slurm), and on look-alikes that must not match.
#include <catch2/catch.hpp>

#include <signal.h>

#include <string>
#include <vector>

#include "launcher/runner_failures.h"

using namespace ds::launcher;

TEST_CASE("parsePdshFailure: pdsh's 'ssh exited with exit code N' lines", "[unit]") {
  auto f = parsePdshFailure("pdsh@vm: 127.0.0.3: ssh exited with exit code 3");
  REQUIRE(f);
  CHECK(f->host == "127.0.0.3");
  CHECK(f->status == 3);
  CHECK(f->detail == "ssh exited with exit code 3");
  f = parsePdshFailure("pdsh@head.example: node-2.example: ssh exited with exit code 255\r\n");
  REQUIRE(f);
  CHECK(f->host == "node-2.example");
  CHECK(f->status == 255);
  // pdsh prints WEXITSTATUS, 0 for an ssh killed by a signal: the host was lost.
  f = parsePdshFailure("pdsh@vm: h1: ssh exited with exit code 0");
  REQUIRE(f);
  CHECK(f->status == 255);
  for (const char* no :
       {"127.0.0.3: ssh exited with exit code 3",  // a rank's own output
        "pdsh@vm: 127.0.0.3: ssh exited with exit code x", "pdsh@vm: ssh exited with exit code 3",
        "pdsh@vm: 127.0.0.3: ssh: connect to host 127.0.0.3 port 22: refused", ""})
    CHECK_FALSE(parsePdshFailure(no));
}

TEST_CASE("parseSrunFailure: srun's 'task N: Exited with exit code K' and signal lines", "[unit]") {
  auto f = parseSrunFailure("srun: error: vm: task 1: Exited with exit code 3");
  REQUIRE(f);
  CHECK(f->host == "vm");
  CHECK(f->status == 3);
  CHECK(f->detail == "task 1: Exited with exit code 3");
  f = parseSrunFailure("srun: error: node7: tasks 0-3: Exited with exit code 42");
  REQUIRE(f);
  CHECK(f->host == "node7");
  CHECK(f->status == 42);
  f = parseSrunFailure("srun: error: vm: task 1: Killed");
  REQUIRE(f);
  CHECK(f->status == 128 + SIGKILL);
  f = parseSrunFailure("srun: error: vm: task 0: Terminated");
  REQUIRE(f);
  CHECK(f->status == 128 + SIGTERM);
  f = parseSrunFailure("srun: error: vm: task 2: Segmentation fault (core dumped)");
  REQUIRE(f);
  CHECK(f->status == 128 + SIGSEGV);
  for (const char* no :
       {"srun: launch/slurm: _step_signal: Terminating StepId=1.0",
        "srun: error: vm: task 1: Something odd",
        "srun: error: Unable to allocate resources: Invalid node name",
        "srun: Force Terminated StepId=1.0", "[1] srun: error: vm: task 1: Killed"})
    CHECK_FALSE(parseSrunFailure(no));
}

TEST_CASE("describeJobHost names the node and its ranks", "[unit]") {
  JobSpec s;
  s.hosts = {{"a", {0, 1}}, {"b", {0, 1, 2}}, {"c", {3}}};
  CHECK(describeJobHost(s, "a") == "host a (node 0, ranks 0-1)");
  CHECK(describeJobHost(s, "b") == "host b (node 1, ranks 2-4)");
  CHECK(describeJobHost(s, "c") == "host c (node 2, rank 5)");
  CHECK(describeJobHost(s, "zz") == "host zz");
}

namespace {
// Feeds lines to a fresh parser; the failures it reports, in order.
std::vector<RemoteFailure> feedMpirun(const std::vector<std::string>& lines) {
  OpenMpiFailureParser p;
  std::vector<RemoteFailure> out;
  for (const auto& l : lines)
    if (auto f = p(l)) out.push_back(*f);
  return out;
}
}  // namespace

TEST_CASE("OpenMpiFailureParser: mpirun 4.1's exit-code block (rank named, no host)", "[unit]") {
  // Verbatim from `mpirun -n 4 --hostfile ...` with rank 3 exiting 3.
  auto f = feedMpirun(
      {"--------------------------------------------------------------------------",
       "Primary job  terminated normally, but 1 process returned",
       "a non-zero exit code. Per user-direction, the job has been aborted.",
       "--------------------------------------------------------------------------",
       "--------------------------------------------------------------------------",
       "mpirun detected that one or more processes exited with non-zero status, thus causing",
       "the job to be terminated. The first process to do so was:", "",
       "  Process name: [[21372,1],3]", "  Exit code:    3",
       "--------------------------------------------------------------------------"});
  REQUIRE(f.size() == 1);
  CHECK(f[0].rank == 3);
  CHECK(f[0].host.empty());
  CHECK(f[0].status == 3);
  CHECK(f[0].detail == "exited with code 3");
  f = feedMpirun({"  Process name: [[9,1],12345]\r", "  Exit code:    255\r"});
  REQUIRE(f.size() == 1);
  CHECK(f[0].rank == 12345);
  CHECK(f[0].status == 255);
  // An "Exit code:" with no process name before it, or a malformed name: nothing.
  CHECK(feedMpirun({"  Exit code:    3"}).empty());
  CHECK(feedMpirun({"  Process name: [[9,1],x]", "  Exit code:    3"}).empty());
  CHECK(feedMpirun({"  Process name: [[9,1],2]", "  Exit code:    3 more"}).empty());
}

TEST_CASE("OpenMpiFailureParser: 'exited on signal' names rank and node", "[unit]") {
  auto f =
      feedMpirun({"mpirun noticed that process rank 3 with PID 16892 on node 127.0.0.3 "
                  "exited on signal 9 (Killed)."});
  REQUIRE(f.size() == 1);
  CHECK(f[0].rank == 3);
  CHECK(f[0].host == "127.0.0.3");
  CHECK(f[0].status == 128 + SIGKILL);
  CHECK(f[0].detail == "was killed by signal 9 (SIGKILL)");
  // A local run prints PID 0 and the short host name; orterun names itself.
  f =
      feedMpirun({"orterun noticed that process rank 2 with PID 0 on node vm exited on signal 11 "
                  "(Segmentation fault)."});
  REQUIRE(f.size() == 1);
  CHECK(f[0].host == "vm");
  CHECK(f[0].status == 128 + SIGSEGV);
  for (const char* no :
       {"[3] mpirun noticed that process rank 3 with PID 1 on node h exited on signal 9 (Killed).",
        "mpirun noticed that process rank x with PID 1 on node h exited on signal 9 (Killed).",
        "mpirun noticed that process rank 3 with PID 1 on node h exited on signal 99 (odd).",
        "mpirun noticed that process rank 3 with PID 1 on node h exited"})
    CHECK(feedMpirun({no}).empty());
}

TEST_CASE("OpenMpiFailureParser: MPI_ABORT notice", "[unit]") {
  // Verbatim from a 4-rank job whose rank 3 called MPI_Abort(MPI_COMM_WORLD, 5).
  auto f = feedMpirun({"MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD",
                       "with errorcode 5.", "",
                       "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes."});
  REQUIRE(f.size() == 1);
  CHECK(f[0].rank == 3);
  CHECK(f[0].status == 5);
  CHECK(f[0].detail == "called MPI_Abort with error code 5");
  CHECK(feedMpirun({"with errorcode 5."}).empty());
  // MPI_Abort(comm, 0): mpirun itself exits 0, so no failure status is made up.
  CHECK(feedMpirun(
            {"MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD", "with errorcode 0."})
            .empty());
}

TEST_CASE("openMpiDefaultPlacement: --launcher_args that move ranks", "[unit]") {
  CHECK(openMpiDefaultPlacement({}));
  CHECK(openMpiDefaultPlacement({"--mca", "btl", "self,tcp", "--bind-to", "none"}));
  CHECK_FALSE(openMpiDefaultPlacement({"--map-by", "node"}));
  CHECK_FALSE(openMpiDefaultPlacement({"--map-by=ppr:1:node"}));
  CHECK_FALSE(openMpiDefaultPlacement({"-npernode", "1"}));
  CHECK_FALSE(openMpiDefaultPlacement({"--rankfile", "rf"}));
  CHECK_FALSE(openMpiDefaultPlacement({"--mca", "rmaps_base_mapping_policy", "node"}));
}

TEST_CASE("describeJobRank: rank, local rank, host and node from the spec", "[unit]") {
  JobSpec s;
  s.hosts = {{"a", {0, 1}}, {"b", {0, 1, 2}}, {"c", {3}}};
  CHECK(describeJobRank(s, 0, "", true) == "rank 0 (local rank 0) on host a (node 0)");
  CHECK(describeJobRank(s, 3, "", true) == "rank 3 (local rank 1) on host b (node 1)");
  CHECK(describeJobRank(s, 5, "c", true) == "rank 5 (local rank 0) on host c (node 2)");
  // The tool names another host than the spec: its word wins, no local rank is guessed.
  CHECK(describeJobRank(s, 3, "a", true) == "rank 3 on host a");
  CHECK(describeJobRank(s, 3, "", false) == "rank 3");
  CHECK(describeJobRank(s, 3, "b", false) == "rank 3 on host b");
  CHECK(describeJobRank(s, 9, "", true) == "rank 9");
}

// The node agent's report (ssh, pdsh: with pdsh's "host: " prefix and the pty's "\r") and the rank
// wrapper's (mpirun, hydra, srun: no host of the hostfile), as they really print; look-alikes and
// a rank's own output do not match.
TEST_CASE("parseRankReport: the agent's and the rank wrapper's failure lines", "[unit]") {
  auto f = parseRankReport(
      "dsrun: rank 3 (local rank 1) on host 127.0.0.3 exited with code 3; stopping the other 1 "
      "rank(s)");
  REQUIRE(f);
  CHECK(f->rank == 3);
  CHECK(f->host == "127.0.0.3");
  CHECK(f->status == 3);
  CHECK(f->detail == "exited with code 3");
  f = parseRankReport(
      "127.0.0.3: dsrun: rank 2 (local rank 0) on host 127.0.0.3 was killed by signal 9 (SIGKILL); "
      "stopping the other 1 rank(s)\r");
  REQUIRE(f);
  CHECK(f->rank == 2);
  CHECK(f->host == "127.0.0.3");
  CHECK(f->status == 137);
  CHECK(f->detail == "was killed by signal 9 (SIGKILL)");
  f = parseRankReport("dsrun: rank 1 (local rank 1) on host n1 exited with code 42");
  REQUIRE(f);
  CHECK(f->status == 42);

  std::string wrapper = rankWrapperReport(5, 1, 812, "vm", "was killed by signal 11 (SIGSEGV)");
  CHECK(wrapper == "dsrun: rank 5 (local rank 1, pid 812 on vm) was killed by signal 11 (SIGSEGV)");
  f = parseRankReport(wrapper);
  REQUIRE(f);
  CHECK(f->rank == 5);
  CHECK(f->host.empty());
  CHECK(f->status == 128 + SIGSEGV);
  CHECK(f->detail == "was killed by signal 11 (SIGSEGV)");
  // mpirun may join a rank's unterminated last line with the report.
  f = parseRankReport(
      "step 7 loss 2.5dsrun: rank 0 (local rank 0, pid 9 on a.b) exited with code 7");
  REQUIRE(f);
  CHECK(f->rank == 0);
  CHECK(f->status == 7);

  for (const char* no : {
           "[3] dsrun: rank 3 exited",  // a rank's own words
           "dsrun: rank 3 (local rank 1) on host h exited with code 0",
           "dsrun: rank 3 (local rank 1) on host h exited with code x",
           "dsrun: rank 3 (local rank 1) on host h exited with code 300",
           "dsrun: rank 3 (local rank 1) on host h was killed by signal 99 (X)",
           "dsrun: rank 3 (local rank 1) on host 127.0.0.3 (node 1) failed (exited with code 3): "
           "job status 3",  // dsrun's own summary
           "dsrun: rank 3 (local rank 1, pid x on h) exited with code 3",
           "dsrun: rank 3 on host h could not start: cannot execute 'x'",
           "dsrun: stopped 2 rank(s) on host 127.0.0.2 after receiving SIGTERM",
           "",
       })
    CHECK_FALSE(parseRankReport(no));
}
