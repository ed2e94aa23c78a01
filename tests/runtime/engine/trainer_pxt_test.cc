// Trainer with parallel.pipeline = 2 AND parallel.tensor = 2 (P x T, issue 17 items 4-6) on 4 rank
// threads over real gloo groups: a 4-block GPT whose two stages' blocks are each split over 2
// tensor ranks gives, in fp32 with gradient clipping, the per-step losses, gradient norms and
// final weights (gathered into the canonical layout) of one rank, with 1F1B and the interleaved
// schedule; dropping the tied wte's gradient sum (a test hook) moves the losses; bf16 within a
// band; fp16 ranks skip the same steps; checkpoints saved at P=2 x T=2 resume at 1 rank, P=2,
// T=2 and D=2 on the same trajectory and the reverse, and the export equals the 1-rank file's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/engine/trainer.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/engine/engine_fixtures.h"
#include "tests/runtime/engine/trainer_compare.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::checkClose;
using ds::test::exportedParams;
using ds::test::TempDir;
using ds::test::worstRel;
using ds::test::worstWeight;

namespace {

// A 4-block GPT-2 (fixtures' width 32, 2 heads, vocab 32, T 16), global batch 8 sequences over
// gas = 2 micro-batches (1F1B needs at least P), gradient clipping 1.0 (the global norm matters),
// 20 steps.
Plan gridPlan() {
  Plan p = test::gptPlan(1, 0, 2, 20);
  p.model.nLayer = 4;
  p.deepspeed.gradientClipping = 1.0;
  return p;
}

struct Layout {
  int world = 1, pipeline = 1, tensor = 1;
};

struct RunOut {
  std::vector<double> losses, evals, scales, norms;
  std::vector<bool> skipped;
  std::vector<float> params;  // the whole model's fp32 parameters at the end (canonical layout)
  size_t engineNumel = 0;     // the largest engine (its memory table's parameters) over the ranks
};

// Equal element by element, a NaN equal to a NaN (fp16's overflowing steps have a NaN norm).
bool sameValues(const std::vector<double>& got, const std::vector<double>& want) {
  return std::equal(got.begin(), got.end(), want.begin(), want.end(), [](double lhs, double rhs) {
    return lhs == rhs || (std::isnan(lhs) && std::isnan(rhs));
  });
}

RunOut runGrid(const Plan& base, Layout layout, const std::string& resume = "",
               bool skipTied = false) {
  std::vector<RunOut> perRank(static_cast<size_t>(layout.world));
  test::withRanks(layout.world, [&](int rank, comm::ProcessGroup* group) {
    Plan plan = base;
    plan.worldSize = layout.world;
    plan.parallel.pipeline = layout.pipeline;
    plan.parallel.tensor = layout.tensor;
    plan.deepspeed.microBatchPerGpu =
        base.deepspeed.trainBatchSize /
        (base.deepspeed.gradientAccumulationSteps * plan.dataParallel());
    TrainerOptions opts;
    opts.out = nullptr;
    opts.resume = resume;
    opts.testSkipTiedReduction = skipTied;
    Trainer trainer(plan, group, opts);
    const auto& summary = trainer.run();
    RunOut& out = perRank[static_cast<size_t>(rank)];
    out.params = trainer.fullParams();
    out.engineNumel = trainer.engine().numel();
    for (const auto& rec : summary.steps) {
      out.losses.push_back(rec.loss);
      out.skipped.push_back(rec.skipped);
      out.scales.push_back(rec.lossScale);
      out.norms.push_back(rec.gradNorm);
    }
    for (const auto& eval : summary.evals) out.evals.push_back(eval.valLoss);
  });
  for (int rank = 1; rank < layout.world; ++rank) {  // every rank reports the same values
    INFO("rank " << rank);
    const RunOut& other = perRank[static_cast<size_t>(rank)];
    perRank[0].engineNumel = std::max(perRank[0].engineNumel, other.engineNumel);
    CHECK(other.losses == perRank[0].losses);
    CHECK(other.evals == perRank[0].evals);
    CHECK(other.skipped == perRank[0].skipped);
    CHECK(other.scales == perRank[0].scales);
    CHECK(sameValues(other.norms, perRank[0].norms));
    CHECK(other.params == perRank[0].params);
  }
  return perRank[0];
}

constexpr Layout kOne{1, 1, 1};
constexpr Layout kGrid{4, 2, 2};  // P=2 x T=2, D=1

}  // namespace

