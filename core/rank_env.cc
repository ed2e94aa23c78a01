// Derivation of RankEnv from launcher variables. Precedence: explicit RANK/WORLD_SIZE (dsrun,
// torchrun), then Open MPI, PMIx, hydra's PMI, and srun. MASTER_* and DS_* always override.
#include "core/rank_env.h"

#include <atomic>
#include <climits>

#include "core/error.h"
#include "core/log.h"

namespace ds {
namespace {

constexpr int64_t kMaxRanks = 1 << 20;

int need(const EnvMap& env, const std::string& name, int64_t lo, int64_t hi, RankSource src) {
  auto v = envInt(env, name, lo, hi);
  if (!v)
    throw ConfigError(fmt::format("{} is not set, but the {} launcher's other variables are",
                                  name, rankSourceName(src)));
  return static_cast<int>(*v);
}

int opt(const EnvMap& env, const std::string& name, int dflt, int64_t lo, int64_t hi) {
  auto v = envInt(env, name, lo, hi);
  return v ? static_cast<int>(*v) : dflt;
}

// "node[01-03],other" -> first host "node01". Only the first entry matters for MASTER_ADDR.
std::string firstSlurmHost(const std::string& list) {
  std::string first;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  auto lb = first.find('[');
  if (lb == std::string::npos) return first;
  std::string prefix = first.substr(0, lb);
  std::string range = first.substr(lb + 1);
  size_t end = range.find_first_of(",-]");
  return prefix + range.substr(0, end);
}

void fillFromDsrun(const EnvMap& env, RankEnv& r) {
  r.source = RankSource::kDsrun;
  r.worldSize = need(env, "WORLD_SIZE", 1, kMaxRanks, r.source);
  r.rank = need(env, "RANK", 0, r.worldSize - 1, r.source);
  r.localSize = opt(env, "LOCAL_WORLD_SIZE", opt(env, "LOCAL_SIZE", 1, 1, kMaxRanks), 1,
                    kMaxRanks);
  r.localRank = opt(env, "LOCAL_RANK", 0, 0, r.localSize - 1);
  r.crossSize = opt(env, "CROSS_SIZE", 1, 1, kMaxRanks);
  r.crossRank = opt(env, "CROSS_RANK", 0, 0, r.crossSize - 1);
}

void fillFromOpenMpi(const EnvMap& env, RankEnv& r) {
  r.source = RankSource::kOpenMpi;
  r.worldSize = need(env, "OMPI_COMM_WORLD_SIZE", 1, kMaxRanks, r.source);
  r.rank = need(env, "OMPI_COMM_WORLD_RANK", 0, r.worldSize - 1, r.source);
  r.localSize = opt(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, kMaxRanks);
  r.localRank = opt(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, r.localSize - 1);
  r.crossSize = opt(env, "OMPI_MCA_orte_num_nodes", 1, 1, kMaxRanks);
  r.jobId = envString(env, "OMPI_MCA_ess_base_jobid").value_or("");
}

void fillFromPmi(const EnvMap& env, RankEnv& r, RankSource src) {
  r.source = src;
  const char* rankVar = src == RankSource::kPmix ? "PMIX_RANK" : "PMI_RANK";
  r.worldSize = need(env, "PMI_SIZE", 1, kMaxRanks, src);
  r.rank = need(env, rankVar, 0, r.worldSize - 1, src);
  r.localSize = opt(env, "MPI_LOCALNRANKS", 1, 1, kMaxRanks);
  r.localRank = opt(env, "MPI_LOCALRANKID", 0, 0, r.localSize - 1);
  r.jobId = envString(env, src == RankSource::kPmix ? "PMIX_NAMESPACE" : "PMI_FD").value_or("");
}

void fillFromSlurm(const EnvMap& env, RankEnv& r) {
  r.source = RankSource::kSlurm;
  r.worldSize = need(env, "SLURM_NTASKS", 1, kMaxRanks, r.source);
  r.rank = need(env, "SLURM_PROCID", 0, r.worldSize - 1, r.source);
  r.crossSize = opt(env, "SLURM_NNODES", opt(env, "SLURM_JOB_NUM_NODES", 1, 1, kMaxRanks), 1,
                    kMaxRanks);
  r.crossRank = opt(env, "SLURM_NODEID", 0, 0, r.crossSize - 1);
  r.localRank = opt(env, "SLURM_LOCALID", 0, 0, kMaxRanks);
  // SLURM_TASKS_PER_NODE may be "2(x3)"; the leading count is this node's in uniform jobs.
  int perNode = r.worldSize / r.crossSize;
  if (auto t = envString(env, "SLURM_NTASKS_PER_NODE"))
    perNode = static_cast<int>(parseInt(*t, "SLURM_NTASKS_PER_NODE", 1, kMaxRanks));
  r.localSize = std::max(perNode, r.localRank + 1);
  r.jobId = envString(env, "SLURM_JOB_ID").value_or("") + "." +
            envString(env, "SLURM_STEP_ID").value_or("0");
  if (!envString(env, "MASTER_ADDR")) {
    if (auto nl = envString(env, "SLURM_JOB_NODELIST"); nl && r.crossSize > 1)
      r.masterAddr = firstSlurmHost(*nl);
  }
}

// Logs weakTokenWarning() the first time a multi-rank job falls back to the derived token.
void warnWeakTokenOnce(const RankEnv& r) {
  static std::atomic<bool> warned{false};
  if (r.tokenIsSecret || r.worldSize <= 1 || warned.exchange(true)) return;
  DS_LOG_WARN("rank_env", "{}", weakTokenWarning(r));
}

}  // namespace

std::string weakTokenWarning(const RankEnv& r) {
  return fmt::format(
      "DS_JOB_TOKEN is not set (ranks started by {}): the rendezvous store at {}:{} accepts the "
      "guessable token 'job:<job id>', so any process that can reach that port can join this "
      "job or read and change its keys. Set DS_JOB_TOKEN to the same random secret on every "
      "rank (e.g. export DS_JOB_TOKEN=$(openssl rand -hex 16) before mpirun/srun, with -x "
      "DS_JOB_TOKEN for mpirun), or launch with dsrun, which sets one",
      rankSourceName(r.source), r.masterAddr, r.masterPort);
}

const char* rankSourceName(RankSource s) {
  switch (s) {
    case RankSource::kDsrun: return "dsrun";
    case RankSource::kOpenMpi: return "Open MPI";
    case RankSource::kPmix: return "PMIx";
    case RankSource::kHydra: return "hydra (PMI)";
    case RankSource::kSlurm: return "srun";
    case RankSource::kSingle: return "single-process";
  }
  return "?";
}

RankEnv deriveRankEnv(const EnvMap& env) {
  RankEnv r;
  if (env.count("RANK") || env.count("WORLD_SIZE")) {
    fillFromDsrun(env, r);
  } else if (env.count("OMPI_COMM_WORLD_RANK")) {
    fillFromOpenMpi(env, r);
  } else if (env.count("PMIX_RANK") && env.count("PMI_SIZE")) {
    fillFromPmi(env, r, RankSource::kPmix);
  } else if (env.count("PMI_RANK")) {
    fillFromPmi(env, r, RankSource::kHydra);
  } else if (env.count("SLURM_PROCID") && env.count("SLURM_NTASKS")) {
    fillFromSlurm(env, r);
  }
  if (r.source != RankSource::kDsrun && r.source != RankSource::kSlurm && r.localSize > 0)
    r.crossRank = r.rank / r.localSize;  // block placement, as mpirun/hydra assign by default
  if (r.source != RankSource::kDsrun && r.source != RankSource::kSlurm)
    r.crossSize = std::max(r.crossSize, (r.worldSize + r.localSize - 1) / r.localSize);

  if (auto a = envString(env, "MASTER_ADDR")) {
    if (a->empty()) throw ConfigError("MASTER_ADDR is set but empty");
    r.masterAddr = *a;
  } else if (r.crossSize > 1 && r.source != RankSource::kSlurm) {
    throw ConfigError(fmt::format(
        "MASTER_ADDR is not set and the job spans {} nodes (started by {}); set MASTER_ADDR "
        "to rank 0's address, or launch with dsrun", r.crossSize, rankSourceName(r.source)));
  }
  r.masterPort = static_cast<int>(
      envInt(env, "MASTER_PORT", 1, 65535).value_or(kDefaultMasterPort));
  if (auto id = envString(env, "DS_JOB_ID")) r.jobId = *id;
  if (auto tok = envString(env, "DS_JOB_TOKEN")) {
    r.jobToken = *tok;
    r.tokenIsSecret = true;
  } else {
    r.jobToken = "job:" + r.jobId;  // not a secret: a launcher that sets no token
  }
  warnWeakTokenOnce(r);
  r.commBackend = envString(env, "DS_COMM_BACKEND").value_or("");
  r.commBackendFlag = envString(env, "DS_COMM_BACKEND_FLAG").value_or("");
  return r;
}

EnvMap rankEnvVars(const RankEnv& r) {
  EnvMap m;
  m["RANK"] = std::to_string(r.rank);
  m["WORLD_SIZE"] = std::to_string(r.worldSize);
  m["LOCAL_RANK"] = std::to_string(r.localRank);
  m["LOCAL_SIZE"] = std::to_string(r.localSize);
  m["LOCAL_WORLD_SIZE"] = std::to_string(r.localSize);
  m["CROSS_RANK"] = std::to_string(r.crossRank);
  m["CROSS_SIZE"] = std::to_string(r.crossSize);
  m["MASTER_ADDR"] = r.masterAddr;
  m["MASTER_PORT"] = std::to_string(r.masterPort);
  if (!r.jobId.empty()) m["DS_JOB_ID"] = r.jobId;
  if (r.tokenIsSecret) m["DS_JOB_TOKEN"] = r.jobToken;
  if (!r.commBackend.empty()) m["DS_COMM_BACKEND"] = r.commBackend;
  if (!r.commBackendFlag.empty()) m["DS_COMM_BACKEND_FLAG"] = r.commBackendFlag;
  return m;
}

}  // namespace ds
