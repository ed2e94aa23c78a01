// Rank assignment and per-rank environment (see rank_plan.h).
#include "launcher/rank_plan.h"

#include <algorithm>

#include "core/core_knobs.h"
#include "core/error.h"
#include "launcher/launcher_knobs.h"

namespace ds::launcher {

ds::RankEnv rankEnvFor(const JobSpec& spec, int node, int localIndex) {
  if (node < 0 || node >= static_cast<int>(spec.hosts.size()))
    throw ConfigError(fmt::format("node rank {} is out of range: the job has {} host{}", node,
                                  spec.hosts.size(), spec.hosts.size() == 1 ? "" : "s"));
  const HostSlots& h = spec.hosts[node];
  int local = static_cast<int>(h.slots.size());
  if (localIndex < 0 || localIndex >= local)
    throw ConfigError(
        fmt::format("local rank {} is out of range: host '{}' (node {}) runs {} "
                    "rank{}",
                    localIndex, h.host, node, local, local == 1 ? "" : "s"));
  ds::RankEnv r;
  r.rank = spec.firstRank(node) + localIndex;
  r.worldSize = spec.worldSize();
  r.localRank = localIndex;
  r.localSize = local;
  r.crossRank = node;
  r.crossSize = static_cast<int>(spec.hosts.size());
  r.masterAddr = spec.masterAddr;
  r.masterPort = spec.masterPort;
  r.jobId = spec.jobId;
  r.jobToken = spec.jobToken;
  r.tokenIsSecret = !spec.jobToken.empty();
  r.commBackendFlag = spec.commBackend;  // outranks the plan; DS_COMM_BACKEND does not
  r.source = ds::RankSource::kDsrun;
  return r;
}

EnvMap rankEnvironment(const JobSpec& spec, int node, int localIndex, const EnvMap& base,
                       int cores) {
  EnvMap env = spec.exports;
  for (auto& [k, v] : ds::rankEnvVars(rankEnvFor(spec, node, localIndex))) env[k] = v;
  const HostSlots& h = spec.hosts[node];
  if (spec.gpuHost) {
    std::string ids;
    for (int s : h.slots) ids += (ids.empty() ? "" : ",") + std::to_string(s);
    env["CUDA_VISIBLE_DEVICES"] = ids;
  }
  if (!knobIsSet(knobs::kOmpNumThreads, base) && !spec.exports.count("OMP_NUM_THREADS")) {
    int per = std::max(1, cores / std::max<int>(1, static_cast<int>(h.slots.size())));
    env["OMP_NUM_THREADS"] = std::to_string(per);
  }
  return env;
}

std::vector<std::string> rankArgv(const JobSpec& spec, int localIndex) {
  std::vector<std::string> argv = spec.program;
  if (spec.noLocalRank) return argv;
  std::string arg = "--local_rank=" + std::to_string(localIndex);
  if (spec.localRankAt < 0 || spec.localRankAt >= static_cast<int>(argv.size()))
    argv.push_back(arg);
  else argv.insert(argv.begin() + spec.localRankAt, arg);
  return argv;
}

}  // namespace ds::launcher
