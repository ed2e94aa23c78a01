// Lamb for the fp32 master of one parameter tensor, as DeepSpeed's FusedLamb computes it
// (csrc/lamb/fused_lamb_cuda_kernel.cu): Adam moments, update u = m / (sqrt(v) + eps) + wd * p
// (eps inside the sqrt with eps_inside_sqrt), trust ratio r = ||p|| / ||u|| clamped to
// [min_coeff, max_coeff] (1 when either norm is 0), p -= step_size * r * u with
// step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t) under bias correction, else lr. Moments are
// not bias-corrected inside u (FusedLamb's form). Not vectorized: one scalar pass for the moments
// and norms, one for the update. Not an owner of any buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "zero/cpu_adam.h"

namespace ds::zero {

struct LambConfig {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.f;
  float maxCoeff = 10.f, minCoeff = 0.01f;
  bool biasCorrection = true, epsInsideSqrt = false;
};

// One Lamb step (step >= 1 counts this one) over one whole parameter of count elements; grads
// are multiplied by gradScale first. Returns the trust ratio applied.
float lambStep(const LambConfig& cfg, int64_t step, float gradScale, float* params,
               const float* grads, float* expAvg, float* expAvgSq, size_t count,
               Half16Out out16 = {});

}  // namespace ds::zero
