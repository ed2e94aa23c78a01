// Derivation of RankEnv from launcher variables. Precedence: explicit RANK/WORLD_SIZE (dsrun,
// torchrun), then Open MPI, PMIx, hydra's PMI, and srun. MASTER_* and DS_* always override.
#include "core/rank_env.h"

#include <atomic>
#include <climits>

#include "core/core_knobs.h"
#include "core/error.h"
#include "core/log.h"

namespace ds {
namespace {

using knobs::kMaxRanks;
namespace k = knobs;

int need(const EnvMap& env, const Knob& knob, int64_t lo, int64_t hi, RankSource src) {
  auto v = knobIntIn(knob, lo, hi, env);
  if (!v)
    throw ConfigError(fmt::format("{} is not set, but the {} launcher's other variables are",
                                  knob.name, rankSourceName(src)));
  return static_cast<int>(*v);
}

int opt(const EnvMap& env, const Knob& knob, int dflt, int64_t lo, int64_t hi) {
  auto v = knobIntIn(knob, lo, hi, env);
  return v ? static_cast<int>(*v) : dflt;
}

std::string text(const EnvMap& env, const Knob& knob, const std::string& dflt = "") {
  return knobString(knob, env).value_or(dflt);
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
  r.worldSize = need(env, k::kWorldSize, 1, kMaxRanks, r.source);
  r.rank = need(env, k::kRank, 0, r.worldSize - 1, r.source);
  r.localSize =
      opt(env, k::kLocalWorldSize, opt(env, k::kLocalSize, 1, 1, kMaxRanks), 1, kMaxRanks);
  r.localRank = opt(env, k::kLocalRank, 0, 0, r.localSize - 1);
  r.crossSize = opt(env, k::kCrossSize, 1, 1, kMaxRanks);
  r.crossRank = opt(env, k::kCrossRank, 0, 0, r.crossSize - 1);
}

void fillFromOpenMpi(const EnvMap& env, RankEnv& r) {
  r.source = RankSource::kOpenMpi;
  r.worldSize = need(env, k::kOmpiWorldSize, 1, kMaxRanks, r.source);
  r.rank = need(env, k::kOmpiWorldRank, 0, r.worldSize - 1, r.source);
  r.localSize = opt(env, k::kOmpiLocalSize, 1, 1, kMaxRanks);
  r.localRank = opt(env, k::kOmpiLocalRank, 0, 0, r.localSize - 1);
  r.crossSize = opt(env, k::kOmpiNumNodes, 1, 1, kMaxRanks);
  r.jobId = text(env, k::kOmpiJobId);
}

void fillFromPmi(const EnvMap& env, RankEnv& r, RankSource src) {
  r.source = src;
  const Knob& rankVar = src == RankSource::kPmix ? k::kPmixRank : k::kPmiRank;
  r.worldSize = need(env, k::kPmiSize, 1, kMaxRanks, src);
  r.rank = need(env, rankVar, 0, r.worldSize - 1, src);
  r.localSize = opt(env, k::kMpiLocalNRanks, 1, 1, kMaxRanks);
  r.localRank = opt(env, k::kMpiLocalRankId, 0, 0, r.localSize - 1);
  r.jobId = text(env, src == RankSource::kPmix ? k::kPmixNamespace : k::kPmiFd);
}

void fillFromSlurm(const EnvMap& env, RankEnv& r) {
  r.source = RankSource::kSlurm;
  r.worldSize = need(env, k::kSlurmNTasks, 1, kMaxRanks, r.source);
  r.rank = need(env, k::kSlurmProcId, 0, r.worldSize - 1, r.source);
  r.crossSize =
      opt(env, k::kSlurmNNodes, opt(env, k::kSlurmJobNumNodes, 1, 1, kMaxRanks), 1, kMaxRanks);
  r.crossRank = opt(env, k::kSlurmNodeId, 0, 0, r.crossSize - 1);
  r.localRank = opt(env, k::kSlurmLocalId, 0, 0, kMaxRanks);
  // SLURM_TASKS_PER_NODE may be "2(x3)"; the leading count is this node's in uniform jobs.
  int perNode = r.worldSize / r.crossSize;
  if (auto t = knobInt(k::kSlurmNTasksPerNode, env)) perNode = static_cast<int>(*t);
  r.localSize = std::max(perNode, r.localRank + 1);
  r.jobId = text(env, k::kSlurmJobId) + "." + text(env, k::kSlurmStepId, "0");
  if (!knobIsSet(k::kMasterAddr, env)) {
    if (auto nl = knobString(k::kSlurmJobNodeList, env); nl && r.crossSize > 1)
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
  auto set = [&env](const Knob& knob) { return knobIsSet(knob, env); };
  if (set(k::kRank) || set(k::kWorldSize)) {
    fillFromDsrun(env, r);
  } else if (set(k::kOmpiWorldRank)) {
    fillFromOpenMpi(env, r);
  } else if (set(k::kPmixRank) && set(k::kPmiSize)) {
    fillFromPmi(env, r, RankSource::kPmix);
  } else if (set(k::kPmiRank)) {
    fillFromPmi(env, r, RankSource::kHydra);
  } else if (set(k::kSlurmProcId) && set(k::kSlurmNTasks)) {
    fillFromSlurm(env, r);
  }
  if (r.source != RankSource::kDsrun && r.source != RankSource::kSlurm && r.localSize > 0)
    r.crossRank = r.rank / r.localSize;  // block placement, as mpirun/hydra assign by default
  if (r.source != RankSource::kDsrun && r.source != RankSource::kSlurm)
    r.crossSize = std::max(r.crossSize, (r.worldSize + r.localSize - 1) / r.localSize);

  if (auto a = knobString(k::kMasterAddr, env)) {
    if (a->empty()) throw ConfigError("MASTER_ADDR is set but empty");
    r.masterAddr = *a;
  } else if (r.crossSize > 1 && r.source != RankSource::kSlurm) {
    throw ConfigError(fmt::format(
        "MASTER_ADDR is not set and the job spans {} nodes (started by {}); set MASTER_ADDR "
        "to rank 0's address, or launch with dsrun",
        r.crossSize, rankSourceName(r.source)));
  }
  r.masterPort = static_cast<int>(knobInt(k::kMasterPort, env).value_or(kDefaultMasterPort));
  if (auto id = knobString(k::kJobId, env)) r.jobId = *id;
  if (auto tok = knobString(k::kJobToken, env)) {
    r.jobToken = *tok;
    r.tokenIsSecret = true;
  } else {
    r.jobToken = "job:" + r.jobId;  // not a secret: a launcher that sets no token
  }
  warnWeakTokenOnce(r);
  r.commBackend = text(env, k::kCommBackend);
  r.commBackendFlag = text(env, k::kCommBackendFlag);
  return r;
}

EnvMap rankEnvVars(const RankEnv& r) {
  EnvMap m;
  auto put = [&m](const Knob& knob, std::string value) {
    m[std::string(knob.name)] = std::move(value);
  };
  put(k::kRank, std::to_string(r.rank));
  put(k::kWorldSize, std::to_string(r.worldSize));
  put(k::kLocalRank, std::to_string(r.localRank));
  put(k::kLocalSize, std::to_string(r.localSize));
  put(k::kLocalWorldSize, std::to_string(r.localSize));
  put(k::kCrossRank, std::to_string(r.crossRank));
  put(k::kCrossSize, std::to_string(r.crossSize));
  put(k::kMasterAddr, r.masterAddr);
  put(k::kMasterPort, std::to_string(r.masterPort));
  if (!r.jobId.empty()) put(k::kJobId, r.jobId);
  if (r.tokenIsSecret) put(k::kJobToken, r.jobToken);
  if (!r.commBackend.empty()) put(k::kCommBackend, r.commBackend);
  if (!r.commBackendFlag.empty()) put(k::kCommBackendFlag, r.commBackendFlag);
  return m;
}

}  // namespace ds
