// zero/grad_check.h: the sum of squares is exact to double rounding (against a long double sum)
// at lengths around the 8 lanes and the 65536-element chunks, bitwise the same at 1 and 2 threads,
// non-finite with one inf or NaN anywhere; the norm divides by world and loss scale; the
// multiplier unscales, averages and clips.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "zero/dp_comm.h"
#include "zero/grad_check.h"

using namespace ds::zero;

namespace {

std::vector<float> grads(size_t n) {
  std::vector<float> g(n);
  uint32_t state = 12345;
  for (size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    g[i] = (float(state >> 8) / float(1u << 24) - 0.5f) * (i % 7 == 0 ? 100.0f : 0.01f);
  }
  return g;
}

GradCheck check(const std::vector<float>& g, int world = 1, float scale = 1.0f) {
  DpComm single(nullptr);
  return checkGradients(g.data(), g.size(), true, single, world, scale);
}

}  // namespace

TEST_CASE("grad check: sum of squares within double rounding at every tail", "[unit]") {
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(65535), size_t(65536),
                   size_t(65537), size_t(3 * 65536 + 13), size_t(40 * 65536 + 5)}) {
    const auto g = grads(n);
    long double ref = 0;
    for (float x : g) ref += (long double)x * (long double)x;
    const double got = check(g).sumSquares;
    INFO("n " << n << " got " << got << " ref " << double(ref));
    CHECK(std::fabs(got - double(ref)) <= 1e-14 * double(ref));
  }
}

TEST_CASE("grad check: the sum does not depend on the thread count", "[unit]") {
  const auto g = grads(40 * 65536 + 5);  // above the parallel threshold (16 chunks)
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = check(g).sumSquares;
  omp_set_num_threads(2);
  const double two = check(g).sumSquares;
  omp_set_num_threads(before);
  CHECK(one == two);
}

TEST_CASE("grad check: one inf or NaN anywhere makes the check non-finite", "[unit]") {
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    for (size_t at : {size_t(0), size_t(6), size_t(65536 + 3), size_t(3 * 65536 + 12)}) {
      auto g = grads(3 * 65536 + 13);
      g[at] = bad;
      INFO("bad " << bad << " at " << at);
      CHECK_FALSE(check(g).finite());
    }
  }
  CHECK(check(grads(100)).finite());
}

TEST_CASE("grad check: norm and multiplier", "[unit]") {
  const std::vector<float> g = {3.0f * 8, 4.0f * 8};  // sum of 4 ranks' gradients, scale 2
  const GradCheck c = check(g, 4, 2.0f);
  CHECK(c.sumSquares == 1600.0);
  CHECK(c.norm == 5.0f);                                     // sqrt(1600) / 4 / 2
  CHECK(gradientMultiplier(c, 0.0f, 4, 2.0f) == 1.0f / 8);   // no clipping: unscale and average
  CHECK(gradientMultiplier(c, 10.0f, 4, 2.0f) == 1.0f / 8);  // under the clip norm
  CHECK(std::fabs(gradientMultiplier(c, 1.0f, 4, 2.0f) - 1.0f / 8 / 5) <= 1e-6f / 8);
}
