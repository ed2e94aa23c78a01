// Trainer numerics against independent references: gradient accumulation (gas 1/2/4 at the same
// global batch), the reported global gradient norm (1 and 2 ranks), clipping scaling the update
// by clip/norm, and fp16 mode overflowing exactly where fp16 gradients would (Fp16Hooks on a
// hand-made table; fp16 GPT-2 at stages 0 and 3 tracking fp32).
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"
#include "tests/runtime/engine/reference_grad.h"

using namespace ds;
using namespace ds::runtime;

namespace {

std::vector<double> losses(const Plan& p) {
  TrainerOptions o;
  o.out = nullptr;
  Trainer t(p, nullptr, o);
  std::vector<double> v;
  for (const auto& r : t.run().steps) v.push_back(r.loss);
  return v;
}

Plan withGas(Plan p, int gas) {
  p.deepspeed.gradientAccumulationSteps = gas;
  p.deepspeed.microBatchPerGpu = p.deepspeed.trainBatchSize / (gas * p.worldSize);
  return p;
}

}  // namespace

// Tolerance 1e-5 relative, the same argument as for data parallelism (trainer_multirank_test):
// every micro-step's mean loss is scaled by 1/gas (a power of two here, exact), so gas micro-steps
// sum the same per-sequence gradient terms as one micro-batch of the whole global batch, only in
// another order (per-micro GEMMs, then += into the accumulator): a few fp32 ulps per step
// (~1e-7 relative), which Adam may amplify while its second moment is tiny. A wrong accumulation
// (missing 1/gas, a dropped or repeated micro-batch, zeroing between micro-steps) moves the loss
// by > 1e-2 within a few steps. Measured: at most 5.7e-8 relative (MLP 15 steps, GPT-2 10 steps).
TEST_CASE("trainer: gas 1, 2 and 4 at the same train_batch_size give the same losses", "[unit]") {
  for (std::string kind : {"mlp", "gpt2"}) {
    Plan base = kind == "mlp" ? test::mlpPlan(1, 0, 1, 15) : test::gptPlan(1, 0, 1, 10);
    auto one = losses(withGas(base, 1));
    CHECK(one.back() < one.front());
    for (int gas : {2, 4}) {
      auto got = losses(withGas(base, gas));
      REQUIRE(got.size() == one.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, test::relDiff(got[i], one[i]));
      std::printf("gas %d vs 1 (%s): worst relative loss difference %.3g\n", gas, kind.c_str(),
                  worst);
      INFO(kind << " gas " << gas << ": worst relative loss difference " << worst);
      CHECK(worst <= 1e-5);
    }
  }
}

// The engine's norm (sum over ranks, / world, / loss scale) against the L2 norm of a gradient
// computed on plain buffers without the engine. Same sums in another order: 1e-5 relative
// (measured 3.6e-8, the float rounding of the reported norm).
TEST_CASE("trainer: the reported grad norm is the global L2 norm of the step's gradient",
          "[multirank]") {
  for (std::string kind : {"mlp", "gpt2"}) {
    Plan p = kind == "mlp" ? test::mlpPlan(1, 0, 1, 1) : test::gptPlan(1, 0, 1, 1);
    p.deepspeed.gradientClipping = 0;
    const double want = test::referenceGrad(p).norm();
    REQUIRE(want > 0);
    for (int world : {1, 2}) {
      for (int stage : {0, 2}) {
        Plan q = withGas(p, 1);
        q.worldSize = world;
        q = withGas(q, world == 1 ? 1 : 2);  // two micro-steps per rank at world 2
        q.deepspeed.zero.stage = stage;
        std::mutex mu;
        double got = -1;
        test::withRanks(world, [&](int rank, comm::ProcessGroup* g) {
          TrainerOptions o;
          o.out = nullptr;
          Trainer t(q, g, o);
          auto rec = t.trainStep();
          if (rank == 0) {
            std::lock_guard<std::mutex> lock(mu);
            got = rec.gradNorm;
          }
        });
        std::printf("grad norm %s world %d stage %d: %.9g vs reference %.9g (rel %.3g)\n",
                    kind.c_str(), world, stage, got, want, test::relDiff(got, want));
        INFO(kind << " world " << world << " stage " << stage << ": norm " << got << " want "
                  << want);
        CHECK(test::relDiff(got, want) < 1e-5);
      }
    }
  }
}