// The same sums in another order (partial products over the tensor group, the tied wte's two
// shares added between the stages), a few fp32 ulps per step that Adam can amplify early; the
// tolerances are those of the P=2 and T=2 runs alone (trainer_pipeline_test.cc,
// trainer_tensor_test.cc).
TEST_CASE("trainer: pipeline 2 x tensor 2 gives one rank's losses, norms and weights",
          "[multirank]") {
  const Plan plan = gridPlan();
  const RunOut one = runGrid(plan, kOne);
  REQUIRE(one.losses.size() == 20);
  CHECK(one.losses.back() < one.losses.front());
  CHECK(one.norms.front() > 1.0);  // clipping is active: the global norm matters
  const RunOut grid = runGrid(plan, kGrid);
  checkClose(grid, one, 1e-5, 1e-4, "P=2 x T=2, 1F1B");
  // Each rank's engine (its memory table) holds about 1/(P x T) of the model: half the layers'
  // shards plus the embeddings' (wte rows on both end stages, wpe and LayerNorms replicated).
  INFO("largest P=2 x T=2 engine " << grid.engineNumel << " of " << one.engineNumel);
  CHECK(double(grid.engineNumel) < 0.3 * double(one.engineNumel));
  Plan interleaved = plan;  // 2 chunks of 1 layer per stage
  interleaved.parallel.virtualStages = 2;
  checkClose(runGrid(interleaved, kGrid), one, 1e-5, 1e-4, "P=2 x T=2, interleaved (2 chunks)");
}

// Activation checkpointing: each stage's backward recomputes its layers' forward, the tensor
// group's allreduces included, in the same order on every tensor rank of the stage.
TEST_CASE("trainer: pipeline 2 x tensor 2 with activation checkpointing gives one rank's losses",
          "[multirank]") {
  Plan plan = gridPlan();
  plan.train.steps = 8;
  plan.deepspeed.activationCheckpointing = true;
  const RunOut one = runGrid(plan, kOne);
  checkClose(runGrid(plan, kGrid), one, 1e-5, 1e-4, "P=2 x T=2, activation checkpointing");
}

// A check that can fail: without the tied wte's gradient sum the first stage's copy learns from
// the embedding only and the last stage's from the head only, and the losses leave one rank's.
TEST_CASE("trainer: pipeline 2 x tensor 2 without the tied wte sum leaves one rank's losses",
          "[multirank]") {
  Plan plan = gridPlan();
  plan.train.steps = 8;
  const RunOut one = runGrid(plan, kOne);
  const RunOut broken = runGrid(plan, kGrid, "", /*skipTied=*/true);
  const double moved = worstRel(broken.losses, one.losses);
  INFO("worst relative loss difference without the tied sum " << moved);
  CHECK(moved > 1e-3);
}

// bf16: the ranks read bf16 copies of fp32 masters that receive the same gradient sums in another
// order, so a rounding step of a 16-bit weight can differ: the band of the P=2 and T=2 bf16 runs
// (1e-2 relative on the losses).
TEST_CASE("trainer: bf16 pipeline 2 x tensor 2 matches one bf16 rank", "[multirank]") {
  Plan plan = gridPlan();
  plan.deepspeed.bf16 = true;
  const RunOut one = runGrid(plan, kOne);
  checkClose(runGrid(plan, kGrid), one, 1e-2, 5e-2, "bf16 P=2 x T=2");
}

// fp16 from a loss scale of 2^30: the first steps' scaled gradients overflow; the inf check sums
// over pipeline x tensor, so every rank skips the same steps and halves its scale with one rank.
TEST_CASE("trainer: fp16 pipeline 2 x tensor 2 ranks skip the same steps as one rank",
          "[multirank]") {
  Plan plan = gridPlan();
  plan.deepspeed.fp16.enabled = true;
  plan.deepspeed.fp16.initialScalePower = 30;
  plan.deepspeed.fp16.hysteresis = 1;
  const RunOut one = runGrid(plan, kOne);
  const auto skips = std::count(one.skipped.begin(), one.skipped.end(), true);
  CHECK(skips >= 2);
  CHECK(skips < 20);
  const RunOut grid = runGrid(plan, kGrid);  // runGrid checks every rank skipped alike
  CHECK(grid.skipped == one.skipped);
  CHECK(grid.scales == one.scales);
  CHECK(worstRel(grid.losses, one.losses) <= 1e-4);
}

// The third axis: P=2 x T=2 x D=2 on 8 rank threads with ZeRO 1 (each stage's engine partitions
// its shards' optimizer states over the data group) gives one rank's losses, and its checkpoint
// (optimizer states assembled over data, pipeline and tensor) resumes at one rank on the same
// trajectory.
TEST_CASE("trainer: pipeline 2 x tensor 2 x data 2 at ZeRO 1 gives one rank's losses",
          "[multirank]") {
  TempDir dir;
  Plan plan = gridPlan();
  plan.train.steps = 8;
  plan.train.checkpointDir = dir.path();
  plan.train.checkpointEvery = 4;
  plan.deepspeed.zero.stage = 1;
  const RunOut full = runGrid(plan, {8, 2, 2});
  Plan single = plan;
  single.train.checkpointDir.clear();
  checkClose(full, runGrid(single, kOne), 1e-5, 1e-4, "P=2 x T=2 x D=2, ZeRO 1");
  const std::vector<double> tail(full.losses.begin() + 4, full.losses.end());
  CHECK(worstRel(runGrid(plan, kOne, "global_step4").losses, tail) <= 1e-5);
  CHECK(runGrid(plan, {8, 2, 2}, "global_step4").losses == tail);
}

