// JobSpec: everything dsrun decided about a job before anything is started. The front end
// (cli, hostfile, resources) builds it; runners and the node agent consume it. Plain data.
// Invariant: hosts are in node-rank order; ranks are assigned host by host, slot by slot.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"

namespace ds::launcher {

enum class RunnerKind { kLocal, kSsh, kPdsh, kOpenMpi, kMpich, kSlurm };

struct HostSlots {
  std::string host;        // as written in the hostfile (may be an ~/.ssh/config alias)
  std::vector<int> slots;  // selected slot indices on this host (become CUDA_VISIBLE_DEVICES)
};

struct JobSpec {
  std::vector<HostSlots> hosts;  // node rank = index
  RunnerKind runner = RunnerKind::kLocal;
  std::string masterAddr;
  int masterPort = 29500;
  std::string jobId;                 // DS_JOB_ID
  std::string jobToken;              // DS_JOB_TOKEN: never put on any command line
  std::vector<std::string> program;  // argv[0] resolved (train -> dsrt train), args untouched
  EnvMap exports;                    // extra env for every rank (--export, .dsenv, NCCL_* ...)
  std::string commBackend;           // DS_COMM_BACKEND_FLAG, empty = rank decides
  bool noLocalRank = false;          // do not pass --local_rank=N
  int localRankAt = -1;              // index of --local_rank=N in program, -1 = at the end
  std::string eachRankLogDir;        // --enable_each_rank_log
  bool bindCoresToRank = false;
  std::string bindCoreList;  // "0,1,2-5"
  std::string savePidFile;   // --save_pid
  int sshPort = 0;           // 0 = default/ssh config
  std::string launcherArgs;  // --launcher_args, split shell-style by the runner
  bool gpuHost = false;      // set CUDA_VISIBLE_DEVICES
  std::string cwd;           // working directory of every rank (dsrun's cwd)
  std::string hostfile;      // the hostfile used, empty for a local run (for messages)

  int worldSize() const {
    int n = 0;
    for (const auto& h : hosts) n += static_cast<int>(h.slots.size());
    return n;
  }
  // First global rank on node `node`.
  int firstRank(int node) const {
    int n = 0;
    for (int i = 0; i < node; ++i) n += static_cast<int>(hosts[i].slots.size());
    return n;
  }
};

}  // namespace ds::launcher
