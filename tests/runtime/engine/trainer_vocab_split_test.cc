// The tied wte's memory on the host at ZeRO stages 2 and 3 (issue 15 items 2-3).
// Stage 2 takes wte's gradient by chunks of rows at the embedding's backward (Gpt2Model::
// giveTiedGradByRows, zero::FlatPartitionedStage's GradRowSink): the whole gradient's training
// (DS_ZERO2_GRAD_BY_ROWS=0) to sgemm rounding at 1-3 ranks, with gradient accumulation, clipping,
// offload, bf16 and a padded vocabulary, and the stage's buffers no longer hold wte's full
// gradient.
// ZeRO stage 3 on the host with GPT-2's wte split by vocabulary rows over the data-parallel ranks
// (issue 15 item 3; gpt2_data_vocab.h) on 2-3 rank threads over real gloo groups: the losses and
// weights follow stage 0 within a stated tolerance (with gradient accumulation, clipping, cpu and
// nvme optimizer offload, padded vocabularies that do not split evenly); the stage's buffers in
// the memory table no longer hold a gathered wte nor its full gradient; checkpoints keep the
// canonical layout (a split stage-3 checkpoint resumes at stage 0, and the reverse);
// DS_ZERO3_VOCAB_SPLIT=0 gathers wte whole as before. ZeRO++ (qwZ, qgZ, hpZ) and MiCS keep the
// split: the losses stay within ZeRO++'s band of the exact split run (hpZ bitwise, MiCS to
// rounding) and wte is neither gathered nor reduced whole there either.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"
#include "tests/runtime/engine/trainer_compare.h"
#include "tests/support/scoped_knob.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::TempDir;

namespace {

struct RunOut {
  std::vector<double> losses;
  std::vector<bool> skipped;
  std::vector<float> params;
  zero::MemoryReport memory;
};

RunOut run(const Plan& p, int world, const std::string& resume = "") {
  RunOut out;
  std::mutex mu;
  test::withRanks(world, [&](int rank, comm::ProcessGroup* g) {
    Plan q = p;
    q.worldSize = world;
    q.deepspeed.microBatchPerGpu =
        p.deepspeed.trainBatchSize / (p.deepspeed.gradientAccumulationSteps * world);
    TrainerOptions o;
    o.out = nullptr;
    o.resume = resume;
    Trainer t(q, g, o);
    const auto& s = t.run();
    std::vector<float> params = t.fullParams();  // collective
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& r : s.steps) {
        out.losses.push_back(r.loss);
        out.skipped.push_back(r.skipped);
      }
      out.params = std::move(params);
      out.memory = t.memory();
    }
  });
  return out;
}

// run() with the knob set to 0 (the path before: the whole wte).
RunOut runKnobOff(const char* knob, const Plan& p, int world) {
  test::ScopedKnob off(knob, "0");
  return run(p, world);
}

// The memory table's buffers line, every place.
size_t buffersOf(const RunOut& r) {
  size_t n = 0;
  for (int place = 0; place < 3; ++place)
    n += r.memory.at(zero::MemKind::kBuffers, zero::MemPlace(place));
  return n;
}

double worstLoss(const RunOut& got, const RunOut& want) {
  return test::worstRel(got.losses, want.losses);
}

double worstWeight(const RunOut& got, const RunOut& want) {
  return test::worstWeight(got.params, want.params);
}

// Tolerance: the split head sums the softmax denominators, the logits' maxima and the wte
// gradient over ranks in another order than stage 0's gathered head and allreduce, so each step
// differs by fp32 rounding (~1e-7 relative); Adam's normalisation can amplify that early on.
// The same band as the data-parallel comparisons (trainer_multirank_test.cc: 1e-5): a wrong
// row split, scale or missing rank moves the loss by > 1e-2 within a few steps. Measured: losses
// at most 8.1e-8 relative, weights 1.1e-5 of the largest, over the cases below.
constexpr double kLossRel = 1e-5;
constexpr double kWeightRel = 1e-4;
// Stage 2's wte gradient by rows: the head's product runs in one sgemm per chunk of rows, whose
// kernels block the rows differently from the whole product's call (bits can differ in the last
// place; each element is still one dot product over the same positions), the rest is the same
// arithmetic. Measured over 6 steps: losses equal, weights within 3.8e-6 of the largest.
constexpr double kRowsLossRel = 1e-6;
constexpr double kRowsWeightRel = 2e-5;

}  // namespace

