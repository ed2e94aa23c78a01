// Counter-based normal init (see param_init.h): splitmix64 hashes -> Box-Muller.
#include "runtime/model/param_init.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double unit(uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

void fillNormal(float* x, size_t n, float stddev, uint64_t seed, uint64_t tensor) {
  fillNormalAt(x, 0, n, stddev, seed, tensor);
}

void fillNormalAt(float* x, size_t first, size_t n, float stddev, uint64_t seed, uint64_t tensor) {
  uint64_t key = splitmix64(seed ^ splitmix64(tensor + 0x5eedull));
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < n; ++j) {
    const uint64_t e = first + j;
    uint64_t h1 = splitmix64(key + 2 * e);
    uint64_t h2 = splitmix64(key + 2 * e + 1);
    double r = std::sqrt(-2.0 * std::log(unit(h1)));
    double z = r * std::cos(6.283185307179586 * unit(h2));
    x[j] = static_cast<float>(z * stddev);
  }
}

void fillConstant(float* x, size_t n, float v) {
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < n; ++j) x[j] = v;
}

void fillParamRange(float* x, size_t first, size_t n, const ParamInitRule& rule, uint64_t seed,
                    uint64_t index) {
  const size_t live = rule.zeroFrom <= first ? 0 : std::min(n, rule.zeroFrom - first);
  if (rule.normal) fillNormalAt(x, first, live, rule.stddev, seed, index);
  else fillConstant(x, live, rule.value);
  fillConstant(x + live, n - live, 0.f);
}

}  // namespace ds::runtime
