// CPU optimizer dispatch: per-step coefficients, ISA choice, OpenMP chunking (see cpu_adam.h).
#include "zero/cpu_adam.h"

#include <cpuid.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "zero/cpu_adam_kernels.h"
#include "zero/zero_knobs.h"

namespace ds::zero {
namespace {

constexpr size_t kChunk = 1 << 15;  // elements per OpenMP work item (multiple of every width)

int kind16(const Half16Out& out) {
  if (out.data == nullptr || out.kind == DType::kF32) return 0;
  if (out.kind == DType::kBF16) return 1;
  if (out.kind == DType::kF16) return 2;
  throw InternalError("cpu_adam: 16-bit copy must be bf16 or fp16");
}

// Runs body(offset, size) over [0, count) in chunks, in parallel.
template <typename Body>
void forChunks(size_t count, int threads, Body&& body) {
  const long chunks = static_cast<long>((count + kChunk - 1) / kChunk);
  if (chunks <= 1) {
    if (count) body(size_t(0), count);
    return;
  }
  const int numThreads = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(numThreads)
  for (long chunk = 0; chunk < chunks; ++chunk) {
    size_t offset = size_t(chunk) * kChunk;
    body(offset, std::min(kChunk, count - offset));
  }
}

// F16C from CPUID leaf 1 (ECX bit 29), what __builtin_cpu_supports("f16c") reads; clang before 16
// (clang-tidy 14 among them) does not know that feature name.
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

}  // namespace

std::string_view isaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool isaSupported(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
    case Isa::kAvx512: return __builtin_cpu_supports("avx512f") && isaSupported(Isa::kAvx2);
  }
  return false;
}

Isa bestIsa() {
  static const Isa best = [] {
    if (auto name = knobChoice(knobs::kCpuAdamIsa)) {
      Isa want = *name == "scalar" ? Isa::kScalar : *name == "avx2" ? Isa::kAvx2 : Isa::kAvx512;
      if (!isaSupported(want))
        throw ConfigError("DS_CPU_ADAM_ISA=" + *name + ": this CPU does not support it");
      return want;
    }
    if (isaSupported(Isa::kAvx512)) return Isa::kAvx512;
    if (isaSupported(Isa::kAvx2)) return Isa::kAvx2;
    return Isa::kScalar;
  }();
  return best;
}

namespace kernels {

AdamCoeffs adamCoeffs(const AdamConfigView& cfg, int64_t step, float gradScale) {
  AdamCoeffs coeffs{};
  float bc1 = 1.f, bc2 = 1.f;
  if (cfg.biasCorrection) {
    bc1 = 1.f - static_cast<float>(std::pow(double(cfg.beta1), double(step)));
    bc2 = 1.f - static_cast<float>(std::pow(double(cfg.beta2), double(step)));
  }
  coeffs.beta1 = cfg.beta1;
  coeffs.beta2 = cfg.beta2;
  coeffs.oneMinusBeta1 = 1.f - cfg.beta1;
  coeffs.oneMinusBeta2 = 1.f - cfg.beta2;
  coeffs.eps = cfg.eps;
  coeffs.stepSize = -cfg.lr / bc1;
  coeffs.bc2RsqrtInv = 1.f / std::sqrt(bc2);
  coeffs.l2Mode = cfg.weightDecay > 0 && !cfg.adamwMode;
  coeffs.l2Decay = cfg.weightDecay;
  coeffs.decoupledOn = cfg.weightDecay > 0 && cfg.adamwMode;
  coeffs.decoupled = -cfg.lr * cfg.weightDecay;
  coeffs.gradScale = gradScale;
  return coeffs;
}

SgdCoeffs sgdCoeffs(float learningRate, float momentum, float weightDecay, float gradScale) {
  SgdCoeffs coeffs{};
  coeffs.negLr = -learningRate;
  coeffs.momentum = momentum;
  coeffs.weightDecay = weightDecay;
  coeffs.gradScale = gradScale;
  coeffs.useMomentum = momentum != 0.f;
  coeffs.decay = weightDecay != 0.f;
  return coeffs;
}

}  // namespace kernels

void adamStep(Isa isa, const AdamConfig& cfg, int64_t step, float gradScale, float* params,
              const float* grads, float* expAvg, float* expAvgSq, size_t count, Half16Out out16,
              int threads) {
  DS_CHECK(step >= 1, "adam step count {} (must count this step)", step);
  DS_CHECK(isaSupported(isa), "ISA {} not supported here", isaName(isa));
  const kernels::AdamCoeffs coeffs = kernels::adamCoeffs(
      {cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weightDecay, cfg.adamwMode, cfg.biasCorrection},
      step, gradScale);
  const int kind = kind16(out16);
  auto kernel = isa == Isa::kAvx512 ? kernels::adamAvx512
                : isa == Isa::kAvx2 ? kernels::adamAvx2
                                    : kernels::adamScalar;
  forChunks(count, threads, [&](size_t offset, size_t cnt) {
    kernel(coeffs, params + offset, grads + offset, expAvg + offset, expAvgSq + offset, cnt,
           kind ? out16.data + offset : nullptr, kind);
  });
}

void sgdStep(Isa isa, const SgdConfig& cfg, float gradScale, float* params, const float* grads,
             float* buf, size_t count, Half16Out out16, int threads) {
  DS_CHECK(isaSupported(isa), "ISA {} not supported here", isaName(isa));
  const kernels::SgdCoeffs coeffs =
      kernels::sgdCoeffs(cfg.lr, cfg.momentum, cfg.weightDecay, gradScale);
  DS_CHECK(!coeffs.useMomentum || buf != nullptr, "sgd momentum needs a buffer");
  const int kind = kind16(out16);
  auto kernel = isa == Isa::kAvx512 ? kernels::sgdAvx512
                : isa == Isa::kAvx2 ? kernels::sgdAvx2
                                    : kernels::sgdScalar;
  forChunks(count, threads, [&](size_t offset, size_t cnt) {
    kernel(coeffs, params + offset, grads + offset, buf ? buf + offset : nullptr, cnt,
           kind ? out16.data + offset : nullptr, kind);
  });
}

void convertTo16(const float* src, Half16Out out, size_t count) {
  const int kind = kind16(out);
  if (!kind) return;
  Isa isa = bestIsa();
  auto kernel = isa == Isa::kAvx512 ? kernels::to16Avx512
                : isa == Isa::kAvx2 ? kernels::to16Avx2
                                    : kernels::to16Scalar;
  forChunks(count, 0,
            [&](size_t offset, size_t cnt) { kernel(src + offset, out.data + offset, cnt, kind); });
}

}  // namespace ds::zero
