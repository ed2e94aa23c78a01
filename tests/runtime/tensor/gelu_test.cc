// The vectorised GELU kernels (runtime/tensor/elementwise.h, gelu_kernels.h) on every ISA this CPU
// has (the portable kernel always; AVX2 + FMA and AVX-512 each SKIPPED visibly without it) against
// the libm tanhf formula (math/gelu_math.h) and the exact formula in double, over a dense sweep of
// [-30, 30] and a geometric sweep of |x| in [1e-30, 1e30]. Bounds (elementwise.h): |fast - libm| <=
// 4e-7 * max(1, |x|) for gelu and gelu'; gelu's relative error against double <= 3e-5, gelu''s
// absolute error <= 3e-7 * max(1, |gelu'|). Specials: NaN propagates; +-inf and huge |x| (x^3
// overflows) give what the libm version gives. AVX2 equals AVX-512 bit for bit where the CPU has
// both. Also: the drivers' tails and thread split, biasGeluForward == bias add then geluForward,
// geluBackwardSet == zero then geluBackward, bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/math/gelu_math.h"
#include "tests/support/skip.h"

using namespace ds::runtime;

namespace {

std::vector<float> sweep() {
  std::vector<float> xs;
  for (float x = -30.0f; x <= 30.0f; x += 1.0f / 2048) xs.push_back(x);
  for (float x = 1e-30f; x < 1e30f; x *= 1.01f) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  return xs;
}

bool sameBits(const std::vector<float>& lhs, const std::vector<float>& rhs) {
  return lhs.size() == rhs.size() &&
         std::equal(lhs.begin(), lhs.end(), rhs.begin(), [](float left, float right) {
           return std::signbit(left) == std::signbit(right) &&
                  (left == right || (std::isnan(left) && std::isnan(right)));
         });
}

// Exact gelu and gelu' in double through the sigmoid form (no 1 + tanh cancellation).
double exactGelu(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
double exactGrad(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  const double sig = 1.0 / (1.0 + std::exp(-2.0 * u));
  return sig + 2.0 * x * sig * (1.0 - sig) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

void checkIsa(GeluIsa isa) {
  const std::vector<float> xs = sweep();
  const size_t n = xs.size();
  std::vector<float> out(n), grad(n, 0.0f), ones(n, 1.0f);
  geluForward(out.data(), xs.data(), n, isa);
  geluBackward(grad.data(), xs.data(), ones.data(), n, isa);
  double worstLibmF = 0, worstLibmG = 0, worstExactF = 0, worstExactG = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = xs[i];
    const double scale = std::max(1.0, double(std::fabs(x)));
    const double exactF = exactGelu(x), exactG = exactGrad(x);
    if (!std::isfinite(exactF) || !std::isfinite(exactG)) continue;  // |x|^3 overflows double
    worstLibmF = std::max(worstLibmF, std::fabs(out[i] - math::geluF32(x)) / scale);
    worstLibmG = std::max(worstLibmG, std::fabs(grad[i] - math::geluGradF32(x)) / scale);
    if (std::fabs(exactF) > 1e-30)
      worstExactF = std::max(worstExactF, std::fabs(out[i] - exactF) / std::fabs(exactF));
    worstExactG =
        std::max(worstExactG, std::fabs(grad[i] - exactG) / std::max(1.0, std::fabs(exactG)));
  }
  INFO(geluIsaName(isa) << ": vs libm gelu " << worstLibmF << " gelu' " << worstLibmG
                        << "; vs exact gelu rel " << worstExactF << " gelu' " << worstExactG);
  CHECK(worstLibmF <= 4e-7);
  CHECK(worstLibmG <= 4e-7);
  CHECK(worstExactF <= 3e-5);
  CHECK(worstExactG <= 3e-7);

  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {std::nanf(""), inf,    -inf,   0.0f,   -0.0f, 1e13f,  -1e13f,
                                      1e14f,         -1e14f, 1e20f,  -1e20f, 3e38f, -3e38f, 1e-40f,
                                      -1e-40f,       88.0f,  -88.0f, 9.0f,   -9.0f, -100.f};
  const size_t ns = special.size();
  std::vector<float> sOut(ns), sGrad(ns, 0.0f), sOnes(ns, 1.0f);
  geluForward(sOut.data(), special.data(), ns, isa);
  geluBackward(sGrad.data(), special.data(), sOnes.data(), ns, isa);
  for (size_t i = 0; i < ns; ++i) {
    const float x = special[i], refF = math::geluF32(x), refG = math::geluGradF32(x);
    INFO(geluIsaName(isa) << " x=" << x << " gelu " << sOut[i] << " (libm " << refF << ") gelu' "
                          << sGrad[i] << " (libm " << refG << ")");
    CHECK(std::isnan(sOut[i]) == std::isnan(refF));
    CHECK(std::isnan(sGrad[i]) == std::isnan(refG));
    if (std::isinf(x)) {
      if (!std::isnan(refF)) CHECK(sOut[i] == refF);
    } else if (!std::isnan(x)) {
      CHECK(std::fabs(sOut[i] - refF) <= 4e-7 * std::max(1.0f, std::fabs(x)));
      if (!std::isnan(refG))
        CHECK(std::fabs(sGrad[i] - refG) <= 4e-7 * std::max(1.0f, std::fabs(x)));
    }
  }
}

}  // namespace

TEST_CASE("gelu portable kernel: bounds against libm and exact, specials", "[unit]") {
  checkIsa(GeluIsa::kPortable);
}

TEST_CASE("gelu AVX2 kernel: bounds against libm and exact, specials", "[unit][cpu_isa]") {
  if (!geluIsaSupported(GeluIsa::kAvx2)) DS_SKIP("this CPU has no AVX2 + FMA");
  checkIsa(GeluIsa::kAvx2);
}

TEST_CASE("gelu AVX2 and AVX-512 kernels give the same bits", "[unit][cpu_isa]") {
  if (!geluIsaSupported(GeluIsa::kAvx512)) DS_SKIP("this CPU has no AVX-512F");
  REQUIRE(geluIsaSupported(GeluIsa::kAvx2));  // every AVX-512F CPU has AVX2 and FMA
  std::vector<float> xs = sweep();
  for (float x : {std::nanf(""), INFINITY, -INFINITY, -0.0f, 1e-40f, -88.0f, 3e38f})
    xs.push_back(x);
  const size_t n = xs.size();
  std::vector<float> out2(n), out512(n), grad2(n, 0.5f), grad512(n, 0.5f), dout(n);
  for (size_t i = 0; i < n; ++i) dout[i] = float(int(i % 13) - 6) / 7.0f;
  geluForward(out2.data(), xs.data(), n, GeluIsa::kAvx2);
  geluForward(out512.data(), xs.data(), n, GeluIsa::kAvx512);
  geluBackward(grad2.data(), xs.data(), dout.data(), n, GeluIsa::kAvx2);
  geluBackward(grad512.data(), xs.data(), dout.data(), n, GeluIsa::kAvx512);
  CHECK(sameBits(out2, out512));
  CHECK(sameBits(grad2, grad512));
}

TEST_CASE("gelu AVX-512 kernel: bounds against libm and exact, specials", "[unit][cpu_isa]") {
  if (!geluIsaSupported(GeluIsa::kAvx512)) DS_SKIP("this CPU has no AVX-512F");
  checkIsa(GeluIsa::kAvx512);
}

TEST_CASE("gelu: the best ISA is a supported one; an unsupported one is refused", "[unit]") {
  CHECK(geluIsaSupported(geluBestIsa()));
  if (geluIsaSupported(GeluIsa::kAvx512)) {
    CHECK(geluBestIsa() == GeluIsa::kAvx512);
  } else if (geluIsaSupported(GeluIsa::kAvx2)) {
    CHECK(geluBestIsa() == GeluIsa::kAvx2);
    float val = 0;
    CHECK_THROWS_AS(geluForward(&val, &val, 1, GeluIsa::kAvx512), ds::InternalError);
  } else {
    float val = 0;
    CHECK_THROWS_AS(geluForward(&val, &val, 1, GeluIsa::kAvx512), ds::InternalError);
  }
}

// Lengths around the 8- and 16-lane vectors and the 4096-element blocks (threads split whole
// blocks): each element's result is the same whatever the length, so a long run equals its pieces.
TEST_CASE("gelu drivers: tails and the block split give every element its own value", "[unit]") {
  for (GeluIsa isa : {GeluIsa::kPortable, GeluIsa::kAvx2, GeluIsa::kAvx512}) {
    if (!geluIsaSupported(isa)) continue;
    const size_t n = 3 * 4096 + 4096 * 8 + 17;  // above the parallel threshold, ragged end
    std::vector<float> xs(n), dout(n);
    for (size_t i = 0; i < n; ++i) {
      xs[i] = float(int(i % 977) - 488) / 61.0f;
      dout[i] = float(int(i % 13) - 6) / 7.0f;
    }
    std::vector<float> all(n), grad(n, 0.25f);
    geluForward(all.data(), xs.data(), n, isa);
    geluBackward(grad.data(), xs.data(), dout.data(), n, isa);
    for (size_t len : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(15), size_t(16),
                       size_t(17), size_t(4097)}) {
      std::vector<float> piece(len), pgrad(len, 0.25f);
      const size_t at = n - len;
      geluForward(piece.data(), xs.data() + at, len, isa);
      geluBackward(pgrad.data(), xs.data() + at, dout.data() + at, len, isa);
      INFO(geluIsaName(isa) << " len " << len);
      CHECK(sameBits(piece, std::vector<float>(all.begin() + long(at), all.end())));
      CHECK(sameBits(pgrad, std::vector<float>(grad.begin() + long(at), grad.end())));
    }
  }
}

