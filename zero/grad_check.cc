// Gradient norm, overflow check and the unscale/clip multiplier.
#include "zero/grad_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "zero/dp_comm.h"

namespace ds::zero {

bool GradCheck::finite() const { return std::isfinite(sumSquares); }

GradCheck checkGradients(const float* grads, size_t count, bool replicated, DpComm& comm,
                         float lossScale) {
  double local = 0;
  for (size_t i = 0; i < count; ++i) local += double(grads[i]) * double(grads[i]);
  GradCheck check;
  check.sumSquares = local;
  if (!replicated) {
    auto all = comm.allgatherDouble(local);
    check.sumSquares = std::accumulate(all.begin(), all.end(), 0.0);
  }
  check.norm = float(std::sqrt(check.sumSquares) / double(comm.world()) / double(lossScale));
  return check;
}

float gradientMultiplier(const GradCheck& check, float clipNorm, int world, float lossScale) {
  const double norm = double(check.norm);
  const double clip = clipNorm > 0 ? std::max(1.0, (norm + 1e-6) / double(clipNorm)) : 1.0;
  return float(1.0 / (double(world) * double(lossScale) * clip));
}

}  // namespace ds::zero
