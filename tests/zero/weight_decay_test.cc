// Weight decay follows ParamInfo::decay element by element in every ZeRO stage and offload path:
// with zero gradients one AdamW step leaves a parameter without decay bitwise unchanged and scales
// one with decay by exactly (1 - lr*wd) (the kernel's fma), whether the partition boundaries fall
// inside a parameter or not (world 1 and 2, stages 0-3, no offload, and at stages 1-3 cpu and nvme
// with tiles that split parameters). SGD's L2 form likewise. ToyModel marks its gain E and biases c
// without decay and its matrices W with decay.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/registry.h"
#include "comm/store/hash_store.h"
#include "tests/support/spawn_ranks.h"
#include "tests/zero/toy_model.h"
#include "zero/zero_engine.h"

using namespace ds;
using namespace ds::zero;
using ds::test::ToyModel;

namespace {

constexpr float kLr = 0.05f, kWd = 0.1f;

ZeroOptions decayOpts(int stage, const std::string& offload, const std::string& dir) {
  ZeroOptions z;
  z.stage = stage;
  z.reduceBucketSize = 50;
  z.paramPersistenceThreshold = 8;
  z.prefetchBucketSize = 200;
  z.subGroupSize = 100;  // nvme tiles of 1024 elements, several per parameter boundary set
  if (offload != "none") {
    z.offloadOptimizer.device = offload;
    z.offloadOptimizer.nvmePath = dir;
  }
  return z;
}

// One step with all-zero gradients on `world` thread ranks; the full params afterwards.
std::vector<float> stepWithZeroGrads(const ToyModel& m, int world, const ZeroOptions& z,
                                     const OptimizerOptions& o, const std::vector<float>& init) {
  auto store = std::make_shared<comm::HashStore>();
  std::mutex mu;
  std::vector<float> out;
  ds::test::runRanks(world, [&](int rank) {
    std::unique_ptr<comm::ProcessGroup> pg;
    if (world > 1) {
      comm::GroupOptions go;
      go.backend = "gloo";
      go.timeout = std::chrono::seconds(60);
      pg =
          std::make_unique<comm::ProcessGroup>(comm::createBackend("gloo", store, rank, world, go));
    }
    ZeroEngine eng(m.params, m.L, pg.get(), z, o);
    eng.setParams(init.data());
    eng.beginStep(true);
    for (int b = 0; b < m.L; ++b) {
      eng.beforeForward(b);
      eng.afterForward(b);
    }
    for (int b = m.L - 1; b >= 0; --b) {
      eng.beforeBackward(b);
      eng.afterBackward(b);
    }
    auto result = eng.step(kLr, 1.f, 0.f);
    if (result.skipped) throw std::runtime_error("step skipped");
    std::vector<float> params(eng.numel());
    eng.getParams(params.data());
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out = std::move(params);
    }
  });
  return out;
}

// The first flat index where got differs from the expectation (npos when none).
size_t firstMismatch(const ToyModel& m, const std::vector<float>& init,
                     const std::vector<float>& got, const std::function<float(float)>& decayed) {
  if (got.size() != init.size()) return 0;
  size_t off = 0;
  for (const auto& p : m.params) {
    for (size_t i = off; i < off + p.numel; ++i)
      if (got[i] != (p.decay ? decayed(init[i]) : init[i])) return i;
    off += p.numel;
  }
  return std::string::npos;
}

}  // namespace

TEST_CASE("weight decay: only parameters marked decay shrink, in every stage and offload",
          "[multirank]") {
  ds::test::TempDir dir;
  ToyModel m(3, 37);  // 37: parameter boundaries fall at odd offsets inside SIMD vectors
  const auto init = m.init();
  OptimizerOptions adamw;
  adamw.type = "AdamW";
  adamw.weightDecay = kWd;
  const float coeff = -kLr * kWd;
  auto adamwDecayed = [&](float p) { return std::fmaf(p, coeff, p); };
  for (int world : {1, 2})
    for (int stage = 0; stage <= 3; ++stage)
      for (std::string off : {"none", "cpu", "nvme"}) {
        if (stage == 0 && off != "none") continue;  // offload needs stage 1-3
        auto got = stepWithZeroGrads(m, world, decayOpts(stage, off, dir.path()), adamw, init);
        INFO("world " << world << " stage " << stage << " offload " << off);
        CHECK(firstMismatch(m, init, got, adamwDecayed) == std::string::npos);
      }

  // SGD: g' = 0 + wd*p, p -= lr*g' (the L2 form), again only where decay applies.
  OptimizerOptions sgd;
  sgd.type = "SGD";
  sgd.lr = kLr;
  sgd.weightDecay = kWd;
  auto sgdDecayed = [&](float p) { return std::fmaf(std::fmaf(p, kWd, 0.f), -kLr, p); };
  for (int stage : {0, 2, 3}) {
    auto got =
        stepWithZeroGrads(m, 2, decayOpts(stage, stage ? "cpu" : "none", dir.path()), sgd, init);
    INFO("sgd stage " << stage);
    CHECK(firstMismatch(m, init, got, sgdDecayed) == std::string::npos);
  }
}

TEST_CASE("weight decay: every parameter marked decay shrinks (decay on all)", "[unit]") {
  ToyModel m(2, 19);
  for (auto& p : m.params) p.decay = true;
  const auto init = m.init();
  OptimizerOptions adamw;
  adamw.weightDecay = kWd;
  const float coeff = -kLr * kWd;
  for (int stage : {0, 1, 3}) {
    auto got = stepWithZeroGrads(m, 1, decayOpts(stage, "none", ""), adamw, init);
    INFO("stage " << stage);
    CHECK(firstMismatch(m, init, got, [&](float p) { return std::fmaf(p, coeff, p); }) ==
          std::string::npos);
    CHECK(got[0] != init[0]);  // E, a 1-D gain, shrinks too
  }
}
