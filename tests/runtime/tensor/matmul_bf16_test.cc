// The bf16 linear layer (matmul_bf16.h) against fp64 sums of the same bf16-rounded operands:
// forward out = bias + inp . W^T, backward dinp += dout . W, dW += dout^T . inp (both accumulate),
// dbias += column sums of the unrounded fp32 dout. Tolerance as in bf16_gemm_test.cc: the products
// of bf16 values are exact in fp32, so only fp32 summation error remains, bounded by
// gamma_{n+1} * (sum |terms| + |initial value|) with n the summed length, u = 2^-24.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/env.h"
#include "core/error.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/matmul_bf16.h"

namespace {

double r16(float x) { return ds::bf16ToFloat(ds::floatToBf16(x)); }

std::vector<float> randomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// |got - ref| <= gamma_{n+1} * mag, mag = sum |terms| + |initial|.
void requireWithin(double got, double ref, double mag, int n, const char* what, int i) {
  const double g = (n + 1) * std::ldexp(1.0, -24);
  INFO(what << "[" << i << "] got " << got << " ref " << ref);
  REQUIRE(std::fabs(got - ref) <= g / (1 - g) * mag + 1e-30);
}

}  // namespace

TEST_CASE("bf16 linear forward/backward match fp64 sums of the bf16-rounded operands", "[unit]") {
  const int N = 37, C = 71, OC = 53;
  auto inp = randomVec(N * C, 1), wf = randomVec(OC * C, 2), bias = randomVec(OC, 3);
  auto dout = randomVec(N * OC, 4);
  std::vector<ds::bf16> w(OC * C);
  for (size_t i = 0; i < w.size(); ++i) w[i] = ds::floatToBf16(wf[i]);
  auto W = [&](int o, int c) { return double(ds::bf16ToFloat(w[o * C + c])); };

  std::vector<float> out(N * OC);
  ds::runtime::matmulForwardBf16(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      double ref = bias[o], mag = std::fabs(bias[o]);
      for (int c = 0; c < C; ++c) {
        const double t = r16(inp[n * C + c]) * W(o, c);
        ref += t;
        mag += std::fabs(t);
      }
      requireWithin(out[n * OC + o], ref, mag, C, "out", n * OC + o);
    }
  }

  auto dinp = randomVec(N * C, 5), dw = randomVec(OC * C, 6), db = randomVec(OC, 7);
  const auto dinp0 = dinp, dw0 = dw, db0 = db;
  ds::runtime::matmulBackwardBf16(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                                  w.data(), N, C, OC);
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < C; ++c) {
      double ref = dinp0[n * C + c], mag = std::fabs(ref);
      for (int o = 0; o < OC; ++o) {
        const double t = r16(dout[n * OC + o]) * W(o, c);
        ref += t;
        mag += std::fabs(t);
      }
      requireWithin(dinp[n * C + c], ref, mag, OC, "dinp", n * C + c);
    }
  }
  for (int o = 0; o < OC; ++o) {
    for (int c = 0; c < C; ++c) {
      double ref = dw0[o * C + c], mag = std::fabs(ref);
      for (int n = 0; n < N; ++n) {
        const double t = r16(dout[n * OC + o]) * r16(inp[n * C + c]);
        ref += t;
        mag += std::fabs(t);
      }
      requireWithin(dw[o * C + c], ref, mag, N, "dweight", o * C + c);
    }
    double ref = db0[o], mag = std::fabs(ref);
    for (int n = 0; n < N; ++n) {
      ref += dout[n * OC + o];
      mag += std::fabs(dout[n * OC + o]);
    }
    requireWithin(db[o], ref, mag, N, "dbias", o);
  }
  // null outputs are skipped
  ds::runtime::matmulBackwardBf16(nullptr, nullptr, nullptr, dout.data(), inp.data(), w.data(), N,
                                  C, OC);
}

TEST_CASE("bf16 linear routing switch: off forces the widen path, on follows the choice",
          "[unit]") {
  ds::runtime::setBf16LinearNative(false);
  REQUIRE_FALSE(ds::runtime::bf16LinearNative());
  ds::runtime::setBf16LinearNative(true);
  const auto choice = ds::runtime::bf16LinearChoice();
  REQUIRE(ds::runtime::bf16LinearNative() == (choice == ds::runtime::Bf16Linear::kNative));
  if (!ds::runtime::bf16GemmNativeAvailable()) REQUIRE(choice == ds::runtime::Bf16Linear::kWiden);
  REQUIRE(ds::runtime::bf16LinearChoice() == choice);  // made once per process
}

