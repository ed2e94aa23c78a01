// TestCluster (see test_cluster.h).
#include "test_cluster.h"

#include <unistd.h>

#include <sstream>

#include "core/error.h"
#include "ds/config.h"

namespace ds::test {

namespace {

std::string script() { return std::string(DS_SOURCE_DIR) + "/scripts/test_cluster.sh"; }

}  // namespace

std::string TestCluster::skipReason() {
  if (::access("/usr/sbin/sshd", X_OK) != 0) return "no /usr/sbin/sshd (openssh-server)";
  if (::geteuid() != 0) return "not root: the test cluster's sshd needs /run/sshd and root";
  if (::access("/usr/bin/ssh-keygen", X_OK) != 0) return "no ssh-keygen (openssh-client)";
  return "";
}

std::string TestCluster::netnsSkipReason() {
  if (auto why = skipReason(); !why.empty()) return why;
  for (const char* tool : {"/usr/sbin/ip", "/usr/sbin/tc", "/usr/bin/unshare"})
    if (::access(tool, X_OK) != 0) return std::string("no ") + tool;
  // Creating a namespace and a shaped veth is what the cluster does; a container may forbid it.
  const std::string ns = "dsprobe" + std::to_string(::getpid());
  std::string out;
  const int rc = runCommand(
      "ip netns add " + ns + " && ip -n " + ns + " link add dsa type veth peer name dsb && tc -n " +
          ns +
          " qdisc add dev dsa root tbf rate 1gbit burst 131072 latency 100ms && ip netns exec " +
          ns + " unshare --mount --uts true; s=$?; ip netns del " + ns + " 2>/dev/null; exit $s",
      &out, std::chrono::seconds(30));
  if (rc != 0) return "network namespaces with tc tbf do not work here: " + out;
  return "";
}

std::string TestCluster::netdelaySkipReason() {
  if (auto why = netnsSkipReason(); !why.empty()) return why;
  const std::string netdelay = std::string(DS_BINARY_DIR) + "/ds_netdelay";
  if (::access(netdelay.c_str(), X_OK) != 0)
    return "no " + netdelay + " (cmake --build build --target ds_netdelay)";
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) return "no usable /dev/net/tun (TUN/TAP driver)";
  const std::string ns = "dsprobe" + std::to_string(::getpid());
  std::string out;
  const int rc = runCommand(
      "ip netns add " + ns + " && ip -n " + ns + " tuntap add dev dstap mode tap && ip -n " + ns +
          " link set dstap mtu 65000; s=$?; ip netns del " + ns + " 2>/dev/null; exit $s",
      &out, std::chrono::seconds(30));
  if (rc != 0) return "TAP devices in a network namespace do not work here: " + out;
  return "";
}

TestCluster::TestCluster(int hosts) : TestCluster(TestClusterOptions{hosts, false, "", 0}) {}

TestCluster::TestCluster(const TestClusterOptions& options)
    : dir_(std::make_unique<TempDir>()), hosts_(options.hosts) {
  std::string out;
  std::string cmd = script() + " start " + dir() + " --hosts " + std::to_string(hosts_);
  if (options.netns) cmd += " --netns";
  if (!options.link.empty()) cmd += " --link " + options.link;
  if (options.delayUs > 0)
    cmd += " --delay-us " + std::to_string(options.delayUs) + " --netdelay " + DS_BINARY_DIR +
           "/ds_netdelay";
  int rc = runCommand(cmd, &out, std::chrono::seconds(60));
  if (rc != 0) {
    runCommand(script() + " stop " + dir(), nullptr, std::chrono::seconds(30));
    throw Error(fmt::format("test cluster did not start (status {}): {}", rc, out));
  }
  std::istringstream hostsIn(readFile(dir() + "/hosts"));
  for (std::string a; std::getline(hostsIn, a);)
    if (!a.empty()) addrs_.push_back(a);
  std::istringstream in(readFile(dir() + "/env"));
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string v = line.substr(eq + 1);
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    env_[line.substr(0, eq)] = v;
  }
  port_ = std::stoi(env_.at("DS_TEST_CLUSTER_PORT"));
}

TestCluster::~TestCluster() {
  runCommand(script() + " stop " + dir(), nullptr, std::chrono::seconds(30));
}

std::string TestCluster::addr(int i) const { return addrs_.at(static_cast<size_t>(i)); }

std::string TestCluster::alias(int i) const { return "node" + std::to_string(i + 1); }

std::string TestCluster::netnsPath(int i) const {
  const std::string state = readFile(dir() + "/netns");
  const auto at = state.find("tag=");
  if (at == std::string::npos)
    throw Error(dir() + "/netns: no tag= line (is this a --netns cluster?)");
  const std::string tag = state.substr(at + 4, state.find('\n', at) - at - 4);
  return "/run/netns/ds" + tag + "h" + std::to_string(i);
}

std::string TestCluster::envPrefix() const {
  std::string s;
  for (const auto& [k, v] : env_) s += k + "='" + v + "' ";
  return s;
}

std::string TestSlurm::skipReason() {
  for (const char* tool :
       {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun"})
    if (::access(tool, X_OK) != 0)
      return std::string("no ") + tool + " (apt-get install slurmd slurmctld slurm-client munge)";
  if (::access("/etc/munge/munge.key", R_OK) != 0) return "no readable /etc/munge/munge.key";
  if (::geteuid() != 0) return "not root: the one-host Slurm runs its daemons as root";
  return "";
}

TestSlurm::TestSlurm() : dir_(std::make_unique<TempDir>()) {
  std::string out;
  int rc = runCommand(script() + " slurm-start " + dir_->path(), &out, std::chrono::seconds(90));
  if (rc != 0) {
    runCommand(script() + " slurm-stop " + dir_->path(), nullptr, std::chrono::seconds(30));
    throw Error(fmt::format("one-host slurm did not start (status {}): {}", rc, out));
  }
  conf_ = dir_->path() + "/slurm/slurm.conf";
  std::istringstream in(readFile(dir_->path() + "/slurm/env"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("DS_TEST_SLURM_NODE='", 0) == 0) node_ = line.substr(20, line.size() - 21);
}

TestSlurm::~TestSlurm() {
  runCommand(script() + " slurm-stop " + dir_->path(), nullptr, std::chrono::seconds(30));
}

}  // namespace ds::test
