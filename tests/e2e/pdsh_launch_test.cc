// dsrun --launcher pdsh end to end: real pdsh (-R ssh, node rank from %n) through the private
// sshd of scripts/test_cluster.sh (PDSH_SSH_ARGS_APPEND="-F <cluster>/ssh_config").
#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

TEST_CASE("pdsh launch: 2 hosts x 2 ranks, rank environment", "[e2e]") {
  DS_NEED_CLUSTER();
  caseRanks("pdsh", {"127.0.0.2", "127.0.0.3"}, "", /*rawVars=*/true);
}

// pdsh neither stops the other hosts when one fails nor takes its ssh clients (each in its own
// session) down when it is killed. dsrun watches the remote agents' rank reports (on pdsh's
// stdout: ssh -tt) and pdsh's "ssh exited with exit code N" lines, and signals the ssh clients
// itself (its guard does the same when dsrun is SIGKILLed); a dying client closes the remote pty,
// whose hangup stops the remote agent and its ranks. The report normally comes first (dsrun's
// summary then names the rank); the summary's cause and status are checked either way.
TEST_CASE("pdsh launch: rank 3 exits 3 -> job exits 3 naming rank and host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseFail3("pdsh", "",
            {"127.0.0.3: dsrun: rank 3 (local rank 1) on host 127.0.0.3 exited with code 3; "
             "stopping the other 1 rank(s)"},
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 (node 1) failed (exited with code 3): "
             "job status 3; stopping the job on every host",
             "dsrun: host 127.0.0.3 (node 1, ranks 2-3) failed (ssh exited with exit code 3): job "
             "status 3; stopping the job on every host"});
}

TEST_CASE("pdsh launch: rank 3 killed by SIGKILL -> job exits 137", "[e2e]") {
  DS_NEED_CLUSTER();
  caseKill9("pdsh", "",
            {"127.0.0.3: dsrun: rank 3 (local rank 1) on host 127.0.0.3 was killed by signal 9 "
             "(SIGKILL); stopping the other 1 rank(s)"},
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 (node 1) failed (was killed by signal "
             "9 (SIGKILL)): job status 137; stopping the job on every host",
             "dsrun: host 127.0.0.3 (node 1, ranks 2-3) failed (ssh exited with exit code 137): "
             "job status 137; stopping the job on every host"});
}

TEST_CASE("pdsh launch: SIGTERM to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("pdsh", SIGTERM, "");
}

TEST_CASE("pdsh launch: SIGINT to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("pdsh", SIGINT, "");
}

TEST_CASE("pdsh launch: SIGKILL to dsrun leaves no rank after a few seconds", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("pdsh", SIGKILL, "");
}

TEST_CASE("pdsh launch: an unreachable host fails the job, no hang", "[e2e]") {
  DS_NEED_CLUSTER();
  RemoteJob job;
  std::string out;
  auto t0 = Clock::now();
  int rc = runCommand(job.command("pdsh", "ok", {job.cluster.addr(0), "127.0.0.9"}), &out,
                      std::chrono::seconds(60));
  INFO(out);
  CHECK(rc != 0);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 30);
  CHECK(out.find("127.0.0.9") != std::string::npos);
}
