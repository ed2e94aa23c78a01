// Process ranks for the nccl [gpu] tests: each rank is this test binary re-run on a hidden child
// case (a process that has initialised CUDA cannot use it in a forked child, so every rank
// execs), told its rank, world, result folder and store port through DS_NCCL_CHILD_* variables.
//
// On a machine with one GPU the ranks run as simulated hosts: NCCL refuses two ranks of one host
// on one device ("Duplicate GPU detected"), and it takes a rank's host identity from NCCL_HOSTID
// when that is set. Ranks that each name their own host are single-GPU hosts to NCCL, which then
// carries their bytes over its socket transport on loopback; the buffers, the streams, the
// kernels and the communicator are the real ones. With two or more GPUs the ranks use one device
// each (LOCAL_RANK = rank), as on a real node.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/store/tcp_store.h"
#include "tests/comm/conformance_procs.h"
#include "tests/support/spawn_ranks.h"

namespace ds::test::nccl_child {

inline std::string selfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What a child rank is told through DS_NCCL_CHILD_*: its result folder, rank and world.
struct ChildRank {
  std::string dir;
  int rank = 0;
  int world = 1;
};

inline ChildRank childRank() {
  return {env("DS_NCCL_CHILD_DIR"), std::stoi(env("DS_NCCL_CHILD_RANK")),
          std::stoi(env("DS_NCCL_CHILD_SIZE"))};
}

// The children's store (rank 0 hosts it on DS_NCCL_CHILD_PORT) and group options, 60 s timeouts.
inline std::shared_ptr<comm::TcpStore> childStore(const ChildRank& me, const std::string& token) {
  comm::TcpStoreOptions so;
  so.host = "127.0.0.1";
  so.port = std::stoi(env("DS_NCCL_CHILD_PORT"));
  so.isServer = me.rank == 0;
  so.token = token;
  so.timeout = std::chrono::seconds(60);
  return std::make_shared<comm::TcpStore>(so);
}

inline comm::GroupOptions childGroupOptions() {
  comm::GroupOptions go;
  go.timeout = std::chrono::seconds(60);
  return go;
}

// Ranks a multi-rank nccl test runs with `devices` visible: one per device up to 4, else two
// simulated hosts on the one device, else none.
inline int worldFor(int devices) {
  if (devices >= 2) return std::min(devices, 4);
  return devices == 1 ? 2 : 0;
}

// How the ranks of worldFor(devices) are placed, for test messages.
inline std::string placement(int devices) {
  return devices >= 2 ? "one rank per GPU"
                      : "two simulated hosts (NCCL_HOSTID) on one GPU, NCCL's socket transport";
}

// Makes this process a host of its own to NCCL (before NCCL initialises): NCCL_HOSTID names it,
// and NCCL's socket transport on loopback carries what crosses "hosts".
inline void simulateHost(int rank) {
  ::setenv("NCCL_HOSTID", ("ds-test-simhost-" + std::to_string(rank)).c_str(), 1);
  ::setenv("NCCL_NET", "Socket", 1);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
}

struct Spawn {
  std::string childCase;  // the hidden TEST_CASE each rank runs
  std::string dir;        // DS_NCCL_CHILD_DIR: where the ranks write their results
  int world = 2;
  int devices = 0;  // visible devices: fewer than 2 means simulated hosts
  std::chrono::milliseconds timeout{std::chrono::seconds(150)};
  std::vector<std::pair<std::string, std::string>> extraEnv;
};

// Forks and execs the ranks (conformance::forkRanks: a deadline, then SIGKILL); whileRunning
// sees their pids.
inline std::vector<conformance::ProcResult> spawnRanks(
    const Spawn& s, const std::function<void(const std::vector<pid_t>&)>& whileRunning = {}) {
  const int port = freePort();
  const std::string exe = selfExe();
  return conformance::forkRanks(
      s.world,
      [&](int r) -> std::string {
        ::setenv("DS_NCCL_CHILD_DIR", s.dir.c_str(), 1);
        ::setenv("DS_NCCL_CHILD_RANK", std::to_string(r).c_str(), 1);
        ::setenv("DS_NCCL_CHILD_SIZE", std::to_string(s.world).c_str(), 1);
        ::setenv("DS_NCCL_CHILD_PORT", std::to_string(port).c_str(), 1);
        ::setenv("LOCAL_RANK", std::to_string(s.devices >= 2 ? r : 0).c_str(), 1);
        if (s.devices < 2) simulateHost(r);
        for (const auto& [k, v] : s.extraEnv) ::setenv(k.c_str(), v.c_str(), 1);
        ::execl(exe.c_str(), exe.c_str(), s.childCase.c_str(), static_cast<char*>(nullptr));
        return "exec failed";
      },
      s.timeout, whileRunning);
}

}  // namespace ds::test::nccl_child
