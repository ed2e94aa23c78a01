// Bootstrap: from the rank environment (whichever launcher started this process: dsrun, mpirun,
// srun...) to a connected ProcessGroup. Rank 0 hosts the TcpStore at MASTER_ADDR:MASTER_PORT;
// every rank presents DS_JOB_TOKEN, announces itself under "bootstrap/rank/<r>" and waits for
// the others, then the backend connects through the store. Not the backend registry
// (comm/registry.h). A rendezvous timeout (DS_TIMEOUT) names the ranks that never arrived.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/store/store.h"
#include "core/env.h"
#include "core/rank_env.h"

namespace ds::comm {

struct BootstrapOptions {
  std::string backend;                   // dsrt's --comm_backend (outranks everything)
  std::string planBackend;               // the plan's comm_backend (below dsrun's flag)
  std::chrono::milliseconds timeout{0};  // rendezvous; 0 = DS_TIMEOUT from the environment
  std::optional<EnvMap> env;             // the environment to read (default: this process's)
  std::string hostAddr;                  // GroupOptions::hostAddr for the backend
};

// The outcome of the store rendezvous: every rank arrived.
struct Rendezvous {
  RankEnv env;
  std::shared_ptr<Store> store;       // the job's TcpStore (rank 0 hosts its server)
  std::chrono::milliseconds timeout;  // the rendezvous timeout in force
};

// Connects to (rank 0: hosts) the store and waits until all ranks arrived. Throws TimeoutError
// naming the missing ranks, CommError for a refused token or a master port in use, ConfigError
// when two processes claim one rank or ranks disagree on WORLD_SIZE.
Rendezvous rendezvous(const RankEnv& env, std::chrono::milliseconds timeout);

// A backend choice and where it came from ("dsrt --comm_backend", ...), for messages.
struct BackendChoice {
  std::string name;
  std::string source;
};

// The backend precedence, first non-empty wins: dsrt's --comm_backend, dsrun's --comm_backend
// (DS_COMM_BACKEND_FLAG), the plan's comm_backend, DS_COMM_BACKEND, defaultBackendName().
// An explicit command-line choice beats the plan; the plan beats a plain environment default.
BackendChoice resolveBackend(const std::string& dsrtFlag, const std::string& dsrunFlag,
                             const std::string& plan, const std::string& envVar);

// resolveBackend(options.backend, env.commBackendFlag, options.planBackend, env.commBackend).
BackendChoice chooseBackendWithSource(const BootstrapOptions& options, const RankEnv& env);
std::string chooseBackend(const BootstrapOptions& options, const RankEnv& env);

// The rendezvous timeout: options.timeout, else DS_TIMEOUT from options.env (or the process
// environment), else 300 s.
std::chrono::milliseconds bootstrapTimeout(const BootstrapOptions& options);

// The world ProcessGroup over a finished rendezvous: createBackend over PrefixStore("pg/world").
std::unique_ptr<ProcessGroup> connectGroup(const Rendezvous& rv, const std::string& backend,
                                           const std::string& hostAddr = "");

// rendezvous() then connectGroup(). An unbuilt backend is a ConfigError before any waiting.
std::unique_ptr<ProcessGroup> bootstrap(const BootstrapOptions& options = {});

// ConfigError listing the built backends unless `name` is one of them.
void requireBuiltBackend(const std::string& name);

// "2, 5, 7" for the ranks in [0, worldSize) whose "bootstrap/rank/<r>" key is absent (at most
// `limit` listed, then "and N more").
std::string missingRanks(Store& store, int worldSize, size_t limit = 32);

}  // namespace ds::comm
