// gemvForwardBf16Dot (runtime/tensor/gemv.h, AVX512-BF16 dot products) against fp64 sums of the
// same operands with the input rounded to bf16 first (the kernel's contract): products of two bf16
// are exact in fp32, so |got - ref| <= gamma_{C+2} * (sum |w x| + |bias|), u = 2^-24. Shapes: C
// not a multiple of 32 (masked weight tail, zero-padded input), odd C (a pair split by the tail),
// OC not a multiple of 4, N not a multiple of 4 up to 16 (a batch-16 decode step), null bias; the
// thread count does not change the result; SKIPPED where the CPU lacks AVX512-BF16, and there the
// call throws.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/tensor/gemv.h"
#include "runtime/tensor/threads.h"
#include "tests/support/skip.h"

using namespace ds::runtime;

namespace {

std::vector<float> randomVec(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(count);
  for (float& val : out) val = dist(rng);
  return out;
}

std::vector<ds::bf16> toBf16(const std::vector<float>& src) {
  std::vector<ds::bf16> out(src.size());
  for (size_t i = 0; i < src.size(); ++i) out[i] = ds::floatToBf16(src[i]);
  return out;
}

}  // namespace

TEST_CASE("gemvForwardBf16Dot matches an fp64 reference of bf16-rounded operands",
          "[unit][cpu_isa]") {
  if (!gemvBf16DotSupported()) {
    float out = 0, inp = 1;
    const ds::bf16 wgt = ds::floatToBf16(1.0f);
    REQUIRE_THROWS_AS(gemvForwardBf16Dot(&out, &inp, &wgt, nullptr, 1, 1, 1), ds::InternalError);
    DS_SKIP("no AVX512-BF16 on this CPU: the dot-product gemv cannot run here");
  }
  struct Shape {
    int N, C, OC;
    bool bias;
  };
  const Shape shapes[] = {{1, 768, 50, true}, {1, 37, 13, true},   {2, 32, 4, false},
                          {3, 3, 7, true},    {4, 100, 9, true},   {5, 768, 6, false},
                          {7, 33, 17, true},  {16, 768, 33, true}, {16, 3072, 5, false}};
  for (const Shape& shape : shapes) {
    const auto inp = randomVec(size_t(shape.N) * shape.C, 1);
    const auto wgt = toBf16(randomVec(size_t(shape.OC) * shape.C, 2));
    const auto bvec = randomVec(size_t(shape.OC), 3);
    const float* bias = shape.bias ? bvec.data() : nullptr;
    std::vector<float> out(size_t(shape.N) * shape.OC, -7.0f);
    gemvForwardBf16Dot(out.data(), inp.data(), wgt.data(), bias, shape.N, shape.C, shape.OC);
    const double unit = std::ldexp(1.0, -24);
    const double gamma = (shape.C + 2) * unit / (1 - (shape.C + 2) * unit);
    for (int n = 0; n < shape.N; ++n)
      for (int o = 0; o < shape.OC; ++o) {
        double ref = bias ? bias[o] : 0.0, mag = bias ? std::fabs(bias[o]) : 0.0;
        for (int k = 0; k < shape.C; ++k) {
          const double xr = ds::bf16ToFloat(ds::floatToBf16(inp[size_t(n) * shape.C + k]));
          const double term = double(ds::bf16ToFloat(wgt[size_t(o) * shape.C + k])) * xr;
          ref += term;
          mag += std::fabs(term);
        }
        INFO("n " << n << " o " << o << " N " << shape.N << " C " << shape.C << " OC " << shape.OC);
        REQUIRE(std::fabs(out[size_t(n) * shape.OC + o] - ref) <= gamma * mag + 1e-30);
      }
  }
}

TEST_CASE("gemvForwardBf16Dot results do not depend on the thread count", "[unit][cpu_isa]") {
  if (!gemvBf16DotSupported()) DS_SKIP("no AVX512-BF16 on this CPU");
  const int N = 16, C = 768, OC = 2304;  // a batch-16 step of GPT-2's qkv: runs in parallel
  const auto inp = randomVec(size_t(N) * C, 4);
  const auto wgt = toBf16(randomVec(size_t(OC) * C, 5));
  const auto bias = randomVec(size_t(OC), 6);
  const int before = computeThreads();
  std::vector<float> one(size_t(N) * OC), two(size_t(N) * OC);
  setComputeThreads(1);
  gemvForwardBf16Dot(one.data(), inp.data(), wgt.data(), bias.data(), N, C, OC);
  setComputeThreads(2);
  gemvForwardBf16Dot(two.data(), inp.data(), wgt.data(), bias.data(), N, C, OC);
  setComputeThreads(before);
  REQUIRE(one == two);
}