TEST_CASE("trainer: stage 3 with wte split by vocabulary rows follows stage 0", "[multirank]") {
  struct Case {
    int world, gas, padded;
    std::string offload;
    bool clip;
  };
  const std::vector<Case> cases = {
      {2, 1, 0, "none", false}, {2, 2, 0, "none", true}, {3, 1, 40, "none", false},
      {2, 2, 33, "cpu", false}, {2, 1, 0, "nvme", true},
  };
  for (const Case& c : cases) {
    TempDir nvme;
    Plan p = test::gptPlan(c.world, 0, c.gas, 12);
    p.deepspeed.trainBatchSize = 6 * c.world;  // 6 / (gas * world) sequences per micro-batch
    if (c.gas == 2) p.deepspeed.trainBatchSize = 4 * c.world;
    p.model.paddedVocab = c.padded;
    p.deepspeed.gradientClipping = c.clip ? 0.05 : 0.0;
    const RunOut base = run(p, c.world);
    Plan q = p;
    q.deepspeed.zero.stage = 3;
    if (c.offload != "none") test::setOffload(q, c.offload, nvme.path());
    const RunOut split = run(q, c.world);
    INFO(
        fmt::format("world {} gas {} padded vocab {} offload {} clip {}: worst loss {:.3g}, "
                    "weights {:.3g}",
                    c.world, c.gas, c.padded, c.offload, c.clip, worstLoss(split, base),
                    worstWeight(split, base)));
    CHECK(worstLoss(split, base) <= kLossRel);
    CHECK(worstWeight(split, base) <= kWeightRel);
  }
}

TEST_CASE("trainer: the split wte is neither gathered nor reduced whole at stage 3",
          "[multirank]") {
  Plan p = test::gptPlan(2, 3, 1, 2);
  p.model.vocabSize = 2048;  // wte 2048 x 32: five times a layer
  p.deepspeed.zero.paramPersistenceThreshold = 0;
  p.deepspeed.zero.reduceBucketSize = 1000;  // buckets out of the way
  const size_t wte = 2048 * 32 * sizeof(float);
  const RunOut split = run(p, 2);
  const RunOut whole = runKnobOff("DS_ZERO3_VOCAB_SPLIT", p, 2);
  INFO("stage-3 buffers: split " << buffersOf(split) << " B, gathered " << buffersOf(whole)
                                 << " B; wte " << wte << " B");
  // Gathered: the whole wte and its whole gradient are in the buffers; split: neither.
  CHECK(buffersOf(whole) >= 2 * wte);
  CHECK(buffersOf(split) < wte);
  // The same model either way, within the split's rounding.
  CHECK(worstLoss(split, whole) <= kLossRel);
}

