// Every tensor kernel's backward against central finite differences of its forward, with the loss
// sum(R * out) for a fixed random R (so d loss / d out = R). Tolerances: see grad_check.h; with
// h = 1e-2 and O(1) inputs, errors are ~1e-4, so atol 2e-3 + rtol 1e-2 leaves margin while a
// wrong term (missing factor, transposed index) gives errors of O(|grad|).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/tensor/attention.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "tests/runtime/tensor/grad_check.h"

using ds::test::checkGradient;
using ds::test::dotLoss;
using ds::test::uniformVec;

namespace {
constexpr float kH = 1e-2f;
constexpr double kAtol = 2e-3, kRtol = 1e-2;

void requireClose(const ds::test::GradCheckResult& r, const char* what) {
  INFO(what << ": probes " << r.probes << " maxAbsErr " << r.maxAbsErr << " relL2 " << r.relL2);
  REQUIRE(r.probes > 0);
  REQUIRE(r.maxExcess <= 0);
  REQUIRE(r.relL2 < 1e-2);
}
}  // namespace

TEST_CASE("matmul backward matches finite differences and accumulates", "[unit]") {
  const int N = 5, C = 7, OC = 6;
  auto inp = uniformVec(N * C, 1.0f, 1), w = uniformVec(OC * C, 1.0f, 2),
       b = uniformVec(OC, 1.0f, 3);
  auto R = uniformVec(N * OC, 1.0f, 4);
  std::vector<float> out(N * OC);
  auto loss = [&] {
    ds::runtime::matmulForward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
    return dotLoss(out.data(), R.data(), out.size());
  };
  // Start the accumulators at 0.5 to prove backward adds rather than overwrites.
  std::vector<float> dinp(N * C, 0.5f), dw(OC * C, 0.5f), db(OC, 0.5f);
  ds::runtime::matmulBackward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(), N,
                              C, OC);
  for (auto* g : {&dinp, &dw, &db})
    for (float& v : *g) v -= 0.5f;
  requireClose(checkGradient(loss, inp.data(), inp.size(), dinp.data(), kH, kAtol, kRtol), "dinp");
  requireClose(checkGradient(loss, w.data(), w.size(), dw.data(), kH, kAtol, kRtol), "dweight");
  requireClose(checkGradient(loss, b.data(), b.size(), db.data(), kH, kAtol, kRtol), "dbias");
  // Null bias and null gradients are allowed.
  std::vector<float> dw2(OC * C, 0.0f);
  ds::runtime::matmulForward(out.data(), inp.data(), w.data(), nullptr, N, C, OC);
  ds::runtime::matmulBackward(nullptr, dw2.data(), nullptr, R.data(), inp.data(), w.data(), N, C,
                              OC);
  for (size_t i = 0; i < dw2.size(); ++i) REQUIRE(dw2[i] == Approx(dw[i]).margin(1e-5));
}

TEST_CASE("layernorm backward matches finite differences", "[unit]") {
  const int N = 4, C = 9;
  auto inp = uniformVec(N * C, 2.0f, 11), w = uniformVec(C, 1.0f, 12), b = uniformVec(C, 1.0f, 13);
  for (float& v : w) v += 1.0f;
  auto R = uniformVec(N * C, 1.0f, 14);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    ds::runtime::layernormForward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(),
                                  b.data(), N, C);
    return dotLoss(out.data(), R.data(), out.size());
  };
  loss();
  // Each row is normalized: mean 0, variance 1 before the affine part (w = 1, b = 0 check).
  std::vector<float> one(C, 1.0f), zero(C, 0.0f), norm(N * C);
  ds::runtime::layernormForward(norm.data(), mean.data(), rstd.data(), inp.data(), one.data(),
                                zero.data(), N, C);
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int i = 0; i < C; ++i) m += norm[n * C + i];
    for (int i = 0; i < C; ++i) v += norm[n * C + i] * norm[n * C + i];
    REQUIRE(m / C == Approx(0).margin(1e-5));
    REQUIRE(v / C == Approx(1).epsilon(1e-3));
  }
  loss();
  std::vector<float> dinp(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  ds::runtime::layernormBackward(dinp.data(), dw.data(), db.data(), R.data(), inp.data(), w.data(),
                                 mean.data(), rstd.data(), N, C);
  requireClose(checkGradient(loss, inp.data(), inp.size(), dinp.data(), kH, kAtol, kRtol), "dinp");
  requireClose(checkGradient(loss, w.data(), w.size(), dw.data(), kH, kAtol, kRtol), "dweight");
  requireClose(checkGradient(loss, b.data(), b.size(), db.data(), kH, kAtol, kRtol), "dbias");
}