// What P x T still cannot run is refused before any rank trains, naming the numbers.
TEST_CASE("trainer: pipeline 2 x tensor 2 refusals name the layout and the numbers",
          "[multirank]") {
  auto refuse = [](Plan plan, bool onOps = false) {
    plan.worldSize = 4;
    plan.parallel.pipeline = 2;
    plan.parallel.tensor = 2;
    plan.deepspeed.microBatchPerGpu =
        plan.deepspeed.trainBatchSize /
        (plan.deepspeed.gradientAccumulationSteps * plan.dataParallel());
    std::string message = "(no ConfigError)";
    std::mutex mutex;
    test::withRanks(4, [&](int rank, comm::ProcessGroup* group) {
      TrainerOptions opts;
      opts.out = nullptr;
      auto ops = onOps ? makeCpuOps() : nullptr;  // the device path over the CPU ops
      opts.ops = ops.get();
      try {
        Trainer trainer(plan, group, opts);
      } catch (const ConfigError& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (rank == 0) message = e.what();
      }
    });
    return message;
  };
  for (int stage : {2, 3}) {
    Plan plan = gridPlan();
    plan.deepspeed.zero.stage = stage;
    CHECK_THAT(refuse(plan), Catch::Contains(fmt::format("zero_optimization.stage {}", stage)) &&
                                 Catch::Contains("parallel.pipeline = 2"));
  }
  CHECK_THAT(refuse(gridPlan(), /*onOps=*/true),
             Catch::Contains("host engine only") && Catch::Contains("train.device: cpu"));
  Plan onebit = gridPlan();
  onebit.deepspeed.optimizer.type = "OneBitAdam";
  CHECK_THAT(refuse(onebit), Catch::Contains("OneBitAdam"));
  Plan mlp = test::mlpPlan(1, 0, 2, 2);
  CHECK_THAT(refuse(mlp), Catch::Contains("model mlp"));
  Plan fewMicro = gridPlan();
  fewMicro.deepspeed.gradientAccumulationSteps = 1;
  CHECK_THAT(refuse(fewMicro), Catch::Contains("gradient_accumulation_steps 1"));
}

// Checkpoints hold the canonical layout at any (P, T, D): a P=2 x T=2 checkpoint resumes bitwise
// at P=2 x T=2 and on the same trajectory (1e-5) at 1 rank, P=2, T=2 and D=2; a 1-rank checkpoint
// resumes at P=2 x T=2; the P=2 x T=2 export is the run's final weights and the 1-rank export's
// within 1e-4 of the largest weight (the trajectories differ by fp32 ulps, as above).
TEST_CASE("trainer: pipeline 2 x tensor 2 checkpoints move to and from other layouts",
          "[multirank]") {
  TempDir grid, one, out;
  Plan plan = gridPlan();
  plan.train.steps = 12;
  plan.train.checkpointDir = grid.path();
  plan.train.checkpointEvery = 6;
  plan.deepspeed.zero.stage = 1;
  const RunOut full = runGrid(plan, kGrid);
  REQUIRE(full.losses.size() == 12);
  const std::vector<double> tail(full.losses.begin() + 6, full.losses.end());
  const auto exportedGrid =
      exportedParams(grid.path(), "global_step12", out.path() + "/p2t2.safetensors");
  CHECK(exportedGrid == full.params);

  const RunOut again = runGrid(plan, kGrid, "global_step6");
  CHECK(again.losses == tail);
  CHECK(again.params == full.params);
  CHECK(worstRel(runGrid(plan, kOne, "global_step6").losses, tail) <= 1e-5);
  CHECK(worstRel(runGrid(plan, {2, 2, 1}, "global_step6").losses, tail) <= 1e-5);  // P=2
  CHECK(worstRel(runGrid(plan, {2, 1, 2}, "global_step6").losses, tail) <= 1e-5);  // T=2
  CHECK(worstRel(runGrid(plan, {2, 1, 1}, "global_step6").losses, tail) <= 1e-5);  // D=2

  Plan fromOne = plan;  // a 1-rank checkpoint resumed at P=2 x T=2
  fromOne.train.checkpointDir = one.path();
  const RunOut oneFull = runGrid(fromOne, kOne);
  CHECK(worstRel(oneFull.losses, full.losses) <= 1e-5);
  const std::vector<double> oneTail(oneFull.losses.begin() + 6, oneFull.losses.end());
  CHECK(worstRel(runGrid(fromOne, kGrid, "global_step6").losses, oneTail) <= 1e-5);
  const auto exportedOne =
      exportedParams(one.path(), "global_step12", out.path() + "/one.safetensors");
  REQUIRE(exportedOne.size() == exportedGrid.size());
  CHECK(worstWeight(exportedGrid, exportedOne) <= 1e-4);
}
