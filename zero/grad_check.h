// Gradient check before the optimizer: the global L2 norm of the averaged, unscaled gradients
// (overflow = a non-finite sum of squares: the step is skipped, in every dtype) and the one
// multiplier that unscales, averages and clips them (DeepSpeed's clip coefficient). Not the
// optimizer. Invariant: every rank computes the same norm and multiplier.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace ds::zero {

class DpComm;

struct GradCheck {
  double sumSquares = 0;  // over all ranks' partitions (this rank's alone when replicated)
  float norm = 0;         // sqrt(sumSquares) / world / lossScale
  bool finite() const;
};

// replicated: every rank holds the whole reduced gradient (stage 0), so no collective is needed.
// comm: the group whose partitions make up the gradient; world: how many ranks' gradients were
// summed into it (comm's size, except under MiCS, where the groups' sums are added too).
GradCheck checkGradients(const float* grads, size_t count, bool replicated, DpComm& comm, int world,
                         float lossScale);
// Pipeline parallelism: as checkGradients, leaving out the local elements [first, second) of
// `skip` (sorted, disjoint: a tied copy another pipeline stage counts) and then passing the data
// group's sum of squares to `acrossStages`, which returns the whole model's (the same on every
// rank of the pipeline group), so every rank clips and skips identically.
GradCheck checkGradientsAcrossStages(const float* grads, size_t count,
                                     const std::vector<std::pair<size_t, size_t>>& skip,
                                     bool replicated, DpComm& comm, int world, float lossScale,
                                     const std::function<double(double)>& acrossStages);
// grads * this = averaged, unscaled, clipped; clipNorm <= 0 disables clipping.
float gradientMultiplier(const GradCheck& check, float clipNorm, int world, float lossScale);

}  // namespace ds::zero
