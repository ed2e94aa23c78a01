// Multi-rank harness for ZeroEngine tests: runs a list of engine configurations one after another
// on `world` thread ranks that share ONE real gloo ProcessGroup (HashStore rendezvous), training
// the ToyModel on a fixed global batch split evenly over the ranks. Not an assertion library:
// rank threads only record results; the test asserts on the main thread (Catch2 is not
// thread-safe). Invariant: every rank runs the same configurations in the same order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/toy_model.h"
#include "zero/zero_engine.h"

namespace ds::test {

inline bool shortRun() {
  const char* v = std::getenv("DS_TEST_SHORT");
  return v && *v && std::string(v) != "0";
}

struct ZeroRun {
  std::vector<double> losses;                // global mean loss per step (mean of the ranks' means)
  std::vector<float> params;                 // full fp32 master params after the last step (rank 0)
  bool ranksAgree = true;                    // every rank's getParams() equal to rank 0's
  std::vector<zero::MemoryReport> mem;       // per rank, right after construction
  std::vector<zero::MemoryReport> memAfter;  // per rank, after training (peaks included)
  uint64_t compressedBytes = 0;              // rank 0's compressed-allreduce bytes (1-bit Adam)
};

struct ZeroJob {
  zero::ZeroOptions z;
  int steps = 20;
  int gas = 2;
  int rowsPerRank = 0;  // 0: globalRows / world
  int globalRows = 12;  // divisible by 1, 2, 3, 4
  float clip = 1.0f;
  float lossScale = 1.f;  // the model scales its gradients by it; step() unscales
  std::optional<zero::OptimizerOptions> optimizer;  // unset: toyOptimizer()
  float lr = 1e-2f;
  // Optional: called on every rank after construction (e.g. to load a checkpoint); `startStep`
  // is the step index training continues from.
  std::function<void(zero::ZeroEngine&, int rank)> setup;
  int startStep = 0;
  // Optional: called on every rank after training (e.g. to save optimizer shards).
  std::function<void(zero::ZeroEngine&, int rank)> finish;
};

inline zero::OptimizerOptions toyOptimizer() {
  zero::OptimizerOptions o;
  o.weightDecay = 0.01f;
  return o;
}

// One ZeroRun per job, all on the same `world` thread ranks.
inline std::vector<ZeroRun> runZeroJobs(const ToyModel& m, int world,
                                        const std::vector<ZeroJob>& jobs) {
  auto store = std::make_shared<comm::HashStore>();
  std::vector<std::vector<ZeroRun>> per(size_t(world), std::vector<ZeroRun>(jobs.size()));
  runRanks(
      world,
      [&](int r) {
        comm::GroupOptions go;
        go.backend = "gloo";
        go.timeout = std::chrono::seconds(60);
        comm::ProcessGroup pg(comm::createBackend("gloo", store, r, world, go));
        const auto init = m.init();
        for (size_t j = 0; j < jobs.size(); ++j) {
          const ZeroJob& job = jobs[j];
          const int rows = job.rowsPerRank ? job.rowsPerRank : job.globalRows / world;
          ZeroRun& out = per[size_t(r)][j];
          zero::ZeroEngine eng(m.params, m.L, &pg, job.z,
                               job.optimizer ? *job.optimizer : toyOptimizer());
          eng.setParams(init.data());
          if (job.setup) job.setup(eng, r);
          out.mem.push_back(eng.memory());
          for (int s = job.startStep; s < job.steps; ++s) {
            double loss = 0;
            for (int k = 0; k < job.gas; ++k) {
              eng.beginStep(k == job.gas - 1);
              loss += m.microStep(eng, s, k, r * rows, rows, job.lossScale) / job.gas;
            }
            auto st = eng.step(job.lr, job.lossScale, job.clip);
            if (st.skipped) throw std::runtime_error("step skipped (non-finite gradients)");
            out.losses.push_back(loss);
          }
          out.memAfter.push_back(eng.memory());
          out.compressedBytes = eng.compressedBytesSent();
          out.params.resize(eng.numel());
          eng.getParams(out.params.data());
          if (job.finish) job.finish(eng, r);
        }
      },
      std::chrono::seconds(300));
  std::vector<ZeroRun> res(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    ZeroRun& o = res[j];
    o = per[0][j];
    o.mem.clear();
    o.memAfter.clear();
    for (int r = 0; r < world; ++r) {
      const ZeroRun& pr = per[size_t(r)][j];
      o.mem.push_back(pr.mem.at(0));
      o.memAfter.push_back(pr.memAfter.at(0));
      if (pr.params != per[0][j].params) o.ranksAgree = false;
      if (r > 0)
        for (size_t s = 0; s < o.losses.size(); ++s) o.losses[s] += pr.losses[s];
    }
    for (auto& l : o.losses) l /= world;
  }
  return res;
}

// Stage 3 on the ToyModel with every parameter gathered and released (threshold 0: even the
// 10-element c_b and E), small reduce buckets and a prefetch of a few blocks.
inline zero::ZeroOptions toyStage3(bool overlap) {
  zero::ZeroOptions z;
  z.stage = 3;
  z.overlapComm = overlap;
  z.reduceBucketSize = 60;
  z.paramPersistenceThreshold = 0;
  z.prefetchBucketSize = 1000;
  return z;
}

// Largest |a-b|/|b| over the two loss curves (infinity when the lengths differ).
inline double maxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return 1e300;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-30));
  return worst;
}

}  // namespace ds::test
