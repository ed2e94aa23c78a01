// The CPU thread policy: how many threads this rank's kernels use, decided once at startup from
// the cores this process may run on, the ranks sharing the host and the user's overrides, then
// applied process-wide and logged. One pool computes: OpenMP's team runs our loops AND splits each
// GEMM into per-thread OpenBLAS calls, while OpenBLAS's own pthread pool stays at 1 thread. Two
// pools (Debian's libopenblas0-pthread next to libgomp) spin-wait against each other on a busy
// host: GPT-2 124M at B4xT256 ran 92 tok/s with both pools at 2 threads on 2 cores, 1.77x that with
// OMP_WAIT_POLICY=passive (issue 15). Invariant after applyThreadPolicy: omp_get_max_threads() ==
// threads and OpenBLAS runs every call on the calling thread.
#pragma once

#include <optional>
#include <string>

#include "core/env.h"

namespace ds::runtime {

// What the decision looks at; threadPolicyInput() fills it from this process.
struct ThreadPolicyInput {
  int cores = 1;                   // CPUs this process may run on (sched_getaffinity), >= 1
  int localRanks = 1;              // ranks on this host (LOCAL_SIZE and its launcher equivalents)
  int requested = 0;               // plan key train.threads or a command's --threads; 0 = auto
  std::optional<std::string> omp;  // OMP_NUM_THREADS as set (dsrun sets cores / local ranks)
};

struct ThreadPolicy {
  int threads = 1;      // OpenMP team: our loops and our GEMM split
  int blasThreads = 1;  // OpenBLAS's own pool: always 1 (GEMMs are split by us)
  std::string source;   // "train.threads" (or the requester's name) | "OMP_NUM_THREADS" | "auto"
  int cores = 1, localRanks = 1;
};

// The pure decision: requested if > 0, else OMP_NUM_THREADS (its first number: "4,2" is 4), else
// max(1, cores / localRanks). A bad OMP_NUM_THREADS (not a number >= 1) is a ConfigError naming
// it. `requestedBy` names the requested value's source in the policy ("train.threads",
// "--threads").
ThreadPolicy decideThreadPolicy(const ThreadPolicyInput& in,
                                const std::string& requestedBy = "train.threads");

// The input for this process: affinity cores, local ranks from the rank environment of env.
ThreadPolicyInput threadPolicyInput(const EnvMap& env, int requested);

// One line for the log and --help: "threads 2 (auto: 2 cores / 1 local rank), OpenBLAS 1 thread
// per call, GEMMs split over the OpenMP team".
std::string describeThreadPolicy(const ThreadPolicy& p);

// Applies p process-wide (omp_set_num_threads, openblas_set_num_threads(1), no dynamic teams)
// and remembers it for appliedThreadPolicy().
void applyThreadPolicy(const ThreadPolicy& p);
// The policy applied last in this process, nullopt before the first applyThreadPolicy.
std::optional<ThreadPolicy> appliedThreadPolicy();

// decide + apply + log at info level for this process; returns what was applied.
ThreadPolicy setupThreads(const EnvMap& env, int requested,
                          const std::string& requestedBy = "train.threads");

}  // namespace ds::runtime