TEST_CASE("trainer: a split stage-3 checkpoint resumes at stage 0 and the reverse", "[multirank]") {
  TempDir dir3, dir0;
  Plan p3 = test::gptPlan(2, 3, 1, 10);
  p3.model.paddedVocab = 33;  // 17 rows per rank, the last row padding
  p3.train.checkpointDir = dir3.path();
  p3.train.checkpointEvery = 5;
  const RunOut full3 = run(p3, 2);
  REQUIRE(full3.losses.size() == 10);
  Plan p0 = p3;
  p0.deepspeed.zero.stage = 0;
  p0.train.checkpointDir = dir0.path();
  const RunOut full0 = run(p0, 2);
  auto tail = [](const RunOut& r) {
    RunOut out = r;
    out.losses.erase(out.losses.begin(), out.losses.begin() + 5);
    return out;
  };
  // stage 3 (split) -> stage 0 on 1 rank and on 2 ranks; stage 0 -> stage 3 (split)
  Plan r0 = p0;
  r0.train.checkpointDir = dir3.path();
  CHECK(worstLoss(run(r0, 1, "global_step5"), tail(full3)) <= kLossRel);
  CHECK(worstLoss(run(r0, 2, "global_step5"), tail(full3)) <= kLossRel);
  Plan r3 = p3;
  r3.train.checkpointDir = dir0.path();
  CHECK(worstLoss(run(r3, 2, "global_step5"), tail(full0)) <= kLossRel);
  // The same layout resumes bitwise.
  const RunOut again = run(p3, 2, "global_step5");
  REQUIRE(again.losses.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(again.losses[i] == full3.losses[i + 5]);
}

// ZeRO++ with the split (issue 18): qwZ, qgZ and hpZ leave the split wte alone and quantize or
// partition the other parameters; MiCS splits wte over its shard group. Band: DeepSpeed-style
// block int8 weights and gradients (zero_plusplus_test.cc's band: 1% of exact) against the exact
// split run; hpZ changes only where backward's gathers go, so it is bitwise the run without it,
// and MiCS sums in another order (the stage-vs-stage 1e-5). Measured when written (12 steps,
// DS_ZERO_TEST_VERBOSE=1): qwZ 3.0e-4, qgZ 8.1e-5, qwZ+qgZ 3.0e-4 / 1.5e-4 (world 2 / 3),
// qwZ+qgZ+hpZ 1.3e-4, MiCS 0.
constexpr double kZeroppLossRel = 1e-2;

TEST_CASE("trainer: ZeRO++ and MiCS compose with the split wte at stage 3", "[multirank]") {
  struct Case {
    std::string name;
    int world;
    bool qwz, qgz;
    int hpz, mics;
  };
  const std::vector<Case> cases = {
      {"qwZ", 2, true, false, 1, -1},    {"qgZ", 2, false, true, 1, -1},
      {"qwZ+qgZ", 2, true, true, 1, -1}, {"qwZ+qgZ", 3, true, true, 1, -1},
      {"hpZ 2", 4, false, false, 2, -1}, {"qwZ+qgZ+hpZ 2", 4, true, true, 2, -1},
      {"MiCS 2", 4, false, false, 1, 2},
  };
  for (const Case& c : cases) {
    Plan p = test::gptPlan(c.world, 3, 1, 12);
    p.deepspeed.trainBatchSize = 2 * c.world;
    p.model.vocabSize = 1024;  // wte 1024 x 32: more than a layer, several int8 blocks
    p.deepspeed.zero.paramPersistenceThreshold = 0;  // every other parameter goes through gathers
    const RunOut exact = run(p, c.world);
    Plan q = p;
    q.deepspeed.zero.quantizedWeights = c.qwz;
    q.deepspeed.zero.quantizedGradients = c.qgz;
    q.deepspeed.zero.hpzPartitionSize = c.hpz;
    q.deepspeed.zero.micsShardSize = c.mics;
    const RunOut got = run(q, c.world);
    const double loss = worstLoss(got, exact);
    INFO(fmt::format("{} at world {}: worst loss {:.3g} relative, weights {:.3g}", c.name, c.world,
                     loss, worstWeight(got, exact)));
    if (std::getenv("DS_ZERO_TEST_VERBOSE"))
      fmt::print("vocab split, {} at world {}: worst loss {:.3g} relative to the exact split\n",
                 c.name, c.world, loss);
    REQUIRE(got.losses.size() == 12);
    CHECK(got.losses.back() < got.losses.front());  // it learns
    if (c.qwz || c.qgz) {
      CHECK(loss <= kZeroppLossRel);
      CHECK(got.losses != exact.losses);  // the quantization took effect
    } else if (c.mics > 0) {
      CHECK(loss <= kLossRel);
    } else {  // hpZ alone: bitwise
      CHECK(got.losses == exact.losses);
      CHECK(got.params == exact.params);
    }
  }
}

TEST_CASE("trainer: under ZeRO++ the split wte is neither gathered nor reduced whole",
          "[multirank]") {
  struct Case {
    int world;
    bool qwz, qgz;
    int hpz, mics;
  };
  for (const Case& c :
       std::vector<Case>{{2, true, true, 1, -1}, {4, true, true, 2, -1}, {4, false, false, 1, 2}}) {
    Plan p = test::gptPlan(c.world, 3, 1, 2);
    p.deepspeed.trainBatchSize = c.world;
    p.model.vocabSize = 2048;  // wte 2048 x 32: five times a layer
    p.deepspeed.zero.paramPersistenceThreshold = 0;
    p.deepspeed.zero.reduceBucketSize = 1000;  // buckets out of the way
    p.deepspeed.zero.quantizedWeights = c.qwz;
    p.deepspeed.zero.quantizedGradients = c.qgz;
    p.deepspeed.zero.hpzPartitionSize = c.hpz;
    p.deepspeed.zero.micsShardSize = c.mics;
    const size_t wte = 2048 * 32 * sizeof(float);
    const RunOut split = run(p, c.world);
    const RunOut whole = runKnobOff("DS_ZERO3_VOCAB_SPLIT", p, c.world);
    INFO("world " << c.world << " qwZ " << c.qwz << " qgZ " << c.qgz << " hpZ " << c.hpz << " MiCS "
                  << c.mics << ": stage-3 buffers: split " << buffersOf(split) << " B, gathered "
                  << buffersOf(whole) << " B; wte " << wte << " B");
    CHECK(buffersOf(whole) >= 2 * wte);
    CHECK(buffersOf(split) < wte);
    // The same model either way: within the quantization's band (qwZ/qgZ), else the split's.
    CHECK(worstLoss(split, whole) <= (c.qwz || c.qgz ? kZeroppLossRel : kLossRel));
  }
}

TEST_CASE("trainer: stage 2 takes wte's gradient by rows and trains as with the whole gradient",
          "[multirank]") {
  struct Case {
    int world, gas, padded;
    std::string offload;
    bool clip, bf16, fp16 = false;
  };
  // fp16 (emulated on the host, from 2^24: the first steps overflow) keeps the whole gradient,
  // which Fp16Hooks rounds to fp16 per block: the same skipped steps either way.
  const std::vector<Case> cases = {
      {2, 1, 0, "none", false, false},       {3, 2, 40, "none", true, false},
      {2, 2, 33, "cpu", false, false},       {2, 1, 0, "nvme", true, false},
      {1, 2, 0, "none", false, false},       {2, 1, 0, "none", false, true},
      {2, 2, 0, "none", false, false, true},
  };
  for (const Case& c : cases) {
    TempDir nvme;
    Plan p = test::gptPlan(c.world, 2, c.gas, 6);
    p.deepspeed.trainBatchSize = 6 * c.world;
    if (c.gas == 2) p.deepspeed.trainBatchSize = 4 * c.world;
    p.model.vocabSize = 200;  // wte 200 x 32 (or the padded rows), several chunks of 16 rows
    if (c.padded) p.model.paddedVocab = 200 + c.padded;
    p.deepspeed.zero.reduceBucketSize = 700;  // 21 rows a bucket: chunks of 16 rows
    p.deepspeed.gradientClipping = c.clip ? 0.05 : 0.0;
    p.deepspeed.bf16 = c.bf16;
    if (c.fp16) {
      p.deepspeed.fp16.enabled = true;
      p.deepspeed.fp16.initialScalePower = 24;
      p.train.steps = 12;
    }
    if (c.offload != "none") test::setOffload(p, c.offload, nvme.path());
    const RunOut rows = run(p, c.world);
    const RunOut whole = runKnobOff("DS_ZERO2_GRAD_BY_ROWS", p, c.world);
    Plan p0 = p;
    p0.deepspeed.zero.stage = 0;
    p0.deepspeed.zero.offloadOptimizer = {};
    const RunOut base = run(p0, c.world);
    INFO(
        fmt::format("world {} gas {} padded vocab {} offload {} clip {} bf16 {}: vs stage 0 worst "
                    "loss {:.3g}, weights {:.3g}",
                    c.world, c.gas, c.padded, c.offload, c.clip, c.bf16, worstLoss(rows, base),
                    worstWeight(rows, base)));
    INFO(fmt::format("by rows vs whole: worst loss {:.3g}, weights {:.3g}", worstLoss(rows, whole),
                     worstWeight(rows, whole)));
    CHECK(worstLoss(rows, whole) <= kRowsLossRel);
    CHECK(worstWeight(rows, whole) <= kRowsWeightRel);
    CHECK(rows.skipped == whole.skipped);
    if (c.fp16) CHECK(std::count(rows.skipped.begin(), rows.skipped.end(), true) >= 2);
    CHECK(rows.losses.back() < rows.losses.front());
    // And stage 0 (summation order: trainer_multirank_test.cc's band).
    if (!c.fp16) CHECK(worstLoss(rows, base) <= (c.bf16 ? 1e-2 : kLossRel));
  }
}

TEST_CASE("trainer: at stage 2 no buffer holds wte's full gradient", "[multirank]") {
  Plan p = test::gptPlan(2, 2, 1, 2);
  p.model.vocabSize = 2048;                  // wte 2048 x 32: five times a layer
  p.deepspeed.zero.reduceBucketSize = 1000;  // buckets out of the way
  const size_t wte = 2048 * 32 * sizeof(float);
  const RunOut rows = run(p, 2);
  const RunOut whole = runKnobOff("DS_ZERO2_GRAD_BY_ROWS", p, 2);
  INFO("stage-2 buffers: by rows " << buffersOf(rows) << " B, whole " << buffersOf(whole)
                                   << " B; wte " << wte << " B");
  CHECK(buffersOf(whole) >= wte);
  CHECK(buffersOf(rows) < wte / 2);
  CHECK(worstLoss(rows, whole) <= kRowsLossRel);
}
