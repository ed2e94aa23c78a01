// CPU optimizers for the fp32 master partition: Adam/AdamW (DeepSpeed's exact formula, zero.md §4)
// and SGD with momentum, vectorized with AVX-512 or AVX2 (chosen at run time), a scalar fallback,
// and OpenMP over chunks. The optional 16-bit (bf16 or fp16) parameter copy is written in the same
// pass. Not an owner of any buffer. Invariant: every ISA path computes bit-identical results to
// the scalar reference (the same sequence of fp32 fma/mul/sqrt/div per element).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace ds::zero {

enum class Isa { kScalar, kAvx2, kAvx512 };
std::string_view isaName(Isa isa);
Isa bestIsa();  // highest path this CPU supports (DS_CPU_ADAM_ISA overrides)
bool isaSupported(Isa isa);

struct AdamConfig {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.f;
  bool adamwMode = true;  // true: decoupled decay p -= lr*wd*p; false: L2 g += wd*p
  bool biasCorrection = true;
};

struct SgdConfig {
  float lr = 1e-3f, momentum = 0.f, weightDecay = 0.f;  // torch SGD, dampening 0, no nesterov
};

// 16-bit copy of the updated params, written in the same pass (kind kF32 = none).
struct Half16Out {
  DType kind = DType::kF32;  // kBF16 or kF16, or kF32 for "no copy"
  uint16_t* data = nullptr;
};

// One Adam step (step >= 1 is the count including this one) on count elements. grads are multiplied
// by gradScale first (unscale and clip in one multiply). threads <= 0: OpenMP default.
void adamStep(Isa isa, const AdamConfig& cfg, int64_t step, float gradScale, float* params,
              const float* grads, float* expAvg, float* expAvgSq, size_t count,
              Half16Out out16 = {}, int threads = 0);

// One SGD step: g' = g*gradScale + wd*p; buf = momentum*buf + g' (if momentum != 0);
// p -= lr * (buf or g'). buf may be null when momentum == 0.
void sgdStep(Isa isa, const SgdConfig& cfg, float gradScale, float* params, const float* grads,
             float* buf, size_t count, Half16Out out16 = {}, int threads = 0);

// Writes the 16-bit copy of count floats (round to nearest even, NaN kept) with the best ISA.
void convertTo16(const float* src, Half16Out out, size_t count);

}  // namespace ds::zero
