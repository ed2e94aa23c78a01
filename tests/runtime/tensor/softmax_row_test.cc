// The softmax row passes (runtime/tensor/softmax_row.h) and the exp under them
// (runtime/tensor/exp_neg.h): exp(t) for t in [-87.3, 0] within 4e-7 relative of libm's (double)
// exp, 0 below (where libm gives a subnormal < 1.2e-38); rowMax equal to the scalar loop at
// every tail length; expShiftSum's row and sum equal to the portable pass within those bounds; the
// AVX2 kernels (SKIPPED without AVX2 + FMA) the same, and their exps bitwise the AVX-512 ones.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/tensor/exp_neg.h"
#include "runtime/tensor/softmax_row.h"
#include "tests/support/skip.h"

using namespace ds::runtime;

TEST_CASE("expNeg: relative error <= 4e-7 on [-87.3, 0], 0 below", "[unit]") {
  double worst = 0;
  for (float t = 0.0f; t >= -87.3f; t -= 1.0f / 1024) {
    const double ref = std::exp(double(t));
    worst = std::max(worst, std::fabs(detail::expNeg(t) - ref) / ref);
  }
  INFO("worst relative error " << worst);
  CHECK(worst <= 4e-7);
  CHECK(detail::expNeg(-87.4f) == 0.0f);
  CHECK(detail::expNeg(-1e30f) == 0.0f);
  CHECK(detail::expNeg(-INFINITY) == 0.0f);
  CHECK(detail::expNeg(0.0f) == 1.0f);
}

namespace {
using RowMaxFn = float (*)(const float*, size_t);
using ExpShiftSumFn = double (*)(float*, size_t, float);

void checkPasses(RowMaxFn rowMaxFn, ExpShiftSumFn expShiftSumFn) {
  for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(8), size_t(9), size_t(15), size_t(16),
                   size_t(17), size_t(33), size_t(50257)}) {
    std::vector<float> row(n);
    for (size_t j = 0; j < n; ++j) row[j] = float(int((j * 7919) % 2003) - 1001) / 37.0f;
    if (n > 3) row[n - 2] = 40.0f;  // the max in the tail
    float ref = row[0];
    for (size_t j = 1; j < n; ++j) ref = row[j] > ref ? row[j] : ref;
    INFO("n " << n);
    CHECK(rowMaxFn(row.data(), n) == ref);

    std::vector<float> fast = row, slow = row;
    const double sumFast = expShiftSumFn(fast.data(), n, ref);
    const double sumSlow = expShiftSumPortable(slow.data(), n, ref);
    CHECK(std::fabs(sumFast - sumSlow) <= 1e-6 * sumSlow);
    double worst = 0;
    for (size_t j = 0; j < n; ++j) {
      if (slow[j] >= 1.2e-38f) {
        worst = std::max(worst, double(std::fabs(fast[j] - slow[j])) / slow[j]);
      } else {
        CHECK(fast[j] <= 1.2e-38f);
      }
    }
    CHECK(worst <= 4e-7);
  }
}
}  // namespace

TEST_CASE("rowMax and expShiftSum against the scalar passes at every tail length", "[unit]") {
  checkPasses(rowMax, expShiftSum);
}

TEST_CASE("AVX2 rowMax and expShiftSum against the scalar passes", "[unit][cpu_isa]") {
  if (!softmaxRowHasAvx2()) DS_SKIP("this CPU has no AVX2 + FMA");
  checkPasses(detail::rowMaxAvx2, detail::expShiftSumAvx2);
  // A NaN after row[0] is skipped, as the scalar compare does.
  std::vector<float> row = {1.0f, NAN, 3.0f, 2.0f, NAN, -1.0f, 0.0f, 2.5f, NAN, 2.75f};
  CHECK(detail::rowMaxAvx2(row.data(), row.size()) == 3.0f);
}

TEST_CASE("AVX2 and AVX-512 expShiftSum write the same exps", "[unit][cpu_isa]") {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) DS_SKIP("this CPU has no AVX-512F");
  const size_t n = 50257;
  std::vector<float> row(n);
  for (size_t j = 0; j < n; ++j) row[j] = -float((j * 7919) % 100003) / 1000.0f;
  std::vector<float> a = row, b = row;
  const double sumA = detail::expShiftSumAvx2(a.data(), n, 0.0f);
  const double sumB = detail::expShiftSumAvx512(b.data(), n, 0.0f);
  CHECK(a == b);
  CHECK(std::fabs(sumA - sumB) <= 1e-12 * sumB);
}
