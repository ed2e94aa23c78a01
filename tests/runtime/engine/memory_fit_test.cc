// A plan whose model states + buffers + activations exceed the memory the plan allows
// (train.memory_limit_mb) is refused before the first step with the table, the bytes missing and
// the ZeRO/offload settings whose formula fits; the activation estimate made before any forward
// agrees with what the model holds after one.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/device/host_memory.h"
#include "runtime/engine/memory_fit.h"
#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"

using namespace ds;
using namespace ds::runtime;

namespace {

TrainerOptions quiet() {
  TrainerOptions o;
  o.out = nullptr;
  return o;
}

Plan widePlan() {
  Plan p = test::gptPlan(1, 0, 1, 2);
  p.model.nEmbd = 256;  // ~1.6M params: ~25 MiB of fp32 model states at stage 0
  p.model.nHead = 4;
  return p;
}

}  // namespace

TEST_CASE("memory fit: over the limit names the bytes missing, the table and what fits", "[unit]") {
  MemoryFitInput in;
  in.numParams = 50'000'000;
  in.world = 2;
  in.zero.stage = 0;
  in.zero.compute = DType::kF32;
  // Stage 0, fp32: params 4Ψ + grads 4Ψ + optimizer 8Ψ (the master aliases the params) = 800 MB.
  in.table.bytes[0][0] = 200'000'000;
  in.table.bytes[1][0] = 200'000'000;
  in.table.bytes[2][0] = 400'000'000;
  in.activationBytes = 10 << 20;
  in.limitBytes = size_t(500) << 20;
  try {
    checkMemoryFit(in);
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    const size_t missing = 800'000'000 + (10 << 20) - (size_t(500) << 20);
    CHECK_THAT(what, Catch::Contains("train.memory_limit_mb (500 MiB per rank)"));
    CHECK_THAT(what, Catch::Contains(std::to_string(missing) + " bytes"));
    CHECK_THAT(what, Catch::Contains("missing"));
    CHECK_THAT(what, Catch::Contains("memory per rank at start"));  // the table
    CHECK_THAT(what, Catch::Contains("optimizer states"));
    // Stage 1 needs 12Ψ = 600 MB > 500 MiB; stage 2, 10Ψ = 500 MB (477 MiB) + 10 MiB, fits.
    CHECK_THAT(what, Catch::Contains("settings that would fit: zero_optimization.stage 2"));
    CHECK_THAT(what, !Catch::Contains("zero_optimization.stage 1 "));
  }
  in.limitBytes = size_t(1) << 30;
  CHECK_NOTHROW(checkMemoryFit(in));
  // The machine's share counts like a limit: what is still free plus what is already held.
  in.limitBytes = 0;
  in.availableBytes = 100 << 20;
  in.residentBytes = 300 << 20;
  CHECK_THROWS_WITH(checkMemoryFit(in),
                    Catch::Contains("this host's share of free memory (400 MiB per rank"));
  in.availableBytes = size_t(4) << 30;
  CHECK_NOTHROW(checkMemoryFit(in));
}

// Pipeline / tensor parallelism: the suggested settings partition the rank's engine (its stage's
// shards) over its data group, not the whole world: at 4 ranks of P=2 x T=2 (one data rank) no
// ZeRO stage divides the states, so only offloading fits where stage 1 would over 4 ranks.
TEST_CASE("memory fit: a P x T rank's suggestions partition over its data group", "[unit]") {
  MemoryFitInput in;
  in.numParams = 50'000'000;  // this rank's shard
  in.world = 4;
  in.zero.stage = 0;
  in.zero.compute = DType::kF32;
  in.table.bytes[0][0] = 200'000'000;
  in.table.bytes[1][0] = 200'000'000;
  in.table.bytes[2][0] = 400'000'000;
  in.limitBytes = size_t(700) << 20;
  CHECK_THROWS_WITH(checkMemoryFit(in), Catch::Contains("settings that would fit: "
                                                        "zero_optimization.stage 1"));
  in.partitionWorld = 1;  // stages 1-3 at one data rank: 16 bytes per parameter, as stage 0
  in.maxStage = 1;        // P x T runs ZeRO 0-1 only: never suggest stage 2 or 3
  try {
    checkMemoryFit(in);
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("settings that would fit: zero_optimization.stage 1 + "
                                     "offload_optimizer.device nvme"));
    CHECK_THAT(what, !Catch::Contains("zero_optimization.stage 2 ") &&
                         !Catch::Contains("zero_optimization.stage 3 "));
    CHECK_THAT(what, Catch::Contains("run ZeRO stages 0-1 only"));
  }
  // Without the layout's limit the same rank would be offered stage 2 (and the message says
  // nothing about stages 0-1).
  in.maxStage = 3;
  in.zero.stage = 2;
  CHECK_THROWS_WITH(checkMemoryFit(in),
                    Catch::Contains("settings that would fit: zero_optimization.stage 2 + "
                                    "offload_optimizer.device nvme") &&
                        !Catch::Contains("stages 0-1 only"));
}