// SGD without momentum or decay moves every weight by -lr * g / c, c = max(1, (norm + 1e-6) /
// clip) (DeepSpeed's coefficient), so with clip = norm / 4 the update is the unclipped one scaled
// by clip / norm, and its L2 length is lr * clip.
TEST_CASE("trainer: gradient clipping scales the update by clip / norm", "[unit]") {
  Plan p = withGas(test::mlpPlan(1, 0, 1, 1), 2);
  p.deepspeed.optimizer.type = "SGD";
  p.deepspeed.optimizer.lr = 0.5f;
  p.deepspeed.optimizer.weightDecay = 0;
  p.deepspeed.optimizer.momentum = 0;
  const auto ref = test::referenceGrad(p);
  const double norm = ref.norm(), lr = 0.5;
  for (double clip : {0.0, norm / 4}) {
    p.deepspeed.gradientClipping = clip;
    TrainerOptions o;
    o.out = nullptr;
    Trainer t(p, nullptr, o);
    auto rec = t.trainStep();
    REQUIRE_FALSE(rec.skipped);
    CHECK(test::relDiff(rec.gradNorm, norm) < 1e-5);  // reported before clipping
    auto after = t.fullParams();
    REQUIRE(after.size() == ref.params.size());
    const double c = clip > 0 ? std::max(1.0, (norm + 1e-6) / clip) : 1.0;
    double worst = 0, len2 = 0, scale = 0;
    for (size_t i = 0; i < after.size(); ++i) {
      const double d = double(after[i]) - double(ref.params[i]);
      const double want = -lr * double(ref.grad[i]) / c;
      worst = std::max(worst, std::fabs(d - want));
      len2 += d * d;
      scale = std::max(scale, std::fabs(want));
    }
    std::printf("clip %g norm %g: worst update error %.3g (max update %.3g), |update| %.6g\n", clip,
                norm, worst, scale, std::sqrt(len2));
    INFO("clip " << clip << " norm " << norm << ": worst update error " << worst << " of max "
                 << scale);
    // fp32 parameter rounding (|p| <= ~0.1: ulp ~ 7e-9) plus gradient summation order.
    CHECK(worst <= 1e-6 + 1e-4 * scale);
    CHECK(test::relDiff(std::sqrt(len2), lr * norm / c) < 1e-3);
    if (clip > 0) CHECK(std::sqrt(len2) == Approx(lr * clip).epsilon(1e-3));
  }
}

