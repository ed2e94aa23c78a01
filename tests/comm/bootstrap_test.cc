// Tests of the bootstrap: forked processes rendezvous through rank 0's TcpStore on 127.0.0.1
// and connect a real ProcessGroup; a short DS_TIMEOUT makes a missing rank an error naming it;
// a wrong token, a master port in use, a duplicate rank and an unbuilt backend are clear errors.
#include "comm/bootstrap.h"

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/registry.h"
#include "comm/store/tcp_socket.h"
#include "core/error.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::comm;
using namespace std::chrono_literals;

namespace {

// A forked rank: its result (or its error "Kind: message") comes back through a pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

Child forkRank(const std::function<std::string()>& fn) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(p[0]);
    std::string msg;
    try {
      msg = "OK " + fn();
    } catch (const ds::Error& e) {
      msg = std::string(e.kind()) + ": " + e.what();
    } catch (const std::exception& e) {
      msg = std::string("exception: ") + e.what();
    }
    (void)!::write(p[1], msg.data(), msg.size());
    ::close(p[1]);
    ::_exit(0);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// The child's message; "HUNG" (after killing it) if it did not finish in time.
std::string collect(Child c, std::chrono::milliseconds timeout = 60s) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{c.fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      ::kill(c.pid, SIGKILL);
      out = "HUNG";
      break;
    }
    char buf[4096];
    ssize_t k = ::read(c.fd, buf, sizeof buf);
    if (k <= 0) break;
    out.append(buf, static_cast<size_t>(k));
  }
  ::close(c.fd);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return out;
}

ds::EnvMap rankEnv(int rank, int size, int port, const std::string& token = "tok-1",
                   const std::string& timeoutSecs = "2") {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"DS_JOB_ID", "test-job"},
          {"DS_JOB_TOKEN", token},
          {"DS_TIMEOUT", timeoutSecs}};
}

std::string rendezvousOnly(const ds::EnvMap& env) {
  BootstrapOptions o;
  o.env = env;
  auto rv = rendezvous(ds::deriveRankEnv(env), bootstrapTimeout(o));  // expected to throw
  return "rank " + std::to_string(rv.env.rank);
}

}  // namespace

TEST_CASE("bootstrap: forked ranks rendezvous through rank 0's store", "[multiproc]") {
  const int n = 4;
  int port = ds::test::freePort();
  std::vector<Child> kids;
  for (int r = n - 1; r >= 0; --r)  // rank 0 last: the others must retry until it listens
    kids.push_back(forkRank([=] {
      auto env = rankEnv(r, n, port, "tok-1", "20");
      BootstrapOptions o;
      o.env = env;
      auto rv = rendezvous(ds::deriveRankEnv(env), bootstrapTimeout(o));
      if (rv.store->add("test/done", 1) == n) rv.store->setString("test/done-all", "1");
      rv.store->wait({"test/done-all"}, 20s);
      return "rank " + std::to_string(rv.env.rank);
    }));
  std::vector<std::string> got;
  for (auto& k : kids) got.push_back(collect(k));
  for (int i = 0; i < n; ++i) CHECK(got[i] == "OK rank " + std::to_string(n - 1 - i));
}

TEST_CASE("bootstrap: a rendezvous timeout names the ranks that never arrived", "[multiproc]") {
  const int n = 5;
  int port = ds::test::freePort();
  std::vector<Child> kids;
  for (int r : {0, 1, 3})
    kids.push_back(forkRank([=] { return rendezvousOnly(rankEnv(r, n, port)); }));
  for (auto& k : kids) {
    std::string m = collect(k);
    CHECK_THAT(m, Catch::StartsWith("TimeoutError") &&
                      Catch::Contains("rank(s) that never arrived: 2, 4") &&
                      Catch::Contains("DS_TIMEOUT=2 s") &&
                      Catch::Contains("127.0.0.1:" + std::to_string(port)));
  }
}

TEST_CASE("bootstrap: a rank with the wrong token is refused and named missing", "[multiproc]") {
  int port = ds::test::freePort();
  Child r0 = forkRank([=] { return rendezvousOnly(rankEnv(0, 2, port)); });
  Child r1 = forkRank([=] { return rendezvousOnly(rankEnv(1, 2, port, "forged")); });
  std::string m1 = collect(r1), m0 = collect(r0);
  CHECK_THAT(m1, Catch::StartsWith("CommError") && Catch::Contains("token rejected"));
  CHECK_THAT(m0, Catch::Contains("never arrived: 1"));
}

TEST_CASE("bootstrap: rank 0 with its master port in use is a clear error", "[multiproc]") {
  Fd busy = listenTcp("127.0.0.1", 0);
  int port = localPort(busy.get());
  Child r0 = forkRank([=] { return rendezvousOnly(rankEnv(0, 2, port)); });
  std::string m = collect(r0);
  CHECK_THAT(m, Catch::StartsWith("CommError") &&
                    Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                    Catch::Contains("already in use"));
}

