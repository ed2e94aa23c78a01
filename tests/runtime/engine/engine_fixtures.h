// Fixtures for the engine tests: small plans built directly as Plan structs (an MLP bigram model
// and a tiny GPT-2 on the synthetic corpus) and a runner that gives each rank thread a real gloo
// ProcessGroup over one in-process HashStore (world 1: no group at all, as dsrt does).
#pragma once

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "runtime/config/plan.h"
#include "tests/support/spawn_ranks.h"

namespace ds::test {

inline bool shortTests() {
  const char* s = std::getenv("DS_TEST_SHORT");
  return s && *s && std::string(s) != "0";
}

// Global batch 16 sequences of 8 tokens, gas micro-steps; micro batch = 16 / (gas * world).
inline runtime::Plan mlpPlan(int world, int stage = 0, int gas = 2, int64_t steps = 20) {
  runtime::Plan p;
  p.source = "<engine test plan>";
  p.worldSize = world;
  p.model.kind = "mlp";
  p.model.sizes = {16, 48, 16};
  p.model.seqLen = 8;
  p.data.kind = "synthetic";
  p.data.syntheticSeed = 7;
  p.data.syntheticTokens = 1 << 14;
  p.data.syntheticValTokens = 1 << 11;
  p.data.syntheticBranching = 4;
  p.train.steps = steps;
  p.train.evalSteps = 2;
  p.train.seed = 11;
  p.train.logEvery = 1000;
  // The host path unless a test passes its own Ops: "auto" would pick a visible GPU, and a
  // "host" reference run would then be a second device run (the [gpu] fp16 comparisons were,
  // until the first native-fp16 GPU run showed native bit-equal to its "host" reference).
  p.train.device = "cpu";
  auto& d = p.deepspeed;
  d.trainBatchSize = 16;
  d.gradientAccumulationSteps = gas;
  d.microBatchPerGpu = 16 / (gas * world);
  d.optimizer.type = "AdamW";
  d.optimizer.lr = 1e-2f;
  d.optimizer.weightDecay = 0.01f;
  d.optimizer.adamwMode = true;
  d.gradientClipping = 1.0;
  d.zero.stage = stage;
  d.zero.reduceBucketSize = 300;  // several buckets per backward
  d.zero.allgatherBucketSize = 300;
  d.zero.prefetchBucketSize = 500;
  d.zero.paramPersistenceThreshold = 20;
  d.zero.subGroupSize = 700;  // several nvme tiles
  return p;
}

// A 2-layer GPT-2 (vocab 32, width 32, 2 heads, T 16), global batch 8 sequences.
inline runtime::Plan gptPlan(int world, int stage = 0, int gas = 1, int64_t steps = 10) {
  runtime::Plan p = mlpPlan(world, stage, gas, steps);
  p.model = {};
  p.model.kind = "gpt2";
  p.model.nLayer = 2;
  p.model.nHead = 2;
  p.model.nEmbd = 32;
  p.model.seqLen = 16;
  p.model.vocabSize = 32;
  p.deepspeed.trainBatchSize = 8;
  p.deepspeed.microBatchPerGpu = 8 / (gas * world);
  p.deepspeed.optimizer.lr = 3e-3f;
  return p;
}

inline void setOffload(runtime::Plan& p, const std::string& device, const std::string& dir) {
  p.deepspeed.zero.offloadOptimizer.device = device;
  p.deepspeed.zero.offloadOptimizer.nvmePath = dir;
}

// Runs fn(rank, group) on `world` threads, each with its own gloo group (nullptr at world 1).
inline void withRanks(int world, const std::function<void(int, comm::ProcessGroup*)>& fn) {
  if (world == 1) {
    fn(0, nullptr);
    return;
  }
  auto store = std::make_shared<comm::HashStore>();
  runRanks(
      world,
      [&](int rank) {
        comm::GroupOptions o;
        o.backend = "gloo";
        o.hostAddr = "127.0.0.1";
        o.timeout = std::chrono::seconds(60);
        comm::ProcessGroup pg(comm::createBackend("gloo", store, rank, world, o));
        fn(rank, &pg);
      },
      std::chrono::seconds(300));
}

inline double relDiff(double a, double b) {
  return std::fabs(a - b) / std::max(1e-12, std::max(std::fabs(a), std::fabs(b)));
}

}  // namespace ds::test