// fp16 mode rounds the gradients to fp16, so a step overflows iff some scaled gradient reaches
// 65520 (it rounds to inf; 65504 is fp16's largest finite value) - far below fp32's 3.4e38. At an
// initial scale of 2^40 the MLP's scaled gradients (~1e-2 x 2^40 ~ 1e10, finite in fp32)
// overflow: the first step only spends hysteresis, then the scale halves each skipped step until
// the scaled gradients fit. Skipped steps do not update, so every step until the first good one
// sees the initial weights; the reference gradient of that step's batch shows the boundary is
// fp16's: scale * max|g| >= 65520 at the last skipped step, < 65520 at the first good one.
// Measured: 23 skipped steps, 2^19 x 0.154 = 80849 overflowed, 2^18 x 0.164 = 42955 did not.
TEST_CASE("trainer: fp16 skips and scales down exactly where fp16 gradients overflow", "[unit]") {
  Plan p = withGas(test::mlpPlan(1, 0, 1, 30), 1);
  p.deepspeed.fp16.enabled = true;
  p.deepspeed.fp16.initialScalePower = 40;
  TrainerOptions o;
  o.out = nullptr;
  Trainer t(p, nullptr, o);
  const auto& s = t.run();
  size_t firstGood = 0;
  while (firstGood < s.steps.size() && s.steps[firstGood].skipped) ++firstGood;
  INFO("first good step index " << firstGood);
  REQUIRE(firstGood >= 2);
  REQUIRE(firstGood < s.steps.size());
  CHECK(s.steps[0].lossScale == std::ldexp(1.0, 40));
  CHECK(s.steps[1].lossScale == std::ldexp(1.0, 40));  // hysteresis 2: the first overflow waits
  for (size_t i = 2; i <= firstGood; ++i)
    CHECK(s.steps[i].lossScale == s.steps[i - 1].lossScale / 2);
  for (size_t i = firstGood; i < s.steps.size(); ++i) CHECK_FALSE(s.steps[i].skipped);
  const double bad = s.steps[firstGood - 1].lossScale, good = s.steps[firstGood].lossScale;
  const double maxBad = test::referenceGrad(p, int(firstGood - 1), true).maxAbs();
  const double maxGood = test::referenceGrad(p, int(firstGood), true).maxAbs();
  std::printf(
      "fp16 2^40: %zu skipped; last skipped scale %g x max|g| %g = %g; first good %g x "
      "%g = %g\n",
      firstGood, bad, maxBad, bad * maxBad, good, maxGood, good * maxGood);
  INFO("last skipped: scale " << bad << " x max|g| " << maxBad << " = " << bad * maxBad
                              << "; first good: scale " << good << " x " << maxGood << " = "
                              << good * maxGood);
  CHECK(bad * maxBad >= 65520.0);
  CHECK(bad * maxBad < double(FLT_MAX) / 1e20);  // nowhere near fp32's overflow
  CHECK(good * maxGood < 65520.0);
  CHECK(s.steps.back().loss < s.steps[firstGood].loss);
}

TEST_CASE("roundToFp16 equals the _Float16 conversion, overflow and subnormals included",
          "[unit]") {
  std::vector<float> x = {0.f,      -0.f,     1.f,     0.1f,           -0.1f,
                          65504.f,  65519.f,  65520.f, -65520.f,       1e6f,
                          3e38f,    6.1e-5f,  6.0e-5f, 3e-8f,          2.98e-8f,
                          5.96e-8f, 1e-9f,    -1e-7f,  1.00048828125f, 1.000732421875f,
                          INFINITY, -INFINITY};
  uint32_t state = 12345;
  for (int i = 0; i < 20000; ++i) {  // random bit patterns over the whole fp32 range
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, 4);
    if (std::isfinite(f)) x.push_back(f);
    x.push_back(std::ldexp(float(state % 4096) / 4096.f, int(state % 48) - 30));
  }
  std::vector<float> y = x;
  roundToFp16(y.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = float(static_cast<_Float16>(x[i]));
    INFO("x = " << x[i]);
    REQUIRE(std::memcmp(&y[i], &want, 4) == 0);
  }
  float nan = NAN;
  roundToFp16(&nan, 1);
  CHECK(std::isnan(nan));
  CHECK(y[6] == 65504.f);
  CHECK(std::isinf(y[7]));
}

namespace {
// Records what the model would see: the value pointer of each param when the owner's hook runs.
struct OwnerHooks : zero::BlockHooks {
  zero::ParamTable* t = nullptr;
  std::vector<std::string> calls;
  void note(const char* what, int b) {
    calls.push_back(std::string(what) + std::to_string(b) +
                    (t->value[0] == owned0 ? "=own" : "=copy"));
  }
  void beforeForward(int b) override { note("bf", b); }
  void afterForward(int b) override { note("af", b); }
  void beforeBackward(int b) override { note("bb", b); }
  void afterBackward(int b) override {
    grad1AtOwner = t->grad[1][0];
    note("ab", b);
  }
  float* owned0 = nullptr;
  float grad1AtOwner = 0;
};
}  // namespace

