// The CPU thread policy (see thread_policy.h).
#include "runtime/tensor/thread_policy.h"

#include "core/core_knobs.h"
#include "runtime/tensor/tensor_knobs.h"

#include <sched.h>

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/rank_env.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {

namespace {

std::mutex gMu;
std::optional<ThreadPolicy> gApplied;

int affinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

ThreadPolicy decideThreadPolicy(const ThreadPolicyInput& in, const std::string& requestedBy) {
  DS_CHECK(in.cores >= 1 && in.localRanks >= 1, "cores {} and local ranks {} must be >= 1",
           in.cores, in.localRanks);
  ThreadPolicy p;
  p.cores = in.cores;
  p.localRanks = in.localRanks;
  p.blasThreads = 1;
  if (in.requested < 0)
    throw ConfigError(fmt::format("{} = {}: expected a thread count >= 1 (or 0 for auto)",
                                  requestedBy, in.requested));
  if (in.requested > 0) {
    p.threads = in.requested;
    p.source = requestedBy;
  } else if (in.omp && !in.omp->empty()) {
    // OpenMP's list form "outer,inner" sets the outermost level first: that is ours.
    const std::string first = in.omp->substr(0, in.omp->find(','));
    p.threads = static_cast<int>(parseInt(
        first, fmt::format("OMP_NUM_THREADS='{}' (a thread count >= 1)", *in.omp), 1, 4096));
    p.source = "OMP_NUM_THREADS";
  } else {
    p.threads = std::max(1, in.cores / in.localRanks);
    p.source = "auto";
  }
  return p;
}

ThreadPolicyInput threadPolicyInput(const EnvMap& env, int requested) {
  ThreadPolicyInput in;
  in.cores = affinityCores();
  in.localRanks = std::max(1, deriveRankEnv(env).localSize);
  in.requested = requested;
  if (auto omp = knobString(knobs::kOmpNumThreads, env)) in.omp = *omp;
  return in;
}

std::string describeThreadPolicy(const ThreadPolicy& p) {
  std::string why;
  if (p.source == "auto")
    why = fmt::format("auto: {} core{} / {} local rank{}", p.cores, p.cores == 1 ? "" : "s",
                      p.localRanks, p.localRanks == 1 ? "" : "s");
  else
    why = fmt::format("from {}; {} core{}, {} local rank{}", p.source, p.cores,
                      p.cores == 1 ? "" : "s", p.localRanks, p.localRanks == 1 ? "" : "s");
  std::string line =
      fmt::format("threads {} ({}), OpenBLAS {} thread per call, GEMMs split over the OpenMP team",
                  p.threads, why, p.blasThreads);
  if (long(p.threads) * p.localRanks > p.cores)
    line += fmt::format(" [oversubscribed: {} ranks x {} threads on {} cores]", p.localRanks,
                        p.threads, p.cores);
  return line;
}

void applyThreadPolicy(const ThreadPolicy& p) {
  setComputeThreads(p.threads);
  std::lock_guard lk(gMu);
  gApplied = p;
}

std::optional<ThreadPolicy> appliedThreadPolicy() {
  std::lock_guard lk(gMu);
  return gApplied;
}

ThreadPolicy setupThreads(const EnvMap& env, int requested, const std::string& requestedBy) {
  ThreadPolicy p = decideThreadPolicy(threadPolicyInput(env, requested), requestedBy);
  applyThreadPolicy(p);
  DS_LOG_INFO("threads", "{}", describeThreadPolicy(p));
  return p;
}

}  // namespace ds::runtime
