// The softmax row passes (runtime/tensor/softmax_row.h) and the exp under them
// (runtime/tensor/exp_neg.h): exp(t) for t in [-87.3, 0] within 4e-7 relative of libm's (double)
// exp, 0 below (where libm gives a subnormal < 1.2e-38); rowMax equal to the scalar loop at
// every tail length; expShiftSum's row and sum equal to the portable pass within those bounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "runtime/tensor/exp_neg.h"
#include "runtime/tensor/softmax_row.h"

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

TEST_CASE("rowMax and expShiftSum against the scalar passes at every tail length", "[unit]") {
  for (size_t n :
       {size_t(1), size_t(2), size_t(15), size_t(16), size_t(17), size_t(33), size_t(50257)}) {
    std::vector<float> row(n);
    for (size_t j = 0; j < n; ++j) row[j] = float(int((j * 7919) % 2003) - 1001) / 37.0f;
    if (n > 3) row[n - 2] = 40.0f;  // the max in the tail
    float ref = row[0];
    for (size_t j = 1; j < n; ++j) ref = row[j] > ref ? row[j] : ref;
    INFO("n " << n);
    CHECK(rowMax(row.data(), n) == ref);

    std::vector<float> fast = row, slow = row;
    const double sumFast = expShiftSum(fast.data(), n, ref);
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