TEST_CASE("attention backward matches finite differences; probabilities are causal", "[unit]") {
  const int B = 2, T = 5, C = 8, NH = 2;
  auto qkv = uniformVec(B * T * 3 * C, 1.0f, 21);
  auto R = uniformVec(B * T * C, 1.0f, 22);
  std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(T * T);
  auto loss = [&] {
    ds::runtime::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dotLoss(out.data(), R.data(), out.size());
  };
  loss();
  for (int bh = 0; bh < B * NH; ++bh) {
    for (int t = 0; t < T; ++t) {
      double s = 0;
      for (int j = 0; j < T; ++j) {
        float p = att[(bh * T + t) * T + j];
        if (j > t) REQUIRE(p == 0.0f);
        s += p;
      }
      REQUIRE(s == Approx(1.0).epsilon(1e-5));
    }
  }
  std::vector<float> dqkv(qkv.size(), 0.0f);
  ds::runtime::attentionBackward(dqkv.data(), scratch.data(), R.data(), qkv.data(), att.data(), B,
                                 T, C, NH);
  requireClose(checkGradient(loss, qkv.data(), qkv.size(), dqkv.data(), kH, kAtol, kRtol), "dqkv");
  // Causality in the gradient: the output at t = 0 depends on no later key or value.
  std::vector<float> R0(R.size(), 0.0f), d0(qkv.size(), 0.0f);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < C; ++i) R0[b * T * C + i] = 1.0f;
  ds::runtime::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  ds::runtime::attentionBackward(d0.data(), scratch.data(), R0.data(), qkv.data(), att.data(), B, T,
                                 C, NH);
  for (int b = 0; b < B; ++b)
    for (int t = 1; t < T; ++t)
      for (int i = 0; i < 3 * C; ++i) REQUIRE(d0[(b * T + t) * 3 * C + i] == 0.0f);
}

TEST_CASE("GELU backward matches finite differences and the tanh formula", "[unit]") {
  const size_t n = 200;
  auto x = uniformVec(n, 4.0f, 31), R = uniformVec(n, 1.0f, 32);
  std::vector<float> out(n);
  auto loss = [&] {
    ds::runtime::geluForward(out.data(), x.data(), n);
    return dotLoss(out.data(), R.data(), n);
  };
  loss();
  for (size_t i = 0; i < n; ++i) {
    double v = x[i];
    double ref = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    REQUIRE(out[i] == Approx(ref).margin(1e-6));
  }
  std::vector<float> dx(n, 0.0f);
  ds::runtime::geluBackward(dx.data(), x.data(), R.data(), n);
  requireClose(checkGradient(loss, x.data(), n, dx.data(), kH, kAtol, kRtol), "dgelu");
  // Residual: out = a + b, gradients pass through and accumulate.
  std::vector<float> a(4, 1.0f), b(4, 2.0f), o(4), da(4, 1.0f), db(4, 0.0f), d(4, 3.0f);
  ds::runtime::residualForward(o.data(), a.data(), b.data(), 4);
  ds::runtime::residualBackward(da.data(), db.data(), d.data(), 4);
  REQUIRE(o[3] == 3.0f);
  REQUIRE(da[0] == 4.0f);
  REQUIRE(db[0] == 3.0f);
}

TEST_CASE("softmax cross-entropy backward matches finite differences; ignored rows", "[unit]") {
  const int N = 6, V = 10;
  auto logits = uniformVec(N * V, 3.0f, 41);
  const std::vector<int32_t> targets = {3, 0, -1, 9, 5, 5};
  std::vector<float> work(N * V);
  int valid = 0;
  auto loss = [&] {
    work = logits;
    double sum = ds::runtime::softmaxCrossEntropyForward(work.data(), targets.data(), N, V, &valid);
    return sum / valid;
  };
  const double mean = loss();
  REQUIRE(valid == 5);
  // Reference in double.
  double ref = 0;
  for (int n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double mx = -1e30, s = 0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, double(logits[n * V + j]));
    for (int j = 0; j < V; ++j) s += std::exp(logits[n * V + j] - mx);
    ref += std::log(s) - (logits[n * V + targets[n]] - mx);
  }
  REQUIRE(mean == Approx(ref / 5).epsilon(1e-5));
  std::vector<float> dlogits(N * V, 7.0f);  // backward WRITES
  ds::runtime::softmaxCrossEntropyBackward(dlogits.data(), work.data(), targets.data(), N, V,
                                           1.0f / static_cast<float>(valid));
  for (int j = 0; j < V; ++j) REQUIRE(dlogits[2 * V + j] == 0.0f);
  requireClose(checkGradient(loss, logits.data(), logits.size(), dlogits.data(), kH, kAtol, kRtol),
               "dlogits");
  // Large logits do not overflow: exp is taken after subtracting the row max.
  std::vector<float> big = {1000.0f, 0.0f, -1000.0f};
  const int32_t tg = 2;
  double l = ds::runtime::softmaxCrossEntropyForward(big.data(), &tg, 1, 3, &valid);
  REQUIRE(std::isfinite(l));
  REQUIRE(l == Approx(2000.0).epsilon(1e-6));
}

TEST_CASE("encoder backward matches finite differences with repeated tokens", "[unit]") {
  const int B = 2, T = 3, C = 5, V = 4;
  const std::vector<int32_t> tokens = {1, 3, 1, 0, 1, 3};
  auto wte = uniformVec(V * C, 1.0f, 51), wpe = uniformVec(T * C, 1.0f, 52);
  auto R = uniformVec(B * T * C, 1.0f, 53);
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    ds::runtime::encoderForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dotLoss(out.data(), R.data(), out.size());
  };
  loss();
  REQUIRE(out[4 * C + 2] == wte[tokens[4] * C + 2] + wpe[1 * C + 2]);  // b=1, t=1
  std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  ds::runtime::encoderBackward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C);
  for (int i = 0; i < C; ++i) REQUIRE(dwte[2 * C + i] == 0.0f);  // token 2 unused
  requireClose(checkGradient(loss, wte.data(), wte.size(), dwte.data(), kH, kAtol, kRtol), "dwte");
  requireClose(checkGradient(loss, wpe.data(), wpe.size(), dwpe.data(), kH, kAtol, kRtol), "dwpe");
}
