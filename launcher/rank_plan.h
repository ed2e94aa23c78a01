// Rank assignment of a JobSpec (DESIGN.md §4.3): which global rank each local process of a node
// is, and the environment and argv it gets. Pure functions, shared by the node agent and
// --dry_run so both say the same. Not process spawning (launcher/agent/ does that).
// Invariant: ranks run host by host in node-rank order; LOCAL_RANK is the index on the node
// (0..n-1), not DeepSpeed's RANK % n, so heterogeneous hosts get dense local ranks.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/rank_env.h"
#include "launcher/job_spec.h"

namespace ds::launcher {

// The rank contract for local process `localIndex` of node `node`. Throws ConfigError when either
// index is out of range for the spec.
ds::RankEnv rankEnvFor(const JobSpec& spec, int node, int localIndex);

// Everything a rank's environment gains on top of the agent's own `base` environment:
// spec.exports, the rank contract (RANK ... DS_JOB_TOKEN when set), CUDA_VISIBLE_DEVICES (the
// node's slot list, GPU hosts only) and OMP_NUM_THREADS (cores / local ranks, at least 1) unless
// `base` or the exports already set it.
EnvMap rankEnvironment(const JobSpec& spec, int node, int localIndex, const EnvMap& base,
                       int cores);

// The rank's argv: spec.program with `--local_rank=<LOCAL_RANK>` inserted at spec.localRankAt
// (after every argument when -1; python_program.h) unless noLocalRank.
std::vector<std::string> rankArgv(const JobSpec& spec, int localIndex);

}  // namespace ds::launcher
