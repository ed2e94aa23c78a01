// The trainer's device path (runtime/engine: the device engine for stages 0-3, the host engine
// with the device mirror for offload, the op models) driven over the CPU ops
// (TrainerOptions::ops), so the whole wiring the GPU runs is checked on every machine: the same
// losses as the host path, checkpoints that resume the same trajectory and move between the two
// paths, and 2 ranks over gloo. scripts/gpu_check.sh runs the same plans on a real GPU.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/trainer.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/engine/engine_fixtures.h"
#include "tests/support/scoped_knob.h"
#include "tests/support/skip.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::TempDir;

namespace {

std::vector<double> lossesOf(const RunSummary& s) {
  std::vector<double> v;
  for (const auto& r : s.steps) v.push_back(r.loss);
  return v;
}

double maxRel(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, test::relDiff(a[i], b[i]));
  return worst;
}

// Losses of rank 0 for `plan` on `world` gloo thread ranks; onOps: every rank on its CPU ops.
std::vector<double> train(const Plan& plan, int world, bool onOps, TrainerOptions o = {}) {
  std::vector<double> losses;
  test::withRanks(world, [&](int rank, comm::ProcessGroup* group) {
    auto ops = makeCpuOps();
    TrainerOptions mine = o;
    mine.out = nullptr;
    if (onOps) mine.ops = ops.get();
    Trainer t(plan, group, mine);
    auto l = lossesOf(t.run());
    if (rank == 0) losses = l;
  });
  return losses;
}

// Losses of rank 0 for `plan` on `world` gloo thread ranks, every rank on its own CUDA ops on
// device 0 (gloo stages the device buffers through pinned memory).
std::vector<double> trainOnCuda(const Plan& plan, int world) {
  std::vector<double> losses;
  test::withRanks(world, [&](int rank, comm::ProcessGroup* group) {
    auto ops = makeCudaOps(0);
    TrainerOptions o;
    o.out = nullptr;
    o.ops = ops.get();
    Trainer t(plan, group, o);
    auto l = lossesOf(t.run());
    if (rank == 0) losses = l;
  });
  return losses;
}

}  // namespace

TEST_CASE("trainer on the device path (cpu ops) matches the host path at every stage", "[unit]") {
  for (int stage : {0, 1, 2, 3}) {
    for (bool ckpt : {false, true}) {
      INFO("stage " << stage << " activation checkpointing " << ckpt);
      Plan p = test::gptPlan(1, stage, 2, 6);
      p.deepspeed.activationCheckpointing = ckpt;
      p.model.activationCheckpointing = ckpt;
      const auto host = train(p, 1, false);
      const auto dev = train(p, 1, true);
      CHECK(maxRel(dev, host) < 1e-5);
      CHECK(dev.back() < dev.front());
    }
  }
}

TEST_CASE("trainer on the device path: offload and 2 ranks over gloo match the host path",
          "[multirank]") {
  SECTION("stage 2 with offload_optimizer cpu (host engine + mirror)") {
    Plan p = test::gptPlan(1, 2, 2, 6);
    p.deepspeed.zero.offloadOptimizer.device = "cpu";
    CHECK(maxRel(train(p, 1, true), train(p, 1, false)) < 1e-5);
  }
  SECTION("2 ranks, stages 0-3") {
    for (int stage : {0, 1, 2, 3}) {
      INFO("stage " << stage);
      Plan p = test::gptPlan(2, stage, 2, 5);
      CHECK(maxRel(train(p, 2, true), train(p, 2, false)) < 1e-5);
    }
  }
}