TEST_CASE("biasGeluForward and geluBackwardSet equal their unfused sequences", "[unit]") {
  const int rows = 7, cols = 37;
  const size_t n = size_t(rows) * cols;
  std::vector<float> pre(n), bias(cols), dout(n);
  for (size_t i = 0; i < n; ++i) {
    pre[i] = float(int(i % 29) - 14) / 5.0f;
    dout[i] = i % 5 == 0 ? -0.0f : float(int(i % 11) - 5) / 3.0f;  // -0 products: sign matters
  }
  for (int j = 0; j < cols; ++j) bias[size_t(j)] = float(j % 7 - 3) / 9.0f;
  std::vector<float> added = pre, ref(n), fusedPre = pre, fused(n);
  for (size_t i = 0; i < n; ++i) added[i] += bias[i % size_t(cols)];
  geluForward(ref.data(), added.data(), n);
  biasGeluForward(fused.data(), fusedPre.data(), bias.data(), rows, cols);
  CHECK(sameBits(fusedPre, added));
  CHECK(sameBits(fused, ref));

  std::vector<float> zeroed(n, 0.0f), set(n, 123.0f);
  geluBackward(zeroed.data(), added.data(), dout.data(), n);
  geluBackwardSet(set.data(), added.data(), dout.data(), n);
  CHECK(sameBits(set, zeroed));
}
