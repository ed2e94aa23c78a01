// gemv (runtime/tensor/gemv.h) on every ISA this CPU has, fp32 and bf16 weights, against fp64 sums
// of the same operands: |got - ref| <= gamma_{C+1} * (sum |w x| + |bias|), u = 2^-24 (products of
// a bf16 weight and an fp32 input are not exact in fp32, so the bound counts C + 1 roundings per
// term, which gamma_{C+1} covers). Shapes cover C not a multiple of 16 or 8 (masked and scalar
// tails), OC not a multiple of 4 (tail groups), N not a multiple of the row blocks, and a null
// bias. Also: each output column is computed by one thread in one order, so 1 and 2 threads give
// bit-identical results.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/tensor/gemv.h"
#include "runtime/tensor/threads.h"

using namespace ds::runtime;

namespace {

std::vector<float> randomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<GemvIsa> supportedIsas() {
  std::vector<GemvIsa> out;
  for (GemvIsa i : {GemvIsa::kScalar, GemvIsa::kAvx2, GemvIsa::kAvx512})
    if (gemvIsaSupported(i)) out.push_back(i);
  return out;
}

// ref and bound for out[n, o] from fp32 weights wf (bf16 weights passed already widened).
void checkAgainstReference(const std::vector<float>& got, const std::vector<float>& x,
                           const std::vector<float>& wf, const float* bias, int N, int C, int OC) {
  const double u = std::ldexp(1.0, -24), gamma = (C + 1) * u / (1 - (C + 1) * u);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      double ref = bias ? bias[o] : 0.0, mag = bias ? std::fabs(bias[o]) : 0.0;
      for (int k = 0; k < C; ++k) {
        const double t = double(wf[size_t(o) * C + k]) * x[size_t(n) * C + k];
        ref += t;
        mag += std::fabs(t);
      }
      const double g = got[size_t(n) * OC + o];
      INFO("n " << n << " o " << o << " N " << N << " C " << C << " OC " << OC);
      REQUIRE(std::fabs(g - ref) <= gamma * mag + 1e-30);
    }
}

}  // namespace

TEST_CASE("gemv matches an fp64 reference on every ISA, fp32 and bf16 weights", "[unit]") {
  struct Shape {
    int N, C, OC;
    bool bias;
  };
  const Shape shapes[] = {{1, 768, 50, true}, {1, 37, 13, true}, {2, 16, 4, false},
                          {3, 3, 7, true},    {4, 100, 9, true}, {5, 768, 6, false},
                          {7, 24, 17, true},  {16, 64, 33, true}};
  for (GemvIsa isa : supportedIsas()) {
    for (const Shape& s : shapes) {
      INFO("isa " << gemvIsaName(isa));
      const auto x = randomVec(size_t(s.N) * s.C, 1);
      auto w = randomVec(size_t(s.OC) * s.C, 2);
      const auto b = randomVec(size_t(s.OC), 3);
      const float* bias = s.bias ? b.data() : nullptr;
      std::vector<float> out(size_t(s.N) * s.OC, -7.0f);
      gemvForward(out.data(), x.data(), w.data(), bias, s.N, s.C, s.OC, isa);
      checkAgainstReference(out, x, w, bias, s.N, s.C, s.OC);

      std::vector<ds::bf16> w16(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        w16[i] = ds::floatToBf16(w[i]);
        w[i] = ds::bf16ToFloat(w16[i]);
      }
      std::fill(out.begin(), out.end(), -7.0f);
      gemvForwardBf16(out.data(), x.data(), w16.data(), bias, s.N, s.C, s.OC, isa);
      checkAgainstReference(out, x, w, bias, s.N, s.C, s.OC);
    }
  }
}

TEST_CASE("gemv results do not depend on the thread count", "[unit]") {
  const int N = 2, C = 768, OC = 2304;  // GPT-2 qkv: large enough to run in parallel
  const auto x = randomVec(size_t(N) * C, 4);
  const auto w = randomVec(size_t(OC) * C, 5);
  const auto b = randomVec(size_t(OC), 6);
  const int before = computeThreads();
  std::vector<float> one(size_t(N) * OC), two(size_t(N) * OC);
  setComputeThreads(1);
  gemvForward(one.data(), x.data(), w.data(), b.data(), N, C, OC);
  setComputeThreads(2);
  gemvForward(two.data(), x.data(), w.data(), b.data(), N, C, OC);
  setComputeThreads(before);
  REQUIRE(one == two);
}

TEST_CASE("gemv refuses an ISA the CPU lacks", "[unit]") {
  for (GemvIsa isa : {GemvIsa::kAvx2, GemvIsa::kAvx512}) {
    if (gemvIsaSupported(isa)) continue;
    float out = 0, x = 1, w = 1;
    REQUIRE_THROWS_AS(gemvForward(&out, &x, &w, nullptr, 1, 1, 1, isa), ds::InternalError);
  }
  SUCCEED();
}
