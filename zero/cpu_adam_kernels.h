// Per-ISA kernels of cpu_adam (internal to zero/): one contiguous chunk, single thread, each the
// arithmetic of cpu_adam_math.h on that ISA's lanes. The coefficients are precomputed once per
// step so every path performs the same fp32 operations.
// Not a public API (use zero/cpu_adam.h), except adamCoeffs/sgdCoeffs and their structs, which the
// CUDA optimizer shares.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::zero::kernels {

struct AdamCoeffs {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps;
  float stepSize;     // -lr / (1 - beta1^t)
  float bc2RsqrtInv;  // 1 / sqrt(1 - beta2^t)
  float l2Decay;      // wd (Adam mode), used iff l2Mode
  float decoupled;    // -lr*wd (AdamW mode), used iff decoupledOn
  float gradScale;
  bool l2Mode, decoupledOn;
};

struct SgdCoeffs {
  float negLr, momentum, weightDecay, gradScale;
  bool useMomentum, decay;
};

// The coefficients of one step, computed once on the host. Also what the CUDA optimizer kernels
// (runtime/tensor/cuda/optimizer_kernels.cu) run on, so both devices start from the same floats.
struct AdamConfigView {
  float lr, beta1, beta2, eps, weightDecay;
  bool adamwMode, biasCorrection;
};
AdamCoeffs adamCoeffs(const AdamConfigView& cfg, int64_t step, float gradScale);
SgdCoeffs sgdCoeffs(float learningRate, float momentum, float weightDecay, float gradScale);

// out16Kind: 0 none, 1 bf16, 2 fp16.
void adamScalar(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t count, uint16_t* out16, int out16Kind);
void adamAvx2(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
              float* expAvgSq, size_t count, uint16_t* out16, int out16Kind);
void adamAvx512(const AdamCoeffs& coeffs, float* params, const float* grads, float* expAvg,
                float* expAvgSq, size_t count, uint16_t* out16, int out16Kind);

void sgdScalar(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
               uint16_t* out16, int out16Kind);
void sgdAvx2(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
             uint16_t* out16, int out16Kind);
void sgdAvx512(const SgdCoeffs& coeffs, float* params, const float* grads, float* buf, size_t count,
               uint16_t* out16, int out16Kind);

void to16Scalar(const float* src, uint16_t* dst, size_t count, int kind);
void to16Avx2(const float* src, uint16_t* dst, size_t count, int kind);
void to16Avx512(const float* src, uint16_t* dst, size_t count, int kind);

}  // namespace ds::zero::kernels
