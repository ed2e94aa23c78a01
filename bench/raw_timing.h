// Timing loop shared by the raw-library peers (raw_gloo, raw_mpi), the same method as
// `dsrt comm-bench` (runtime/cmd/comm_bench.cc): 2 warm-up calls, barrier, one probe picks the
// iteration count (clamp(target / probe, 3, 5000)), barrier, time the loop on one reused buffer,
// the slowest rank's mean counts; no result check inside the timed loop (ours checks after it).
// target = DS_BENCH_TARGET_SECONDS (default 0.5, as `--target_seconds` of dsrt comm-bench).
// The library calls themselves stay in each peer, so the peers never touch our comm layer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_knobs.h"

namespace ds::bench {

struct RawRow {
  double seconds = 0;
  int iters = 0;
};

inline double targetSeconds() {
  return std::chrono::duration<double>(knobSecondsOrDefault(knobs::kBenchTargetSeconds)).count();
}

// Equal shards of count elements, the remainder spread over the first ranks (as comm-bench).
inline std::vector<size_t> shards(size_t count, int n) {
  std::vector<size_t> c(n, count / n);
  for (size_t r = 0; r < count % n; ++r) ++c[r];
  return c;
}

// run(): one collective, blocking. maxAcrossRanks(x): the max of x over all ranks. barrier().
inline RawRow timeCollective(const std::function<void()>& run,
                             const std::function<double(double)>& maxAcrossRanks,
                             const std::function<void()>& barrier, double targetSeconds,
                             int warmup = 2) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) run();
  barrier();
  auto t0 = Clock::now();
  run();
  double probe = maxAcrossRanks(std::chrono::duration<double>(Clock::now() - t0).count());
  RawRow r;
  r.iters = static_cast<int>(std::clamp(targetSeconds / std::max(probe, 1e-6), 3.0, 5000.0));
  barrier();
  t0 = Clock::now();
  for (int i = 0; i < r.iters; ++i) run();
  r.seconds = maxAcrossRanks(std::chrono::duration<double>(Clock::now() - t0).count()) / r.iters;
  return r;
}

inline double busFactor(const std::string& op, int n) {
  if (n <= 1) return 1.0;
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  return double(n - 1) / n;  // reduce_scatter, allgather
}

inline void printHeader(const char* what, int n) {
  std::printf("# %s, %d ranks, fp32\n", what, n);
  std::printf("%-15s %12s %11s %6s %11s %9s %9s %6s\n", "collective", "bytes", "count", "iters",
              "time_us", "algbw", "busbw", "check");
}

inline void printRow(const std::string& op, size_t bytes, int n, const RawRow& r) {
  double algbw = static_cast<double>(bytes) / r.seconds / 1e9;
  std::printf("%-15s %12zu %11zu %6d %11.1f %9.3f %9.3f %6s\n", op.c_str(), bytes, bytes / 4,
              r.iters, r.seconds * 1e6, algbw, algbw * busFactor(op, n), "-");
  std::fflush(stdout);
}

}  // namespace ds::bench
