// The rank environment contract (DESIGN.md §4.3) and its derivation from whichever launcher
// started this process: dsrun/torchrun (RANK...), Open MPI (OMPI_COMM_WORLD_*), PMIx (PMIX_*),
// hydra (PMI_*) or srun (SLURM_*). Reads an EnvMap, throws ConfigError on a bad value; its one
// side effect is a once-per-process warning when a multi-rank job has no DS_JOB_TOKEN.
#pragma once

#include <string>

#include "core/env.h"

namespace ds {

enum class RankSource { kDsrun, kOpenMpi, kPmix, kHydra, kSlurm, kSingle };
const char* rankSourceName(RankSource s);

struct RankEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;  // index on this node, 0..localSize-1
  int localSize = 1;  // ranks on this node
  int crossRank = 0;  // node index
  int crossSize = 1;  // number of nodes
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  std::string jobId;     // DS_JOB_ID, or the launcher's job id
  std::string jobToken;  // DS_JOB_TOKEN; derived from the job id when tokenIsSecret is false
  bool tokenIsSecret = false;
  std::string commBackend;      // DS_COMM_BACKEND (the user's default), empty when unset
  std::string commBackendFlag;  // DS_COMM_BACKEND_FLAG: dsrun's --comm_backend, empty when unset
  RankSource source = RankSource::kSingle;
};

constexpr int kDefaultMasterPort = 29500;

// Derives the rank environment. With none of the launchers' variables present, a single rank.
// A multi-rank job without DS_JOB_TOKEN logs weakTokenWarning() once per process.
RankEnv deriveRankEnv(const EnvMap& env);

// The warning for a job whose store token is the guessable "job:"+jobId: names the risk and how
// to set DS_JOB_TOKEN.
std::string weakTokenWarning(const RankEnv& r);

// The variables dsrun sets for a rank (RANK, LOCAL_RANK, ..., DS_JOB_TOKEN), as an EnvMap.
EnvMap rankEnvVars(const RankEnv& r);

}  // namespace ds
