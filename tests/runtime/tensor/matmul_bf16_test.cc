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

TEST_CASE("bf16 linear routing switch: off forces the widen path, on follows the CPU", "[unit]") {
  ds::runtime::setBf16LinearNative(false);
  REQUIRE_FALSE(ds::runtime::bf16LinearNative());
  ds::runtime::setBf16LinearNative(true);
  REQUIRE(ds::runtime::bf16LinearNative() == ds::runtime::bf16GemmNativeAvailable());
}
