// Simulated hosts (issue 18 item 5): `scripts/test_cluster.sh start DIR --netns` makes every
// "host" a network namespace with its own address, sshd, hostname and /dev/shm on a private
// bridge, its link shaped by tc tbf. These cases prove, with the real binaries over real ssh:
//  - dsrun trains across 2 such hosts x 2 ranks: with flat collectives the losses equal the same
//    4 ranks on one host over TCP bit for bit (the shared-memory transport sees two hosts); with
//    hierarchical ones (the default: shared memory within each host, leaders over the link)
//    they agree within 1e-5 relative; the ranks' hostnames are the namespaces' own;
//  - the shaping holds: an allreduce across two hosts on a 100 Mbit/s link cannot move faster
//    than the link (an upper bound that load can only make safer, never a timing to pass);
//  - stop removes every namespace, veth and process of the cluster.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>

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