TEST_CASE("trainer on the device path: checkpoints resume it and move to and from the host path",
          "[unit]") {
  for (int stage : {0, 2, 3}) {
    INFO("stage " << stage);
    TempDir dir;
    Plan p = test::gptPlan(1, stage, 2, 8);
    p.train.checkpointDir = dir.path();
    p.train.checkpointEvery = 4;
    const auto full = train(p, 1, true);
    REQUIRE(full.size() == 8);
    TrainerOptions o;
    o.resume = "global_step4";
    // The device path resumes its own checkpoint on the same trajectory.
    const auto resumed = train(p, 1, true, o);
    REQUIRE(resumed.size() == 4);
    for (size_t i = 0; i < 4; ++i) CHECK(test::relDiff(resumed[i], full[4 + i]) < 1e-6);
    // And the host path continues from it (and from the host path's own, below) alike.
    const auto onHost = train(p, 1, false, o);
    for (size_t i = 0; i < 4; ++i) CHECK(test::relDiff(onHost[i], full[4 + i]) < 1e-5);
  }
  // A host-path checkpoint loads into the device path.
  TempDir dir;
  Plan p = test::gptPlan(1, 1, 2, 8);
  p.train.checkpointDir = dir.path();
  p.train.checkpointEvery = 4;
  const auto full = train(p, 1, false);
  TrainerOptions o;
  o.resume = "global_step4";
  const auto onOps = train(p, 1, true, o);
  REQUIRE(onOps.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(test::relDiff(onOps[i], full[4 + i]) < 1e-5);
}

TEST_CASE("trainer on the device path refuses fp16 with offload, naming the key", "[unit]") {
  Plan p = test::gptPlan(1, 2, 1, 2);
  p.deepspeed.fp16.enabled = true;
  p.deepspeed.zero.offloadOptimizer.device = "cpu";
  auto ops = makeCpuOps();
  TrainerOptions o;
  o.out = nullptr;
  o.ops = ops.get();
  CHECK_THROWS_WITH(Trainer(p, nullptr, o), Catch::Contains("fp16") && Catch::Contains("cpu") &&
                                                Catch::Contains("offload_optimizer"));
}

TEST_CASE("trainer on cuda ops: ZeRO stage 3 on the device engine, 1 and 2 ranks", "[gpu]") {
  try {
    makeCudaOps(0);
  } catch (const Error& e) {
    DS_SKIP(std::string("no CUDA device: ") + e.what());
  }
  for (int world : {1, 2}) {
    INFO("world " << world);
    // fp32 (no TF32) against the host path on the CPU, as scripts/gpu_check.sh's 1e-4.
    Plan p = test::gptPlan(world, 3, 2, 6);
    p.train.tf32 = false;
    CHECK(maxRel(trainOnCuda(p, world), train(p, world, false)) < 1e-4);
    // bf16: stage 3 against stage 2 on the same device (only the reduction order differs).
    p.deepspeed.bf16 = true;
    Plan s2 = p;
    s2.deepspeed.zero.stage = 2;
    CHECK(maxRel(trainOnCuda(p, world), trainOnCuda(s2, world)) < 1e-3);
  }
}

namespace {

using test::ScopedKnob;

struct Trained {
  std::vector<double> losses;
  std::vector<float> params;  // the fp32 master after the last step
};

// One rank on its own ops (CUDA device 0, or the CPU ops), the optimizer overlap on or off, in
// tiles of 1024 elements (the small plans have tens of thousands of parameters).
Trained trainOverlap(const Plan& plan, bool overlap, bool cuda) {
  ScopedKnob on("DS_OFFLOAD_OVERLAP", overlap ? "1" : "0");
  ScopedKnob tile("DS_OFFLOAD_OVERLAP_TILE", "1024");
  auto ops = cuda ? makeCudaOps(0) : makeCpuOps();
  TrainerOptions o;
  o.out = nullptr;
  o.ops = ops.get();
  Trainer t(plan, nullptr, o);
  Trained r;
  r.losses = lossesOf(t.run());
  r.params = t.fullParams();
  return r;
}

struct OffloadCase {
  const char* name;
  int stage;
  bool offloadParam;
  bool bf16;
};

Plan offloadPlan(const OffloadCase& c, int64_t steps) {
  Plan p = test::gptPlan(1, c.stage, 1, steps);
  p.deepspeed.zero.offloadOptimizer.device = "cpu";
  if (c.offloadParam) p.deepspeed.zero.offloadParam.device = "cpu";
  p.deepspeed.bf16 = c.bf16;
  p.train.tf32 = false;
  return p;
}

constexpr OffloadCase kOffloadCases[] = {{"s2+oo fp32", 2, false, false},
                                         {"s3+oo+op fp32", 3, true, false},
                                         {"s2+oo bf16", 2, false, true},
                                         {"s3+oo+op bf16", 3, true, true}};

}  // namespace

TEST_CASE("trainer on the device path (cpu ops): the offload overlap trains the same bits",
          "[unit]") {
  for (const auto& c : kOffloadCases) {
    if (c.bf16) continue;  // the CPU ops compute in fp32 (bf16 on the CPU is Gpt2Model's)
    INFO(c.name);
    const Plan p = offloadPlan(c, 4);
    const Trained off = trainOverlap(p, false, false), on = trainOverlap(p, true, false);
    CHECK(on.losses == off.losses);
    CHECK(on.params == off.params);
  }
}

TEST_CASE("trainer on cuda ops: the offload overlap trains the same bits (s2+oo, s3+oo+op)",
          "[gpu]") {
  try {
    makeCudaOps(0);
  } catch (const Error& e) {
    DS_SKIP(std::string("no CUDA device: ") + e.what());
  }
  for (const auto& c : kOffloadCases) {
    INFO(c.name);
    const Plan p = offloadPlan(c, 5);
    const Trained off = trainOverlap(p, false, true), on = trainOverlap(p, true, true);
    const Trained again = trainOverlap(p, false, true);  // the GPU's own run-to-run spread
    if (again.losses != off.losses || again.params != off.params) {
      // Kernels that are not bitwise deterministic: hold the overlap to their spread instead.
      const double spread = maxRel(again.losses, off.losses);
      WARN(c.name << ": overlap off is not bitwise repeatable on this GPU (losses spread " << spread
                  << "); overlap on vs off " << maxRel(on.losses, off.losses));
      CHECK(maxRel(on.losses, off.losses) <= 2 * spread + 1e-6);
      continue;
    }
    CHECK(on.losses == off.losses);
    CHECK(on.params == off.params);
    WARN(c.name << ": offload overlap on == off bitwise over " << off.losses.size()
                << " steps (losses and fp32 master), last loss " << off.losses.back());
  }
}
