// CPU Adam/AdamW/SGD: every ISA path bit-identical to the scalar reference on odd lengths (with
// the 16-bit copy), and the scalar reference against DeepSpeed's formula evaluated in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "zero/cpu_adam.h"

using namespace ds;
using namespace ds::zero;

namespace {

struct State {
  std::vector<float> p, g, m, v;
  std::vector<uint16_t> h;
};

State randomState(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  State s{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n),
          std::vector<float>(n), std::vector<uint16_t>(n)};
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = d(rng);
    s.g[i] = d(rng) * 0.1f;
    s.m[i] = d(rng) * 0.01f;
    s.v[i] = std::fabs(d(rng)) * 1e-3f;
  }
  return s;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

const size_t kLengths[] = {1, 7, 15, 17, 31, 33, 1001, 32768 + 19, 3 * 32768 + 5};

}  // namespace

// An ISA this CPU lacks is checked to be refused (and said so), so the case asserts something
// on every CPU.
TEST_CASE("cpu adam: every ISA path is bitwise equal to scalar on odd lengths", "[unit]") {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) {
      WARN("ISA " << isaName(isa) << " not supported on this CPU: only its refusal is checked");
      State s = randomState(8, 1);
      CHECK_THROWS_WITH(
          adamStep(isa, AdamConfig{}, 1, 1.f, s.p.data(), s.g.data(), s.m.data(), s.v.data(), 8),
          Catch::Contains("not supported here"));
      continue;
    }
    for (size_t n : kLengths) {
      for (bool adamw : {true, false}) {
        for (DType k16 : {DType::kF32, DType::kBF16, DType::kF16}) {
          AdamConfig cfg;
          cfg.lr = 1e-2f;
          cfg.weightDecay = 0.1f;
          cfg.adamwMode = adamw;
          State ref = randomState(n, uint32_t(n)), got = ref;
          for (int64_t step = 1; step <= 3; ++step) {
            adamStep(Isa::kScalar, cfg, step, 0.5f, ref.p.data(), ref.g.data(), ref.m.data(),
                     ref.v.data(), n, {k16, ref.h.data()});
            adamStep(isa, cfg, step, 0.5f, got.p.data(), got.g.data(), got.m.data(), got.v.data(),
                     n, {k16, got.h.data()}, 2);
          }
          INFO(isaName(isa) << " n=" << n << " adamw=" << adamw << " 16=" << dtypeName(k16));
          CHECK(sameBits(ref.p, got.p));
          CHECK(sameBits(ref.m, got.m));
          CHECK(sameBits(ref.v, got.v));
          CHECK(ref.h == got.h);
        }
      }
      SgdConfig sc{0.05f, 0.9f, 0.01f};
      State ref = randomState(n, 7), got = ref;
      for (int s = 0; s < 3; ++s) {
        sgdStep(Isa::kScalar, sc, 2.f, ref.p.data(), ref.g.data(), ref.m.data(), n,
                {DType::kBF16, ref.h.data()});
        sgdStep(isa, sc, 2.f, got.p.data(), got.g.data(), got.m.data(), n,
                {DType::kBF16, got.h.data()});
      }
      INFO("sgd " << isaName(isa) << " n=" << n);
      CHECK(sameBits(ref.p, got.p));
      CHECK(sameBits(ref.m, got.m));
      CHECK(ref.h == got.h);
    }
  }
}

TEST_CASE("cpu adam: scalar reference follows DeepSpeed's formula", "[unit]") {
  const size_t n = 37;
  for (bool adamw : {true, false}) {
    AdamConfig cfg;
    cfg.lr = 3e-3f;
    cfg.beta1 = 0.8f;
    cfg.beta2 = 0.95f;
    cfg.eps = 1e-6f;
    cfg.weightDecay = 0.2f;
    cfg.adamwMode = adamw;
    State s = randomState(n, 42);
    std::vector<double> p(s.p.begin(), s.p.end()), m(s.m.begin(), s.m.end()),
        v(s.v.begin(), s.v.end());
    for (int64_t t = 1; t <= 5; ++t) {
      adamStep(Isa::kScalar, cfg, t, 1.f, s.p.data(), s.g.data(), s.m.data(), s.v.data(), n);
      for (size_t i = 0; i < n; ++i) {
        double g = s.g[i];
        if (!adamw) g += cfg.weightDecay * p[i];
        m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g;
        v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g * g;
        double bc1 = 1 - std::pow(double(cfg.beta1), t), bc2 = 1 - std::pow(double(cfg.beta2), t);
        double denom = std::sqrt(v[i]) / std::sqrt(bc2) + cfg.eps;
        if (adamw) p[i] -= cfg.lr * cfg.weightDecay * p[i];
        p[i] -= cfg.lr / bc1 * m[i] / denom;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      INFO("adamw=" << adamw << " i=" << i);
      CHECK(s.p[i] == Approx(p[i]).epsilon(1e-5));
      CHECK(s.m[i] == Approx(m[i]).epsilon(1e-5));
      CHECK(s.v[i] == Approx(v[i]).epsilon(1e-4));
    }
  }
}

TEST_CASE("cpu adam: SGD momentum follows torch's formula", "[unit]") {
  State s = randomState(9, 3);
  std::vector<double> p(s.p.begin(), s.p.end()), b(9, 0.0);
  std::fill(s.m.begin(), s.m.end(), 0.f);
  SgdConfig c{0.1f, 0.9f, 0.01f};
  for (int t = 0; t < 4; ++t) {
    sgdStep(Isa::kScalar, c, 1.f, s.p.data(), s.g.data(), s.m.data(), 9);
    for (size_t i = 0; i < 9; ++i) {
      double g = s.g[i] + 0.01 * p[i];
      b[i] = 0.9 * b[i] + g;
      p[i] -= 0.1 * b[i];
    }
  }
  for (size_t i = 0; i < 9; ++i) CHECK(s.p[i] == Approx(p[i]).epsilon(1e-5));
}

TEST_CASE("cpu adam: 16-bit conversion rounds to nearest even and keeps NaN", "[unit]") {
  std::vector<float> src = {1.f,    -2.5f,     1.00390625f /* tie -> even */, 1.01171875f,
                            NAN,    -INFINITY, 1e-40f /* denormal */,         65504.f,
                            3.3e38f};
  while (src.size() < 40) src.push_back(float(src.size()) * 0.37f);
  for (DType k : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> out(src.size());
    convertTo16(src.data(), {k, out.data()}, src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      uint16_t want = k == DType::kBF16 ? floatToBf16(src[i]).bits : floatToFp16(src[i]).bits;
      INFO(dtypeName(k) << " i=" << i);
      if (std::isnan(src[i])) {
        float back = k == DType::kBF16 ? bf16ToFloat(bf16{out[i]}) : fp16ToFloat(fp16{out[i]});
        CHECK(std::isnan(back));
      } else {
        CHECK(out[i] == want);
      }
    }
  }
  CHECK(floatToBf16(1.00390625f).bits == 0x3f80);  // tie rounds to even
}
