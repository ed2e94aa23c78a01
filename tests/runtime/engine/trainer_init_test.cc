// Partitioned construction in the Trainer: every rank fills its engine from the model's per-range
// initialiser (stage 3: only its shard). The losses and the final parameters must be bitwise those
// of the whole-model initialiser handed over as one full vector (the construction before
// partitioning), at ZeRO stages 0-3 on 1 and 2 ranks, fp32 and bf16, with GPT-2's padded
// vocabulary rows.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"

using namespace ds;
using namespace ds::runtime;

namespace {

struct Result {
  std::vector<double> losses;
  std::vector<float> params;
};

// fullInit: after construction, overwrite the engine's parameters with the whole-model
// initParams vector (the old construction path).
Result train(const Plan& p, int world, bool fullInit) {
  Result out;
  std::mutex mu;
  test::withRanks(world, [&](int rank, comm::ProcessGroup* g) {
    Plan q = p;
    q.worldSize = world;
    q.deepspeed.microBatchPerGpu = p.deepspeed.trainBatchSize / world;
    TrainerOptions o;
    o.out = nullptr;
    Trainer t(q, g, o);
    if (fullInit) {
      std::vector<float> full(t.model().numParamsTotal());
      t.model().initParams(full.data(), q.train.seed);
      t.engine().setParams(full.data());
    }
    const auto& s = t.run();
    std::vector<float> params = t.fullParams();  // collective
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& r : s.steps) out.losses.push_back(r.loss);
      out.params = std::move(params);
    }
  });
  return out;
}

}  // namespace

TEST_CASE("trainer: partitioned construction is bitwise the full init at stages 0-3, 1-2 ranks",
          "[multirank]") {
  for (bool bf16 : {false, true})
    for (int world : {1, 2})
      for (int stage = 0; stage <= 3; ++stage) {
        Plan p = test::gptPlan(world, stage, 1, 4);
        p.model.paddedVocab = 40;  // wte rows 32..39 stay zero
        p.deepspeed.bf16 = bf16;
        const Result part = train(p, world, false), full = train(p, world, true);
        INFO(fmt::format("stage {} world {} {}", stage, world, bf16 ? "bf16" : "fp32"));
        REQUIRE(part.losses.size() == 4);
        CHECK(part.losses == full.losses);
        REQUIRE(part.params.size() == full.params.size());
        CHECK(std::memcmp(part.params.data(), full.params.data(),
                          part.params.size() * sizeof(float)) == 0);
      }
}
