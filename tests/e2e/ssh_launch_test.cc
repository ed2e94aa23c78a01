// dsrun --launcher ssh end to end: the real dsrun, its libssh runner and node agents, against the
// private sshd of scripts/test_cluster.sh on 127.0.0.2 and 127.0.0.3 (2 hosts x 2 ranks).
#include "tests/e2e/launch_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

TEST_CASE("ssh launch: 2 hosts x 2 ranks, rank environment, hosts named by ssh_config alias",
          "[e2e]") {
  DS_NEED_CLUSTER();
  caseRanks("ssh", {"node1", "node2"}, "", /*rawVars=*/true);
}

TEST_CASE("ssh launch: rank 3 exits 3 -> job exits 3 naming rank and host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseFail3("ssh", "",
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 exited with code 3; stopping the "
             "other 1 rank(s)"});
}

TEST_CASE("ssh launch: rank 3 killed by SIGKILL -> job exits 137", "[e2e]") {
  DS_NEED_CLUSTER();
  caseKill9("ssh", "",
            {"dsrun: rank 3 (local rank 1) on host 127.0.0.3 was killed by signal 9 (SIGKILL); "
             "stopping the other 1 rank(s)"});
}

TEST_CASE("ssh launch: SIGTERM to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("ssh", SIGTERM, "");
}

TEST_CASE("ssh launch: SIGINT to dsrun leaves no rank on any host", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("ssh", SIGINT, "");
}

TEST_CASE("ssh launch: SIGKILL to dsrun leaves no rank after a few seconds", "[e2e]") {
  DS_NEED_CLUSTER();
  caseSignal("ssh", SIGKILL, "");
}

TEST_CASE("ssh launch: an unknown host key is a clear error and nothing runs", "[e2e]") {
  DS_NEED_CLUSTER();
  RemoteJob job;
  // The same cluster, seen through a config whose known_hosts is empty.
  std::string cfg = readFile(job.cluster.sshConfig());
  std::string kh = job.cluster.knownHosts();
  cfg.replace(cfg.find(kh), kh.size(), job.tmp.file("empty_known_hosts"));
  writeFile(job.tmp.file("empty_known_hosts"), "");
  writeFile(job.tmp.file("ssh_config"), cfg);
  std::string cmd = job.command("ssh", "ok", job.addrs());
  std::string from = "DS_SSH_CONFIG='" + job.cluster.sshConfig() + "'";
  cmd.replace(cmd.find(from), from.size(), "DS_SSH_CONFIG='" + job.tmp.file("ssh_config") + "'");
  std::string out;
  int rc = runCommand(cmd, &out, std::chrono::seconds(60));
  INFO(out);
  CHECK(rc != 0);
  CHECK(out.find("unknown host key for 127.0.0.2") != std::string::npos);
  CHECK(out.find("ssh-keyscan -p " + std::to_string(job.cluster.port())) != std::string::npos);
  CHECK(readRankEnvs(job.tmp).empty());
}

TEST_CASE("ssh launch: an unreachable host is a clear error, no hang, nothing runs", "[e2e]") {
  DS_NEED_CLUSTER();
  RemoteJob job;
  std::string out;
  auto t0 = Clock::now();
  // 127.0.0.9: nothing listens there (connection refused).
  int rc = runCommand(job.command("ssh", "ok", {job.cluster.addr(0), "127.0.0.9"}), &out,
                      std::chrono::seconds(60));
  INFO(out);
  CHECK(rc != 0);
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 30);
  CHECK(out.find("cannot connect to host 127.0.0.9") != std::string::npos);
  CHECK(readRankEnvs(job.tmp).empty());
}