TEST_CASE("bootstrap: two processes claiming one rank is an error", "[multiproc]") {
  int port = ds::test::freePort();
  Child a = forkRank([=] { return rendezvousOnly(rankEnv(0, 3, port)); });
  std::this_thread::sleep_for(200ms);  // not needed for correctness: only to order the claims
  Child b = forkRank([=] { return rendezvousOnly(rankEnv(1, 3, port)); });
  Child c = forkRank([=] { return rendezvousOnly(rankEnv(1, 3, port)); });
  std::string mb = collect(b), mc = collect(c), ma = collect(a);
  bool oneRefused = (mb.find("two processes claim RANK=1") != std::string::npos) !=
                    (mc.find("two processes claim RANK=1") != std::string::npos);
  CHECK(oneRefused);
  CHECK_THAT(ma, Catch::Contains("never arrived: 2"));
}

TEST_CASE("bootstrap: backend choice and an unbuilt backend", "[unit]") {
  BootstrapOptions o;
  ds::RankEnv env;
  CHECK(chooseBackend(o, env) == defaultBackendName());
  env.commBackend = "gloo";
  CHECK(chooseBackend(o, env) == "gloo");
  o.backend = "explicit";
  CHECK(chooseBackend(o, env) == "explicit");
  o.env = rankEnv(0, 1, 1, "t", "1.5");
  o.timeout = 0ms;
  CHECK(bootstrapTimeout(o) == 1500ms);
  o.env = rankEnv(0, 1, 1, "t", "soon");
  CHECK_THROWS_WITH(bootstrapTimeout(o), Catch::Contains("DS_TIMEOUT"));
  BootstrapOptions bad;
  bad.backend = "carrier-pigeon";
  bad.env = rankEnv(0, 1, ds::test::freePort());
  try {
    bootstrap(bad);
    FAIL("expected ConfigError");
  } catch (const ds::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("carrier-pigeon") && Catch::Contains("gloo"));
  }
}

TEST_CASE("bootstrap: backend precedence is dsrt flag, dsrun flag, plan, DS_COMM_BACKEND",
          "[unit]") {
  // Each level is checked against every lower one being set: the first non-empty wins.
  CHECK(resolveBackend("a", "b", "c", "d").name == "a");
  CHECK(resolveBackend("a", "b", "c", "d").source == "dsrt --comm_backend");
  CHECK(resolveBackend("", "b", "c", "d").name == "b");
  CHECK_THAT(resolveBackend("", "b", "c", "d").source, Catch::Contains("DS_COMM_BACKEND_FLAG"));
  CHECK(resolveBackend("", "", "c", "d").name == "c");
  CHECK_THAT(resolveBackend("", "", "c", "d").source, Catch::Contains("plan"));
  CHECK(resolveBackend("", "", "", "d").name == "d");
  CHECK(resolveBackend("", "", "", "d").source == "DS_COMM_BACKEND");
  CHECK(resolveBackend("", "", "", "").name == defaultBackendName());
  CHECK(resolveBackend("a", "", "", "").name == "a");
  CHECK(resolveBackend("", "b", "", "d").name == "b");
  CHECK(resolveBackend("a", "", "c", "").name == "a");

  // Through the rank environment: dsrun's flag arrives as DS_COMM_BACKEND_FLAG.
  ds::RankEnv env =
      ds::deriveRankEnv({{"DS_COMM_BACKEND", "mpi"}, {"DS_COMM_BACKEND_FLAG", "gloo"}});
  BootstrapOptions o;
  o.planBackend = "nccl";
  CHECK(chooseBackend(o, env) == "gloo");  // dsrun's flag beats the plan
  env.commBackendFlag.clear();
  CHECK(chooseBackend(o, env) == "nccl");  // the plan beats DS_COMM_BACKEND
  o.planBackend.clear();
  CHECK(chooseBackend(o, env) == "mpi");
  o.backend = "gloo";
  env.commBackendFlag = "mpi";
  CHECK(chooseBackend(o, env) == "gloo");  // dsrt's flag beats dsrun's
}

TEST_CASE("bootstrap: an unbuilt backend names the setting that chose it", "[unit]") {
  BootstrapOptions o;
  o.env = rankEnv(0, 1, ds::test::freePort());
  (*o.env)["DS_COMM_BACKEND_FLAG"] = "carrier-pigeon";
  try {
    bootstrap(o);
    FAIL("expected ConfigError");
  } catch (const ds::ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("'carrier-pigeon' is not built") &&
                             Catch::Contains("built: gloo") &&
                             Catch::Contains("dsrun --comm_backend"));
  }
}

TEST_CASE("bootstrap: forked ranks get a working gloo ProcessGroup", "[multiproc]") {
  const int n = 3;
  int port = ds::test::freePort();
  std::vector<Child> kids;
  for (int r = 0; r < n; ++r)
    kids.push_back(forkRank([=] {
      BootstrapOptions o;
      o.backend = "gloo";
      o.env = rankEnv(r, n, port, "tok-1", "30");
      auto pg = bootstrap(o);
      float x[3] = {float(r + 1), 1.0f, float(r)};
      pg->allreduce(view(x, 3))->wait();
      pg->barrier()->wait();
      return fmt::format("{} {} {} {} {}", pg->rank(), pg->size(), x[0], x[1], x[2]);
    }));
  for (int r = 0; r < n; ++r) CHECK(collect(kids[r]) == fmt::format("OK {} 3 6 3 3", r));
}