// Param 0 is used by blocks 0 and 1 (tied, like wte), param 1 by block 1. Inside a block the model
// reads rounded copies; the owner's hooks always see (and keep) their own pointers; gradients
// reach the owner rounded to fp16 (70000 -> inf, 1e-9 -> 0).
TEST_CASE("Fp16Hooks: rounded weight copies inside a block, fp16 gradients to the owner",
          "[unit]") {
  std::vector<float> w0 = {0.1f, 1.0f, 70000.f}, w1 = {3.14159f}, g0 = {0, 0, 0}, g1 = {0};
  zero::ParamTable t;
  t.value = {w0.data(), w1.data()};
  t.value16 = {nullptr, nullptr};
  t.grad = {g0.data(), g1.data()};
  std::vector<zero::ParamInfo> params(2);
  params[0].numel = 3;
  params[0].blocks = {0, 1};
  params[1].numel = 1;
  params[1].blocks = {1};
  OwnerHooks owner;
  owner.t = &t;
  owner.owned0 = w0.data();
  Fp16Hooks h(
      owner, [&]() -> zero::ParamTable& { return t; }, params, 2);
  h.beforeForward(0);
  REQUIRE(t.value[0] != w0.data());
  CHECK(t.value[0][0] == float(static_cast<_Float16>(0.1f)));
  CHECK(t.value[0][1] == 1.0f);
  CHECK(std::isinf(t.value[0][2]));  // a weight beyond fp16's range is inf, as in fp16
  CHECK(t.value[1] == w1.data());    // block 1's own param is not touched in block 0
  h.afterForward(0);
  CHECK(t.value[0] == w0.data());
  CHECK(w0[0] == 0.1f);  // the master is unchanged
  h.beforeBackward(1);
  CHECK(t.value[1][0] == float(static_cast<_Float16>(3.14159f)));
  t.grad[1][0] = 70000.f;
  t.grad[0][0] = 1e-9f;
  t.grad[0][1] = 0.1f;
  h.afterBackward(1);
  CHECK(std::isinf(owner.grad1AtOwner));
  CHECK(std::isinf(g1[0]));
  CHECK(g0[0] == 0.f);
  CHECK(g0[1] == float(static_cast<_Float16>(0.1f)));
  CHECK(t.value[1] == w1.data());
  CHECK(owner.calls == std::vector<std::string>{"bf0=own", "af0=own", "bb1=own", "ab1=own"});
  h.beforeForward(0);
  CHECK_THROWS_WITH(h.beforeForward(1), Catch::Contains("block 1 entered while block 0"));
}

// GPT-2 (tied embedding in blocks 0 and L+1) at stages 0 and 3 in fp16 tracks fp32 like the MLP.
TEST_CASE("trainer: fp16 GPT-2 at stages 0 and 3 tracks fp32 without skipping", "[unit]") {
  for (int stage : {0, 3}) {
    Plan p = test::gptPlan(1, stage, 2, 8);
    auto fp32 = losses(p);
    p.deepspeed.fp16.enabled = true;
    TrainerOptions o;
    o.out = nullptr;
    Trainer t(p, nullptr, o);
    const auto& s = t.run();
    REQUIRE(s.steps.size() == fp32.size());
    double worst = 0;
    for (size_t i = 0; i < fp32.size(); ++i) {
      CHECK_FALSE(s.steps[i].skipped);
      worst = std::max(worst, test::relDiff(s.steps[i].loss, fp32[i]));
    }
    std::printf("fp16 GPT-2 stage %d vs fp32: worst relative loss difference %.3g\n", stage, worst);
    INFO("stage " << stage << " worst " << worst);
    CHECK(worst < 1e-3);
    CHECK(worst > 0);
  }
}
