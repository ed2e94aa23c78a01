// Gradient norm, overflow check and the unscale/clip multiplier.
#include "zero/grad_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "zero/dp_comm.h"

namespace ds::zero {
namespace {

// Fixed chunking for the sum of squares: each chunk's partial is a serial double sum and the
// partials are added in chunk order, so the result depends only on kNormChunk, never on the
// thread count (bitwise the same with 1 thread or 16).
constexpr size_t kNormChunk = size_t(1) << 16;

double sumSquares(const float* grads, size_t count) {
  const size_t chunks = (count + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(chunks, 0.0);
#pragma omp parallel for schedule(static) if (chunks > 16)
  for (long c = 0; c < long(chunks); ++c) {
    const size_t begin = size_t(c) * kNormChunk;
    const size_t end = std::min(count, begin + kNormChunk);
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += double(grads[i]) * double(grads[i]);
    partial[size_t(c)] = sum;
  }
  return std::accumulate(partial.begin(), partial.end(), 0.0);
}

}  // namespace

bool GradCheck::finite() const { return std::isfinite(sumSquares); }

GradCheck checkGradients(const float* grads, size_t count, bool replicated, DpComm& comm, int world,
                         float lossScale) {
  const double local = sumSquares(grads, count);
  GradCheck check;
  check.sumSquares = local;
  if (!replicated) {
    auto all = comm.allgatherDouble(local);
    check.sumSquares = std::accumulate(all.begin(), all.end(), 0.0);
  }
  check.norm = float(std::sqrt(check.sumSquares) / double(world) / double(lossScale));
  return check;
}

GradCheck checkGradientsAcrossStages(const float* grads, size_t count,
                                     const std::vector<std::pair<size_t, size_t>>& skip,
                                     bool replicated, DpComm& comm, int world, float lossScale,
                                     const std::function<double(double)>& acrossStages) {
  double local = 0;
  size_t begin = 0;
  for (const auto& [skipBegin, skipEnd] : skip) {
    const size_t end = std::min(skipBegin, count);
    if (end > begin) local += sumSquares(grads + begin, end - begin);
    begin = std::max(begin, std::min(skipEnd, count));
  }
  if (count > begin) local += sumSquares(grads + begin, count - begin);
  GradCheck check;
  check.sumSquares = local;
  if (!replicated) {
    auto all = comm.allgatherDouble(local);
    check.sumSquares = std::accumulate(all.begin(), all.end(), 0.0);
  }
  if (acrossStages) check.sumSquares = acrossStages(check.sumSquares);
  check.norm = float(std::sqrt(check.sumSquares) / double(world) / double(lossScale));
  return check;
}

float gradientMultiplier(const GradCheck& check, float clipNorm, int world, float lossScale) {
  const double norm = double(check.norm);
  const double clip = clipNorm > 0 ? std::max(1.0, (norm + 1e-6) / double(clipNorm)) : 1.0;
  return float(1.0 / (double(world) * double(lossScale) * clip));
}

}  // namespace ds::zero
