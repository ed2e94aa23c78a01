// The pdsh/srun failure-line parsers on the lines these tools really print (copied from runs
// against the test cluster and the one-host Slurm), and on look-alikes that must not match.
#include <catch2/catch.hpp>

#include <signal.h>

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
  for (const char* no : {"127.0.0.3: ssh exited with exit code 3",  // a rank's own output
                         "pdsh@vm: 127.0.0.3: ssh exited with exit code x",
                         "pdsh@vm: ssh exited with exit code 3",
                         "pdsh@vm: 127.0.0.3: ssh: connect to host 127.0.0.3 port 22: refused",
                         ""})
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
  for (const char* no : {"srun: launch/slurm: _step_signal: Terminating StepId=1.0",
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
