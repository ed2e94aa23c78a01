// Simulated hosts (issue 18 item 5): `scripts/test_cluster.sh start DIR --netns` makes every
// "host" a network namespace with its own address, sshd, hostname and /dev/shm on a private
// bridge, its link shaped by tc tbf. These cases prove, with the real binaries over real ssh:
//  - dsrun trains across 2 such hosts x 2 ranks: with flat collectives the losses equal the same
//    4 ranks on one host over TCP bit for bit (the shared-memory transport sees two hosts); with
//    hierarchical ones (the default: shared memory within each host, leaders over the link)
//    they agree within 1e-5 relative; the ranks' hostnames are the namespaces' own;
//  - the shaping holds: an allreduce across two hosts on a 100 Mbit/s link cannot move faster
//    than the link (an upper bound that load can only make safer, never a timing to pass);
//  - stop removes every namespace, veth and process of the cluster;
//  - with --delay-us (TAP pairs joined by ds_netdelay) a round trip between two hosts takes at
//    least twice the delay (a lower bound the delay line guarantees, whatever the load), and a
//    2 x 2 job still trains over it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/restart_e2e.h"

using namespace ds::test;
using namespace ds::test::e2e;

namespace {

#define DS_NEED_NETNS()                                            \
  do {                                                             \
    if (auto why = TestCluster::netnsSkipReason(); !why.empty()) { \
      DS_SKIP("simulated hosts (network namespaces): " << why);    \
    }                                                              \
  } while (0)

std::string hostfile(const TempDir& dir, const TestCluster& cluster, int slots) {
  std::string text;
  for (int i = 0; i < cluster.hosts(); ++i)
    text += cluster.addr(i) + " slots=" + std::to_string(slots) + "\n";
  writeFile(dir.file("hostfile"), text);
  return dir.file("hostfile");
}

std::string sshLaunch(const TempDir& dir, const TestCluster& cluster, int slots) {
  return "--hostfile " + hostfile(dir, cluster, slots) + " --launcher ssh --master_addr " +
         cluster.addr(0) + " --master_port " + std::to_string(freePort());
}

// busbw (GB/s) of rank 0's "allreduce <bytes> ..." row of dsrt comm-bench; -1 if absent.
double allreduceBusbw(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (f.size() == 9 && f[0] == "[0]" && f[1] == "allreduce") return std::stod(f[7]);
  }
  return -1;
}

// Moves the calling thread into the network namespace at path; false on failure.
bool enterNetns(const std::string& path) {
  const int nsFd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsFd < 0) return false;
  const bool entered = ::setns(nsFd, CLONE_NEWNET) == 0;
  ::close(nsFd);
  return entered;
}

// The smallest of `probes` UDP round trips (microseconds) from host `from` to host `to`: an echo
// thread inside `to`'s namespace, a probing thread inside `from`'s; -1 when a side failed. Every
// wait is bounded (5 s per probe, 60 s in all).
double minRoundTripUs(const TestCluster& cluster, int from, int to, int probes) {
  std::promise<int> portPromise;
  auto portFuture = portPromise.get_future();
  const std::string toAddr = cluster.addr(to);
  std::thread echo([&, toPath = cluster.netnsPath(to)] {
    int sock = -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, toAddr.c_str(), &addr.sin_addr);
    socklen_t len = sizeof addr;
    if (!enterNetns(toPath) || (sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
        ::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      portPromise.set_value(-1);
      if (sock >= 0) ::close(sock);
      return;
    }
    portPromise.set_value(ntohs(addr.sin_port));
    char buf[64];
    for (;;) {
      pollfd waiter{sock, POLLIN, 0};
      if (::poll(&waiter, 1, 60000) != 1) break;
      sockaddr_in peer{};
      socklen_t peerLen = sizeof peer;
      const ssize_t got =
          ::recvfrom(sock, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&peer), &peerLen);
      if (got == 3 && std::string(buf, 3) == "end") break;
      if (got > 0)
        ::sendto(sock, buf, static_cast<size_t>(got), 0, reinterpret_cast<sockaddr*>(&peer),
                 peerLen);
    }
    ::close(sock);
  });
  const int port = portFuture.get();
  double best = -1;
  std::thread prober([&, fromPath = cluster.netnsPath(from)] {
    int sock = -1;
    if (port < 0 || !enterNetns(fromPath) ||
        (sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
      return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, toAddr.c_str(), &addr.sin_addr);
    if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      for (int seq = 0; seq < probes; ++seq) {
        const std::string msg = "probe " + std::to_string(seq);
        const auto sent = std::chrono::steady_clock::now();
        if (::send(sock, msg.data(), msg.size(), 0) < 0) break;
        char buf[64];
        pollfd waiter{sock, POLLIN, 0};
        ssize_t got = 0;
        while (::poll(&waiter, 1, 5000) == 1 && (got = ::recv(sock, buf, sizeof buf, 0)) > 0 &&
               std::string(buf, static_cast<size_t>(got)) != msg) {
        }
        if (std::string(buf, static_cast<size_t>(std::max<ssize_t>(got, 0))) != msg) continue;
        const double micros =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent)
                .count();
        best = best < 0 ? micros : std::min(best, micros);
      }
      ::send(sock, "end", 3, 0);
    }
    ::close(sock);
  });
  prober.join();
  echo.join();
  return best;
}

