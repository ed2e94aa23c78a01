// CPU optimizer dispatch: per-step coefficients, ISA choice, OpenMP chunking (see cpu_adam.h).
#include "zero/cpu_adam.h"

#include <cpuid.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "zero/cpu_adam_kernels.h"

namespace ds::zero {
namespace {

constexpr size_t kChunk = 1 << 15;  // elements per OpenMP work item (multiple of every width)

int kind16(const Half16Out& o) {
  if (o.data == nullptr || o.kind == DType::kF32) return 0;
  if (o.kind == DType::kBF16) return 1;
  if (o.kind == DType::kF16) return 2;
  throw InternalError("cpu_adam: 16-bit copy must be bf16 or fp16");
}

// Runs body(offset, count) over [0, n) in chunks, in parallel.
template <typename Body>
void forChunks(size_t n, int threads, Body&& body) {
  const long chunks = static_cast<long>((n + kChunk - 1) / kChunk);
  if (chunks <= 1) {
    if (n) body(size_t(0), n);
    return;
  }
  const int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nt)
  for (long c = 0; c < chunks; ++c) {
    size_t off = size_t(c) * kChunk;
    body(off, std::min(kChunk, n - off));
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
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && isaSupported(Isa::kAvx2);
  }
  return false;
}

Isa bestIsa() {
  static const Isa best = [] {
    if (const char* e = std::getenv("DS_CPU_ADAM_ISA"); e && *e) {
      std::string s(e);
      Isa want = s == "scalar" ? Isa::kScalar : s == "avx2" ? Isa::kAvx2
               : s == "avx512" ? Isa::kAvx512
               : throw ConfigError("DS_CPU_ADAM_ISA='" + s + "': expected scalar, avx2 or avx512");
      if (!isaSupported(want))
        throw ConfigError("DS_CPU_ADAM_ISA=" + s + ": this CPU does not support it");
      return want;
    }
    if (isaSupported(Isa::kAvx512)) return Isa::kAvx512;
    if (isaSupported(Isa::kAvx2)) return Isa::kAvx2;
    return Isa::kScalar;
  }();
  return best;
}

void adamStep(Isa isa, const AdamConfig& cfg, int64_t step, float gradScale, float* p,
              const float* g, float* m, float* v, size_t n, Half16Out out16, int threads) {
  DS_CHECK(step >= 1, "adam step count {} (must count this step)", step);
  DS_CHECK(isaSupported(isa), "ISA {} not supported here", isaName(isa));
  kernels::AdamCoeffs c{};
  float bc1 = 1.f, bc2 = 1.f;
  if (cfg.biasCorrection) {
    bc1 = 1.f - static_cast<float>(std::pow(double(cfg.beta1), double(step)));
    bc2 = 1.f - static_cast<float>(std::pow(double(cfg.beta2), double(step)));
  }
  c.beta1 = cfg.beta1;
  c.beta2 = cfg.beta2;
  c.oneMinusBeta1 = 1.f - cfg.beta1;
  c.oneMinusBeta2 = 1.f - cfg.beta2;
  c.eps = cfg.eps;
  c.stepSize = -cfg.lr / bc1;
  c.bc2RsqrtInv = 1.f / std::sqrt(bc2);
  c.l2 = cfg.weightDecay > 0 && !cfg.adamwMode;
  c.l2Decay = cfg.weightDecay;
  c.decoupledOn = cfg.weightDecay > 0 && cfg.adamwMode;
  c.decoupled = -cfg.lr * cfg.weightDecay;
  c.gradScale = gradScale;
  const int k = kind16(out16);
  auto fn = isa == Isa::kAvx512 ? kernels::adamAvx512
          : isa == Isa::kAvx2   ? kernels::adamAvx2
                                : kernels::adamScalar;
  forChunks(n, threads, [&](size_t off, size_t cnt) {
    fn(c, p + off, g + off, m + off, v + off, cnt, k ? out16.data + off : nullptr, k);
  });
}

void sgdStep(Isa isa, const SgdConfig& cfg, float gradScale, float* p, const float* g,
             float* buf, size_t n, Half16Out out16, int threads) {
  DS_CHECK(isaSupported(isa), "ISA {} not supported here", isaName(isa));
  kernels::SgdCoeffs c{};
  c.negLr = -cfg.lr;
  c.momentum = cfg.momentum;
  c.weightDecay = cfg.weightDecay;
  c.gradScale = gradScale;
  c.useMomentum = cfg.momentum != 0.f;
  c.decay = cfg.weightDecay != 0.f;
  DS_CHECK(!c.useMomentum || buf != nullptr, "sgd momentum needs a buffer");
  const int k = kind16(out16);
  auto fn = isa == Isa::kAvx512 ? kernels::sgdAvx512
          : isa == Isa::kAvx2   ? kernels::sgdAvx2
                                : kernels::sgdScalar;
  forChunks(n, threads, [&](size_t off, size_t cnt) {
    fn(c, p + off, g + off, buf ? buf + off : nullptr, cnt, k ? out16.data + off : nullptr, k);
  });
}

void convertTo16(const float* src, Half16Out out, size_t n) {
  const int k = kind16(out);
  if (!k) return;
  Isa isa = bestIsa();
  auto fn = isa == Isa::kAvx512 ? kernels::to16Avx512
          : isa == Isa::kAvx2   ? kernels::to16Avx2
                                : kernels::to16Scalar;
  forChunks(n, 0, [&](size_t off, size_t cnt) { fn(src + off, out.data + off, cnt, k); });
}

}  // namespace ds::zero