TEST_CASE("memory fit: nothing fits says so and points at the activations", "[unit]") {
  MemoryFitInput in;
  in.numParams = 1'000'000;
  in.zero.stage = 3;
  in.activationBytes = size_t(900) << 20;
  in.limitBytes = size_t(100) << 20;
  CHECK_THROWS_WITH(checkMemoryFit(in), Catch::Contains("no ZeRO/offload setting fits") &&
                                            Catch::Contains("activation_checkpointing"));
}

TEST_CASE("memory fit: the trainer refuses a plan over train.memory_limit_mb before step 1",
          "[unit]") {
  Plan p = widePlan();
  // ~24 MiB of states + ~6 MiB of activations at one rank: only the optimizer on nvme fits 20.
  // Refused while the trainer is built, from the ZeRO formula, before the engine allocates the
  // states (several ranks of a host allocating first could exhaust the machine).
  p.train.memoryLimitMb = 20;
  CHECK_THROWS_WITH(Trainer(p, nullptr, quiet()),
                    Catch::Contains("train.memory_limit_mb (20 MiB per rank)") &&
                        Catch::Contains("bytes") && Catch::Contains("missing") &&
                        Catch::Contains("checked before allocating them") &&
                        Catch::Contains("memory per rank at start") &&
                        Catch::Contains("offload_optimizer.device nvme"));
  p.train.memoryLimitMb = 4096;
  Trainer fits(p, nullptr, quiet());
  CHECK(fits.run().steps.size() == 2);
}

TEST_CASE("memory fit: the activation estimate is close to what the model holds", "[unit]") {
  for (bool bf16 : {false, true}) {
    Plan p = widePlan();
    p.deepspeed.bf16 = bf16;
    Trainer t(p, nullptr, quiet());
    const auto& s = t.run();
    ModelConfig cfg = p.model;
    cfg.compute = bf16 ? DType::kBF16 : DType::kF32;
    const double estimate = double(estimateActivationBytes(cfg, int(p.deepspeed.microBatchPerGpu)));
    INFO("bf16 " << bf16 << ": estimate " << estimate << " model " << s.activationBytes);
    CHECK(estimate >= 0.9 * double(s.activationBytes));
    CHECK(estimate <= 1.6 * double(s.activationBytes));
  }
}

TEST_CASE("memory fit: the formula check refuses a plan over the machine's share before allocating",
          "[unit]") {
  const Plan p = widePlan();
  const size_t available = hostMemory().availableBytes;
  REQUIRE(available > 0);
  // Stage 0 fp32 is 16 bytes per parameter: eight times what the machine has free.
  const size_t overMachine = available / 2;
  CHECK_THROWS_WITH(checkFormulaFit(nullptr, p, overMachine, 1, 1),
                    Catch::Contains("this host's share of free memory") &&
                        Catch::Contains("checked before allocating them") &&
                        Catch::Contains("missing") && Catch::Contains("at ZeRO stage 0"));
  // Over 16 ranks on 16 hosts (one local rank each) stage 3 holds a sixteenth: half of what is
  // free.
  Plan stage3 = p;
  stage3.deepspeed.zero.stage = 3;
  CHECK_NOTHROW(checkFormulaFit(nullptr, stage3, overMachine, 16, 1));
  // The same world on one host: each rank's share is a sixteenth of the machine (plus what this
  // process holds, far less than the other 7/16).
  CHECK_THROWS_WITH(checkFormulaFit(nullptr, stage3, overMachine, 16, 16),
                    Catch::Contains("share of free memory"));
  // States on a device (localSize 0): only the plan's limit, which it has none of.
  CHECK_NOTHROW(checkFormulaFit(nullptr, p, overMachine, 1, 0));
  CHECK_NOTHROW(checkFormulaFit(nullptr, p, 1000, 1, 1));
}