std::vector<std::string> namespacesNamed(const std::string& prefix) {
  std::string out;
  runCommand("ip netns list", &out, std::chrono::seconds(30));
  std::vector<std::string> found;
  std::istringstream in(out);
  for (std::string name; in >> name;) {
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
    std::string rest;
    std::getline(in, rest);  // " (id: N)"
  }
  return found;
}

}  // namespace

TEST_CASE("netns cluster: 2 simulated hosts x 2 ranks train; losses equal one host over TCP",
          "[e2e][optional]") {
  DS_NEED_NETNS();
  const ZeroConfig z{2, "none"};
  Trajectory local;
  {
    TempDir dir;
    TimedRun run =
        runTimed(trainCommand(dir, z, "--num_gpus 4 --master_port " + std::to_string(freePort()),
                              "DS_COMM_SHM=0"),
                 std::chrono::seconds(400));
    INFO(run.output());
    REQUIRE(run.status == 0);
    local = readTrajectory(dir.file("ckpt/run_summary.json"));
    REQUIRE(local.losses.size() == static_cast<size_t>(kSteps));
  }
  TestCluster cluster(TestClusterOptions{2, true, "1gbit"});
  {
    // Flat: the same gloo ring as on one host, so the same bits.
    TempDir dir;
    TimedRun run =
        runTimed(trainCommand(dir, z, sshLaunch(dir, cluster, 2),
                              cluster.envPrefix() + "DS_LOG_LEVEL=debug DS_COMM_HIERARCHICAL=0"),
                 std::chrono::seconds(400));
    INFO(run.output());
    REQUIRE(run.status == 0);
    // Two hosts for the shared-memory transport: the world group spans them.
    CHECK(run.find("spans hosts (2 hosts: [0,1] [2,3])") != nullptr);
    const Trajectory remote = readTrajectory(dir.file("ckpt/run_summary.json"));
    REQUIRE(remote.losses.size() == local.losses.size());
    for (size_t i = 0; i < local.losses.size(); ++i) {
      INFO("step " << i);
      CHECK(remote.losses[i] == local.losses[i]);
    }
  }
  {
    // Hierarchical (the default): shared memory within a host, the leaders over the link; sums
    // in another order, so the losses agree to rounding.
    TempDir dir;
    TimedRun run = runTimed(trainCommand(dir, z, sshLaunch(dir, cluster, 2), cluster.envPrefix()),
                            std::chrono::seconds(400));
    INFO(run.output());
    REQUIRE(run.status == 0);
    CHECK(run.find("hierarchical collectives: 2 hosts: [0,1] [2,3] (within a host: shared "
                   "memory; among leaders: gloo)") != nullptr);
    const Trajectory remote = readTrajectory(dir.file("ckpt/run_summary.json"));
    REQUIRE(remote.losses.size() == local.losses.size());
    for (size_t i = 0; i < local.losses.size(); ++i) {
      INFO("step " << i << ": " << remote.losses[i] << " vs " << local.losses[i]);
      CHECK(std::abs(remote.losses[i] - local.losses[i]) <= 1e-5 * std::abs(local.losses[i]));
    }
  }
  // Every rank ran in its host's namespace: its own hostname.
  std::string names;
  runCommand("ssh -F " + cluster.sshConfig() + " node1 hostname; ssh -F " + cluster.sshConfig() +
                 " node2 hostname",
             &names, std::chrono::seconds(30));
  CHECK(names == "dsh1\ndsh2\n");
}

