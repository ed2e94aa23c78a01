// runtime/tensor/attention.h against a direct double-precision evaluation of causal attention
// (scores, softmax, output, and every gradient by its formula) at lengths below, at and across
// the 32-row blocks the products run in (T = 1 .. 100), with the backward accumulating into a
// non-zero dqkv. Also: probabilities exactly 0 above the diagonal, rows summing to 1.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/tensor/attention.h"

namespace {

std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = float(seed >> 8) / float(1u << 24) * 2.0f - 1.0f;
  }
  return v;
}

struct Reference {
  std::vector<double> out, att, dqkv;
};

// Direct evaluation on the layout of attention.h (qkv[B, T, 3C], out[B, T, C]).
Reference reference(const std::vector<float>& qkv, const std::vector<float>& dout,
                    const std::vector<float>& dqkv0, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(double(hs));
  Reference r;
  r.out.assign(size_t(B) * T * C, 0.0);
  r.att.assign(size_t(B) * NH * T * T, 0.0);
  r.dqkv.assign(dqkv0.begin(), dqkv0.end());
  auto q = [&](int b, int t, int h, int i) {
    return double(qkv[size_t(b * T + t) * C3 + h * hs + i]);
  };
  auto k = [&](int b, int t, int h, int i) {
    return double(qkv[size_t(b * T + t) * C3 + C + h * hs + i]);
  };
  auto v = [&](int b, int t, int h, int i) {
    return double(qkv[size_t(b * T + t) * C3 + 2 * C + h * hs + i]);
  };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      std::vector<double> P(size_t(T) * T, 0.0), dS(size_t(T) * T, 0.0);
      for (int t = 0; t < T; ++t) {
        double mx = -1e300;
        std::vector<double> s(size_t(t) + 1);
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hs; ++i) dot += q(b, t, h, i) * k(b, j, h, i);
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(s[size_t(j)] - mx);
        for (int j = 0; j <= t; ++j) P[size_t(t) * T + j] = std::exp(s[size_t(j)] - mx) / sum;
        for (int i = 0; i < hs; ++i) {
          double y = 0;
          for (int j = 0; j <= t; ++j) y += P[size_t(t) * T + j] * v(b, j, h, i);
          r.out[size_t(b * T + t) * C + h * hs + i] = y;
        }
        // dP = dy . v_j; dS = P (dP - <P, dP>)
        std::vector<double> dP(size_t(t) + 1);
        double pdp = 0;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < hs; ++i)
            d += double(dout[size_t(b * T + t) * C + h * hs + i]) * v(b, j, h, i);
          dP[size_t(j)] = d;
          pdp += P[size_t(t) * T + j] * d;
        }
        for (int j = 0; j <= t; ++j)
          dS[size_t(t) * T + j] = P[size_t(t) * T + j] * (dP[size_t(j)] - pdp);
      }
      for (int t = 0; t < T; ++t) {
        for (int j = 0; j <= t; ++j) {
          const double p = P[size_t(t) * T + j], ds = dS[size_t(t) * T + j] * scale;
          for (int i = 0; i < hs; ++i) {
            r.dqkv[size_t(b * T + t) * C3 + h * hs + i] += ds * k(b, j, h, i);
            r.dqkv[size_t(b * T + j) * C3 + C + h * hs + i] += ds * q(b, t, h, i);
            r.dqkv[size_t(b * T + j) * C3 + 2 * C + h * hs + i] +=
                p * double(dout[size_t(b * T + t) * C + h * hs + i]);
          }
        }
      }
      for (size_t e = 0; e < P.size(); ++e) r.att[(size_t(b) * NH + h) * T * T + e] = P[e];
    }
  }
  return r;
}

double worstError(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst =
        std::max(worst, std::fabs(double(got[i]) - want[i]) / std::max(1.0, std::fabs(want[i])));
  return worst;
}

}  // namespace

TEST_CASE("attention: forward and backward equal the direct formulas across row blocks", "[unit]") {
  const int B = 2, C = 16, NH = 2;
  for (int T : {1, 2, 31, 32, 33, 64, 70, 100}) {
    const auto qkv = values(size_t(B) * T * 3 * C, 11u + uint32_t(T));
    const auto dout = values(size_t(B) * T * C, 23u + uint32_t(T));
    const auto dqkv0 = values(qkv.size(), 37u + uint32_t(T));
    std::vector<float> out(size_t(B) * T * C), att(size_t(B) * NH * T * T, 7.0f);
    std::vector<float> dqkv = dqkv0, scratch(size_t(T) * T, 5.0f);  // scratch holds garbage
    ds::runtime::attentionForward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    ds::runtime::attentionBackward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                                   B, T, C, NH);
    const Reference ref = reference(qkv, dout, dqkv0, B, T, C, NH);
    INFO("T " << T);
    CHECK(worstError(out, ref.out) <= 2e-6);
    CHECK(worstError(att, ref.att) <= 2e-6);
    CHECK(worstError(dqkv, ref.dqkv) <= 2e-6);
    for (int bh = 0; bh < B * NH; ++bh) {
      for (int t = 0; t < T; ++t) {
        double sum = 0;
        for (int j = 0; j < T; ++j) {
          const float p = att[(size_t(bh) * T + t) * T + j];
          if (j > t) REQUIRE(p == 0.0f);
          sum += p;
        }
        REQUIRE(sum == Approx(1.0).epsilon(1e-6));
      }
    }
  }
}
