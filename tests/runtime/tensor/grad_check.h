// Finite-difference gradient checking for the kernel and model tests (header-only test helper).
// Central differences in fp32 arithmetic: f(x+h) - f(x-h) over 2h. Error budget for the
// tolerances used by callers: truncation ~h^2/6*|f'''| (h = 1e-2 -> ~2e-5) plus rounding
// ~eps_fp32*|f|*sqrt(ops)/h (~1e-4 for O(1) losses). Not a test of speed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ds::test {

struct GradCheckResult {
  double maxAbsErr = 0;  // max |analytic - numeric| over probed elements
  double relL2 = 0;      // ||analytic - numeric|| / max(||numeric||, tiny) over probed elements
  double maxExcess = 0;  // max of |a - n| - (atol + rtol |n|); <= 0 means every probe passed
  size_t probes = 0;
};

// Probes up to maxProbes elements of x (evenly strided, always including the first and last),
// restoring x afterwards. f() must recompute the loss from the current x.
inline GradCheckResult checkGradient(const std::function<double()>& f, float* x, size_t n,
                                     const float* analytic, float h, double atol, double rtol,
                                     size_t maxProbes = 4000) {
  GradCheckResult r;
  const size_t stride = n <= maxProbes ? 1 : (n + maxProbes - 1) / maxProbes;
  double num2 = 0, diff2 = 0;
  auto probe = [&](size_t i) {
    const float orig = x[i];
    x[i] = orig + h;
    const double fp = f();
    x[i] = orig - h;
    const double fm = f();
    x[i] = orig;
    const double numeric = (fp - fm) / (2.0 * static_cast<double>(h));
    const double err = std::fabs(analytic[i] - numeric);
    r.maxAbsErr = std::max(r.maxAbsErr, err);
    const double excess = err - (atol + rtol * std::fabs(numeric));
    r.maxExcess = r.probes == 0 ? excess : std::max(r.maxExcess, excess);
    num2 += numeric * numeric;
    diff2 += err * err;
    ++r.probes;
  };
  for (size_t i = 0; i < n; i += stride) probe(i);
  if (n > 0 && (n - 1) % stride != 0) probe(n - 1);
  r.relL2 = std::sqrt(diff2) / std::max(std::sqrt(num2), 1e-30);
  return r;
}

// Deterministic uniform values in [-scale, scale) (SplitMix64), for test inputs.
inline void fillUniform(float* x, size_t n, float scale, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = scale * (2.0f * static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) - 1.0f);
  }
}

inline std::vector<float> uniformVec(size_t n, float scale, uint64_t seed) {
  std::vector<float> v(n);
  fillUniform(v.data(), n, scale, seed);
  return v;
}

// sum_i w[i] * y[i] in double: the scalar loss whose gradient w.r.t. y is w.
inline double dotLoss(const float* y, const float* w, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(y[i]) * w[i];
  return s;
}

}  // namespace ds::test
