// TestCluster: RAII handle on scripts/test_cluster.sh, a private sshd listening on 127.0.0.2,
// 127.0.0.3, ... with its own keys, known_hosts and ssh_config, all under a fresh temp dir.
// Starts in the constructor, stops (and removes the dir) in the destructor. Not thread-safe;
// one per test case. Tests that need it call TestCluster::skipReason() first and DS_SKIP (skip.h).
// With TestClusterOptions::netns every host is a network namespace (own address, sshd, hostname
// and /dev/shm) on a private bridge, its link optionally shaped by tc (`--netns --link RATE`) and
// delayed by the ds_netdelay delay line (`--delay-us US`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "skip.h"
#include "spawn_ranks.h"

namespace ds::test {

struct TestClusterOptions {
  int hosts = 2;
  bool netns = false;  // simulated hosts in network namespaces (needs root, ip, tc, unshare)
  std::string link;    // with netns: the tc rate of every host's link ("1gbit"); empty: unshaped
  int delayUs = 0;     // with netns: one-way delay added host to host (TAPs + ds_netdelay); 0: none
};

class TestCluster {
 public:
  explicit TestCluster(int hosts = 2);
  explicit TestCluster(const TestClusterOptions& options);
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  // Empty when a cluster can run here; otherwise why not (no sshd, not root, ...).
  static std::string skipReason();
  // skipReason(), and whether network namespaces, veths, tbf and unshare work here.
  static std::string netnsSkipReason();
  // netnsSkipReason(), and whether TAP devices (/dev/net/tun) work in a namespace and the
  // ds_netdelay binary is built: what TestClusterOptions::delayUs needs.
  static std::string netdelaySkipReason();

  const std::string& dir() const { return dir_->path(); }
  int port() const { return port_; }
  int hosts() const { return hosts_; }
  // 127.0.0.2 + i (loopback), 10.a.b.(i+1) (netns): the script's DIR/hosts
  std::string addr(int i) const;
  // "node<i+1>": an ssh_config alias for addr(i)
  std::string alias(int i) const;
  // With netns: /run/netns/<name> of host i (ds<tag>h<i>), for setns or `ip netns exec`.
  std::string netnsPath(int i) const;
  std::string sshConfig() const { return dir() + "/ssh_config"; }
  std::string knownHosts() const { return dir() + "/known_hosts"; }
  // DS_SSH_CONFIG, PDSH_RCMD_TYPE, PDSH_SSH_ARGS_APPEND, OMPI_MCA_plm_rsh_agent, ...
  const EnvMap& env() const { return env_; }
  // The same as `K='V' K2='V2' ` for prefixing a shell command line.
  std::string envPrefix() const;

 private:
  std::unique_ptr<TempDir> dir_;
  int hosts_;
  std::vector<std::string> addrs_;
  int port_ = 0;
  EnvMap env_;
};

// TestSlurm: RAII handle on `scripts/test_cluster.sh slurm-start DIR`: a one-host Slurm cluster
// (munged, slurmctld, slurmd on 127.0.0.1; the node is this host's short name).
class TestSlurm {
 public:
  TestSlurm();
  ~TestSlurm();
  TestSlurm(const TestSlurm&) = delete;
  TestSlurm& operator=(const TestSlurm&) = delete;
  // Empty when Slurm can run here; otherwise why not.
  static std::string skipReason();
  // skipReason(), and whether network namespaces, veths, tbf and unshare work here.
  static std::string netnsSkipReason();
  const std::string& node() const { return node_; }
  // SLURM_CONF=... for prefixing a shell command line.
  std::string envPrefix() const { return "SLURM_CONF='" + conf_ + "' "; }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string node_;
  std::string conf_;
};

}  // namespace ds::test
