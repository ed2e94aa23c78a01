// DeepSpeed's dynamic loss scaler sequences, in the shape of DeepSpeed's
// tests/unit/runtime/half_precision/test_dynamic_loss_scale.py (no overflow, all overflow, some
// overflow with initial_scale_power 8 / 4 and loss_scale_window 2), for the ZeRO-path scaler
// (loss_scaler.py DynamicLossScaler: hysteresis, raise at min scale).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/error.h"
#include "runtime/optim/loss_scaler.h"

using namespace ds::runtime;

namespace {
LossScaler dynamicScaler(int power, int64_t window, int hysteresis, double minScale = 1) {
  Fp16Config f;
  f.enabled = true;
  f.initialScalePower = power;
  f.lossScaleWindow = window;
  f.hysteresis = hysteresis;
  f.minLossScale = minScale;
  return LossScaler(lossScalerOptionsFor(f));
}
}  // namespace

TEST_CASE("loss scaler: documented fp16 defaults", "[unit]") {
  Fp16Config f;
  f.enabled = true;
  auto o = lossScalerOptionsFor(f);
  CHECK(o.dynamic);
  CHECK(o.initScale == 65536.0);
  CHECK(o.scaleWindow == 1000);
  CHECK(o.delayedShift == 2);
  CHECK(o.minScale == 1.0);
  f.lossScale = 128;
  auto s = lossScalerOptionsFor(f);
  CHECK_FALSE(s.dynamic);
  CHECK(s.initScale == 128.0);
  CHECK(lossScalerOptionsFor(Fp16Config{}).initScale == 1.0);  // fp16 off: static 1
}

TEST_CASE("loss scaler: no overflow doubles every window steps", "[unit]") {
  auto s = dynamicScaler(8, 2, 2);
  double expected = 256;
  REQUIRE(s.scale() == expected);
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(s.update(false));
    // A clean step doubles when (iter - last_overflow_iter) is a multiple of the window, with
    // last_overflow_iter = -1 at the start: iterations 1, 3, 5, ... (the 2nd, 4th, ... step).
    if ((i + 1) % 2 == 0) expected *= 2;
    CHECK(s.scale() == expected);
    CHECK(s.curIter() == i + 1);
  }
  CHECK(s.scale() == 256.0 * 32);
}

TEST_CASE("loss scaler: all overflow halves down to min, then raises", "[unit]") {
  auto s = dynamicScaler(4, 2, 1, 0.25);
  double expected = 16;
  for (int i = 0; i < 6; ++i) {
    CHECK(s.update(true));  // skip
    expected = std::max(expected / 2, 0.25);
    CHECK(s.scale() == expected);
    CHECK(s.curIter() == i + 1);
  }
  REQUIRE(s.scale() == 0.25);
  try {
    s.update(true);
    FAIL("no error at minimum scale");
  } catch (const ds::Error& e) {
    CHECK(std::string(e.what()) ==
          "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
  }
}

TEST_CASE("loss scaler: some overflow (DeepSpeed's mixed sequence)", "[unit]") {
  auto s = dynamicScaler(8, 2, 1);
  double expected = 256;
  int64_t iter = 0;
  for (int k = 0; k < 2; ++k) s.update(true);
  iter += 2;
  expected /= 4;
  CHECK(s.scale() == expected);
  CHECK(s.curIter() == iter);
  for (int k = 0; k < 3; ++k) s.update(false);  // window + 1 clean steps: one doubling
  iter += 3;
  expected *= 2;
  CHECK(s.scale() == expected);
  CHECK(s.curIter() == iter);
  s.update(true);
  expected /= 2;
  CHECK(s.scale() == expected);
  CHECK(s.curIter() == iter + 1);
}

TEST_CASE("loss scaler: hysteresis delays the halving", "[unit]") {
  auto s = dynamicScaler(16, 1000, 2);
  CHECK(s.update(true));
  CHECK(s.scale() == 65536.0);  // first overflow only spends hysteresis
  CHECK(s.curHysteresis() == 1);
  CHECK(s.lastMessage() ==
        "OVERFLOW! Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing "
        "hysteresis to 1");
  CHECK(s.update(true));
  CHECK(s.scale() == 32768.0);
  CHECK(s.lastMessage() ==
        "OVERFLOW! Skipping step. Attempted loss scale: 65536, reducing to 32768");
  // Not consecutive: a clean step does not refill hysteresis until the window passes.
  s.update(false);
  CHECK(s.curHysteresis() == 1);
  s.update(true);
  CHECK(s.scale() == 16384.0);
}

TEST_CASE("loss scaler: consecutive_hysteresis refills on every clean step", "[unit]") {
  Fp16Config f;
  f.enabled = true;
  f.consecutiveHysteresis = true;
  LossScaler s(lossScalerOptionsFor(f));
  s.update(true);
  CHECK(s.curHysteresis() == 1);
  s.update(false);
  CHECK(s.curHysteresis() == 2);
  s.update(true);
  CHECK(s.scale() == 65536.0);
}

TEST_CASE("loss scaler: static scale never changes; state round-trips", "[unit]") {
  Fp16Config f;
  f.enabled = true;
  f.lossScale = 512;
  LossScaler s(lossScalerOptionsFor(f));
  CHECK(s.update(true));
  CHECK_FALSE(s.update(false));
  CHECK(s.scale() == 512.0);
  auto d = dynamicScaler(8, 2, 2);
  d.update(true);
  d.update(false);
  auto st = d.state();
  auto e = dynamicScaler(8, 2, 2);
  e.setState(st);
  for (int i = 0; i < 5; ++i) {
    bool o = i == 3;
    d.update(o);
    e.update(o);
    CHECK(d.scale() == e.scale());
  }
}