TEST_CASE("netns cluster: a 100 Mbit/s link bounds an allreduce across hosts; stop cleans up",
          "[e2e][optional]") {
  DS_NEED_NETNS();
  std::string tag;
  std::string out;
  {
    TestCluster cluster(TestClusterOptions{2, true, "100mbit"});
    const std::string state = readFile(cluster.dir() + "/netns");
    CHECK_THAT(state, Catch::Contains("link=100mbit"));
    tag = state.substr(state.find("tag=") + 4);
    tag = "ds" + tag.substr(0, tag.find('\n')) + "h";
    CHECK(namespacesNamed(tag).size() == 2);
    TempDir dir;
    const int rc = runCommand(cluster.envPrefix() + dsrunPath() + " " + sshLaunch(dir, cluster, 1) +
                                  " --comm_backend gloo " + DS_BINARY_DIR +
                                  "/dsrt comm-bench --sizes 2M --ops allreduce --warmup 1 "
                                  "--target_seconds 0.5",
                              &out, std::chrono::seconds(300));
    INFO(out);
    REQUIRE(rc == 0);
  }
  INFO(out);
  const double busbw = allreduceBusbw(out);
  REQUIRE(busbw > 0);
  // 100 Mbit/s = 0.0125 GB/s each way; a 2-rank allreduce's busbw is what each link carries.
  // Unshaped, veths on this machine move well over 0.5 GB/s.
  CHECK(busbw < 2 * 0.0125);
  CHECK(namespacesNamed(tag).empty());
  std::string links;
  runCommand("ip -o link show", &links, std::chrono::seconds(30));
  CHECK_THAT(links, !Catch::Contains(tag.substr(0, tag.size() - 1) + "v"));
}

// ZeRO++ over a shaped link (issue 18 item 3 in CI form): ZeRO-3 on 2 simulated hosts x 2 ranks
// with quantized weights and gradients and the hpZ secondary partition per host trains the
// built-in plan and stays within 1% of exact ZeRO-3 on the same hosts at every step (measured
// when written: 1e-4).
TEST_CASE("netns cluster: ZeRO-3 with qwZ, qgZ and hpZ across 2 hosts tracks exact ZeRO-3",
          "[e2e][optional]") {
  DS_NEED_NETNS();
  TestCluster cluster(TestClusterOptions{2, true, "1gbit"});
  const ZeroConfig z{3, "none"};
  auto train = [&](const std::string& extra) {
    TempDir dir;
    TimedRun run =
        runTimed(trainCommand(dir, z, sshLaunch(dir, cluster, 2), cluster.envPrefix()) + extra,
                 std::chrono::seconds(400));
    INFO(run.output());
    REQUIRE(run.status == 0);
    return readTrajectory(dir.file("ckpt/run_summary.json"));
  };
  const Trajectory exact = train("");
  const Trajectory zeropp = train(
      " --set deepspeed.zero_optimization.zero_quantized_weights=true"
      " --set deepspeed.zero_optimization.zero_quantized_gradients=true"
      " --set deepspeed.zero_optimization.zero_hpz_partition_size=2");
  REQUIRE(exact.losses.size() == static_cast<size_t>(kSteps));
  REQUIRE(zeropp.losses.size() == exact.losses.size());
  CHECK(zeropp.losses.back() < zeropp.losses.front());
  CHECK(zeropp.losses != exact.losses);  // the options took effect
  for (size_t i = 0; i < exact.losses.size(); ++i) {
    INFO("step " << i << ": " << zeropp.losses[i] << " vs " << exact.losses[i]);
    CHECK(std::abs(zeropp.losses[i] - exact.losses[i]) <= 1e-2 * std::abs(exact.losses[i]));
  }
}

// Added latency (issue 18 item 5): 2 hosts whose links hold every frame 0.5 ms each way (1 ms one
// way host to host, through two delay lines). Nothing on this machine can make a round trip
// shorter than the delay it must wait, so the bound holds under any load; and the ssh launch and
// a 2 x 2 training job work through the TAP devices as they do through veths.
TEST_CASE("netns cluster: 1 ms of added one-way delay: round trips >= 2 ms; 2x2 still trains",
          "[e2e][optional]") {
  if (auto why = TestCluster::netdelaySkipReason(); !why.empty())
    DS_SKIP("simulated hosts with added latency (TAP devices, ds_netdelay): " << why);
  TestCluster cluster(TestClusterOptions{2, true, "1gbit", 1000});
  CHECK_THAT(readFile(cluster.dir() + "/netns"), Catch::Contains("delay_us=1000"));
  const double rttUs = minRoundTripUs(cluster, 0, 1, 20);
  INFO("smallest of 20 UDP round trips host 1 -> host 2: " << rttUs << " us");
  REQUIRE(rttUs > 0);
  CHECK(rttUs >= 2000);
  TempDir dir;
  TimedRun run = runTimed(
      trainCommand(dir, ZeroConfig{2, "none"}, sshLaunch(dir, cluster, 2), cluster.envPrefix()),
      std::chrono::seconds(400));
  INFO(run.output());
  REQUIRE(run.status == 0);
  CHECK(run.find("hierarchical collectives: 2 hosts: [0,1] [2,3]") != nullptr);
  const Trajectory trained = readTrajectory(dir.file("ckpt/run_summary.json"));
  REQUIRE(trained.losses.size() == static_cast<size_t>(kSteps));
  for (const double loss : trained.losses) CHECK(std::isfinite(loss));
  CHECK(trained.losses.back() < trained.losses.front());
}
