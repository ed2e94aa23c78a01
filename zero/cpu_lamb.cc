// lambStep: see cpu_lamb.h. fp32 per element as the CUDA kernel; the two norms are summed in
// double (the kernel sums fp32 in a tree), which changes the ratio by rounding only.
#include "zero/cpu_lamb.h"

#include <cmath>

namespace ds::zero {
namespace {

float denominator(const LambConfig& cfg, float expAvgSq) {
  return cfg.epsInsideSqrt ? std::sqrt(expAvgSq + cfg.eps) : std::sqrt(expAvgSq) + cfg.eps;
}

}  // namespace

float lambStep(const LambConfig& cfg, int64_t step, float gradScale, float* params,
               const float* grads, float* expAvg, float* expAvgSq, size_t count, Half16Out out16) {
  double paramSq = 0, updateSq = 0;
  for (size_t i = 0; i < count; ++i) {
    const float grad = grads[i] * gradScale;
    expAvg[i] = cfg.beta1 * expAvg[i] + (1 - cfg.beta1) * grad;
    expAvgSq[i] = cfg.beta2 * expAvgSq[i] + (1 - cfg.beta2) * grad * grad;
    const float update = expAvg[i] / denominator(cfg, expAvgSq[i]) + cfg.weightDecay * params[i];
    paramSq += double(params[i]) * params[i];
    updateSq += double(update) * update;
  }
  const float paramNorm = float(std::sqrt(paramSq)), updateNorm = float(std::sqrt(updateSq));
  float ratio = 1.f;
  if (paramNorm != 0 && updateNorm != 0)
    ratio = std::fmin(std::fmax(paramNorm / updateNorm, cfg.minCoeff), cfg.maxCoeff);
  float stepSize = cfg.lr;
  if (cfg.biasCorrection) {
    // As the kernel's host code: the corrections are floats of a double power.
    const auto correction1 = float(1 - std::pow(double(cfg.beta1), double(step)));
    const auto correction2 = float(1 - std::pow(double(cfg.beta2), double(step)));
    stepSize = cfg.lr * std::sqrt(correction2) / correction1;
  }
  for (size_t i = 0; i < count; ++i) {
    const float update = expAvg[i] / denominator(cfg, expAvgSq[i]) + cfg.weightDecay * params[i];
    params[i] -= stepSize * ratio * update;
  }
  if (out16.kind != DType::kF32 && out16.data) convertTo16(params, out16, count);
  return ratio;
}

}  // namespace ds::zero