TEST_CASE("bf16 linear choice: the faster measured path, widen on ties", "[unit]") {
  using ds::runtime::Bf16Linear;
  using ds::runtime::pickBf16Linear;
  // The two machines of issue 4, as seconds per 512x3072x768 product at their GFLOP/s.
  const double flop = 2.0 * 512 * 3072 * 768;
  REQUIRE(pickBf16Linear({flop / 101.2e9, flop / 177.9e9}) == Bf16Linear::kWiden);  // Xeon
  REQUIRE(pickBf16Linear({flop / 300e9, flop / 100e9}) == Bf16Linear::kNative);     // Zen 4
  REQUIRE(pickBf16Linear({1e-3, 1e-3}) == Bf16Linear::kWiden);
  REQUIRE(pickBf16Linear({0.99e-3, 1e-3}) == Bf16Linear::kNative);
}

TEST_CASE("bf16 linear decision: DS_BF16_LINEAR forces each path, auto measures", "[unit]") {
  using ds::runtime::Bf16Linear;
  using ds::runtime::Bf16LinearTiming;
  using ds::runtime::decideBf16Linear;
  int calls = 0;
  auto nativeFaster = [&] {
    ++calls;
    return Bf16LinearTiming{1e-3, 2e-3};
  };
  auto widenFaster = [&] {
    ++calls;
    return Bf16LinearTiming{2e-3, 1e-3};
  };

  // auto (unset, empty or "auto"): the measured faster path, measured once per decision
  for (const ds::EnvMap& env :
       {ds::EnvMap{}, ds::EnvMap{{"DS_BF16_LINEAR", ""}}, ds::EnvMap{{"DS_BF16_LINEAR", "auto"}}}) {
    calls = 0;
    REQUIRE(decideBf16Linear(true, env, nativeFaster) == Bf16Linear::kNative);
    REQUIRE(decideBf16Linear(true, env, widenFaster) == Bf16Linear::kWiden);
    REQUIRE(calls == 2);
  }
  // forced: against the measurement, which is then not taken
  calls = 0;
  const ds::EnvMap native{{"DS_BF16_LINEAR", "native"}}, widen{{"DS_BF16_LINEAR", "widen"}};
  REQUIRE(decideBf16Linear(true, native, widenFaster) == Bf16Linear::kNative);
  REQUIRE(decideBf16Linear(true, widen, nativeFaster) == Bf16Linear::kWiden);
  REQUIRE(calls == 0);
  // the gemm on AMX: native without measuring (auto), forcing still wins
  REQUIRE(decideBf16Linear(true, {}, widenFaster, true) == Bf16Linear::kNative);
  REQUIRE(decideBf16Linear(true, widen, nativeFaster, true) == Bf16Linear::kWiden);
  REQUIRE(calls == 0);
  // no AVX512-BF16: widen without measuring; forcing native is NotSupported
  REQUIRE(decideBf16Linear(false, {}, nativeFaster) == Bf16Linear::kWiden);
  REQUIRE(decideBf16Linear(false, widen, nativeFaster) == Bf16Linear::kWiden);
  REQUIRE(calls == 0);
  REQUIRE_THROWS_AS(decideBf16Linear(false, native, nativeFaster), ds::NotSupported);
  // anything else names the variable
  REQUIRE_THROWS_WITH(decideBf16Linear(true, {{"DS_BF16_LINEAR", "bf16"}}, nativeFaster),
                      Catch::Contains("DS_BF16_LINEAR='bf16'"));
}

TEST_CASE("bf16 linear probe times both paths", "[unit]") {
  if (!ds::runtime::bf16GemmNativeAvailable()) {
    REQUIRE_THROWS_AS(ds::runtime::measureBf16Linear(), ds::NotSupported);  // kNative refused
    return;
  }
  const auto t = ds::runtime::measureBf16Linear();
  REQUIRE(std::isfinite(t.native));
  REQUIRE(std::isfinite(t.widen));
  REQUIRE(t.native > 0.0);
  REQUIRE(t.widen > 0.0);
}
