// runOverSsh against a real sshd on loopback (scripts/test_cluster.sh), with plain shell commands
// in place of the node agent: token on stdin, output relay, exit status, teardown by EOF on
// failure and on a signal, host key and connection errors.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "launcher/runners.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/test_cluster.h"

using ds::launcher::JobSpec;
using ds::launcher::runOverSsh;
using ds::test::readFile;
using ds::test::TempDir;
using ds::test::TestCluster;
using ds::test::writeFile;
using Clock = std::chrono::steady_clock;

namespace {

// Redirects fds 1 and 2 into a file for its lifetime (runOverSsh relays remote output there).
class CaptureOutput {
 public:
  explicit CaptureOutput(const std::string& path) {
    fflush(stdout);
    fflush(stderr);
    out_ = dup(1);
    err_ = dup(2);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  ~CaptureOutput() {
    dup2(out_, 1);
    dup2(err_, 2);
    close(out_);
    close(err_);
  }

 private:
  int out_, err_;
};

JobSpec twoHosts(const std::string& h0, const std::string& h1) {
  JobSpec spec;
  spec.hosts = {{h0, {0}}, {h1, {0}}};
  spec.runner = ds::launcher::RunnerKind::kSsh;
  spec.jobToken = "tok-123";
  return spec;
}

struct Run {
  int status = -1;
  std::string output;
  double seconds = 0;
  std::string error;
};

Run run(const JobSpec& spec, const std::vector<std::string>& cmds, const TempDir& tmp) {
  Run r;
  auto t0 = Clock::now();
  {
    CaptureOutput cap(tmp.file("out.txt"));
    try {
      r.status = runOverSsh(spec, cmds);
    } catch (const ds::Error& e) {
      r.error = e.what();
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.output = readFile(tmp.file("out.txt"));
  return r;
}

// Skips the test case (DS_SKIP) when the test cluster cannot run here. In the TEST_CASE body.
#define NEED_CLUSTER()                                        \
  do {                                                        \
    if (auto why = TestCluster::skipReason(); !why.empty()) { \
      DS_SKIP("test cluster: " << why);                       \
    }                                                         \
  } while (0)

// Sets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* k, const std::string& v) : k_(k) { setenv(k, v.c_str(), 1); }
  ~ScopedEnv() { unsetenv(k_); }

 private:
  const char* k_;
};

}  // namespace

TEST_CASE("ssh runner: token on stdin, output relayed, aliases from the ssh config",
          "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  ScopedEnv cfg("DS_SSH_CONFIG", cluster.sshConfig());
  TempDir tmp;
  JobSpec spec = twoHosts(cluster.alias(0), cluster.alias(1));
  std::string cmd = "read t; echo \"on=${SSH_CONNECTION##* } $t\"; echo err-line >&2";
  Run r = run(spec, {cmd, cmd}, tmp);
  INFO(r.output << r.error);
  CHECK(r.error.empty());
  CHECK(r.status == 0);
  CHECK(r.output.find("on=" + std::to_string(cluster.port()) + " DS_JOB_TOKEN=tok-123") !=
        std::string::npos);
  CHECK(r.output.find("err-line") != std::string::npos);
  // Both hosts really ran: SSH_CONNECTION names the server address on each.
  std::string cmd2 = "read t; echo \"server=$(echo $SSH_CONNECTION | cut -d' ' -f3)\"";
  r = run(spec, {cmd2, cmd2}, tmp);
  CHECK(r.status == 0);
  CHECK(r.output.find("server=127.0.0.2") != std::string::npos);
  CHECK(r.output.find("server=127.0.0.3") != std::string::npos);
}

TEST_CASE("ssh runner: first non-zero status stops the other hosts by stdin EOF", "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  ScopedEnv cfg("DS_SSH_CONFIG", cluster.sshConfig());
  TempDir tmp;
  JobSpec spec = twoHosts(cluster.addr(0), cluster.addr(1));
  // Host 0 waits for EOF on stdin (like the agent's watchdog), host 1 fails with 3.
  std::string marker = tmp.file("host0-saw-eof");
  Run r = run(
      spec,
      {"read t; cat >/dev/null; echo eof > " + marker + "; exit 0", "read t; sleep 0.3; exit 3"},
      tmp);
  INFO(r.output << r.error);
  CHECK(r.status == 3);
  // The proof is the marker, not a duration: host 0 ends only on EOF, and saw it before
  // runOverSsh returned.
  CHECK(readFile(marker) == "eof\n");
  CHECK(r.output.find("node 1 on 127.0.0.3") != std::string::npos);
  CHECK(r.output.find("status 3") != std::string::npos);

  // A remote command killed by a signal gives 128+signal.
  r = run(spec, {"read t; cat >/dev/null", "read t; kill -KILL $$"}, tmp);
  CHECK(r.status == 137);
}

TEST_CASE("ssh runner: SIGTERM to dsrun closes every channel and returns 143", "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  ScopedEnv cfg("DS_SSH_CONFIG", cluster.sshConfig());
  TempDir tmp;
  JobSpec spec = twoHosts(cluster.addr(0), cluster.addr(1));
  std::vector<std::string> cmds;
  for (int i = 0; i < 2; ++i)
    cmds.push_back("read t; touch " + tmp.file("started" + std::to_string(i)) +
                   "; cat >/dev/null; touch " + tmp.file("ended" + std::to_string(i)));
  std::thread killer([&] {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline && (access(tmp.file("started0").c_str(), F_OK) != 0 ||
                                       access(tmp.file("started1").c_str(), F_OK) != 0))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kill(getpid(), SIGTERM);
  });
  Run r = run(spec, cmds, tmp);
  killer.join();
  INFO(r.output << r.error);
  CHECK(r.status == 143);
  CHECK(access(tmp.file("ended0").c_str(), F_OK) == 0);
  CHECK(access(tmp.file("ended1").c_str(), F_OK) == 0);
  CHECK(r.output.find("signal 15") != std::string::npos);
}

TEST_CASE("ssh runner: --ssh_port overrides the config's Port", "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  TempDir tmp;
  // A config whose Port is wrong: only spec.sshPort makes the connection work.
  std::string cfgText = readFile(cluster.sshConfig());
  std::string from = "Port " + std::to_string(cluster.port());
  cfgText.replace(cfgText.find(from), from.size(), "Port 1");
  writeFile(tmp.file("ssh_config"), cfgText);
  ScopedEnv cfg("DS_SSH_CONFIG", tmp.file("ssh_config"));
  JobSpec spec = twoHosts(cluster.addr(0), cluster.addr(1));
  Run r = run(spec, {"read t", "read t"}, tmp);
  CHECK(!r.error.empty());
  CHECK(r.error.find("127.0.0.2:1") != std::string::npos);
  spec.sshPort = cluster.port();
  r = run(spec, {"read t", "read t"}, tmp);
  INFO(r.output << r.error);
  CHECK(r.error.empty());
  CHECK(r.status == 0);
}

TEST_CASE("ssh runner: unknown and changed host keys are errors that say how to fix them",
          "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  TempDir tmp;
  std::string cfgText = readFile(cluster.sshConfig());
  std::string kh = cluster.knownHosts();
  cfgText.replace(cfgText.find(kh), kh.size(), tmp.file("known_hosts"));
  writeFile(tmp.file("ssh_config"), cfgText);
  ScopedEnv cfg("DS_SSH_CONFIG", tmp.file("ssh_config"));
  JobSpec spec = twoHosts(cluster.addr(0), cluster.addr(1));
  std::string marker = tmp.file("ran");
  std::vector<std::string> cmds = {"touch " + marker, "touch " + marker};

  writeFile(tmp.file("known_hosts"), "");
  Run r = run(spec, cmds, tmp);
  CHECK(r.error.find("unknown host key for 127.0.0.2:" + std::to_string(cluster.port())) !=
        std::string::npos);
  CHECK(r.error.find("ssh-keyscan -p " + std::to_string(cluster.port()) + " 127.0.0.2") !=
        std::string::npos);
  CHECK(access(marker.c_str(), F_OK) != 0);  // nothing ran anywhere

  // A different key recorded for the hosts: "changed".
  REQUIRE(ds::test::runCommand("ssh-keygen -q -t ed25519 -N '' -f " + tmp.file("other"), nullptr) ==
          0);
  std::string other = readFile(tmp.file("other.pub"));
  other = other.substr(0, other.find(' ', other.find(' ') + 1));
  std::string lines;
  for (int i = 0; i < 2; ++i)
    lines += "[" + cluster.addr(i) + "]:" + std::to_string(cluster.port()) + " " + other + "\n";
  writeFile(tmp.file("known_hosts"), lines);
  r = run(spec, cmds, tmp);
  CHECK(r.error.find("does not match") != std::string::npos);
  CHECK(r.error.find("ssh-keygen -R") != std::string::npos);
  CHECK(access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("ssh runner: a refused connection is a clear error, fast, and nothing starts",
          "[multiproc]") {
  NEED_CLUSTER();
  TestCluster cluster(2);
  ScopedEnv cfg("DS_SSH_CONFIG", cluster.sshConfig());
  TempDir tmp;
  // 127.0.0.9 has no listener on the cluster's port: refused.
  JobSpec spec = twoHosts(cluster.addr(0), "127.0.0.9");
  std::string marker = tmp.file("ran");
  Run r = run(spec, {"touch " + marker, "touch " + marker}, tmp);
  INFO(r.output);
  CHECK(r.error.find("cannot connect to host 127.0.0.9:" + std::to_string(cluster.port())) !=
        std::string::npos);
  CHECK(r.seconds < 10);
  CHECK(access(marker.c_str(), F_OK) != 0);
}
