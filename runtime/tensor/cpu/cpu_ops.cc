// CpuOps (see cpu_ops.h): dtype check, then the host kernel. Memory is 64-byte aligned host memory;
// the only state is the attention backward scratch.
#include "runtime/tensor/cpu/cpu_ops.h"

#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/tensor/attention.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/fp16_round.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/threads.h"
#include "zero/cpu_adam.h"

namespace ds::runtime {
namespace {

constexpr size_t kAlign = 64;

void requireF32(DType dt, const char* op) {
  if (dt == DType::kF32) return;
  throw NotSupported(fmt::format(
      "CpuOps::{}: dtype {} not supported; cpu ops run fp32; bf16 on the CPU goes through "
      "Gpt2Model",
      op, dtypeName(dt)));
}

const float* f(const void* p) { return static_cast<const float*>(p); }
float* f(void* p) { return static_cast<float*>(p); }

size_t hostAvailableBytes() {
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(size) : 0;
}

}  // namespace

void* CpuOps::alloc(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = rounded >= bytes ? std::aligned_alloc(kAlign, rounded) : nullptr;
  if (p == nullptr) {
    throw OutOfMemoryError(fmt::format("cpu: cannot allocate {} bytes for {} ({} bytes available)",
                                       bytes, what, hostAvailableBytes()));
  }
  return p;
}

void CpuOps::release(void* ptr) noexcept { std::free(ptr); }

void CpuOps::upload(void* dst, const void* hostSrc, size_t bytes) {
  if (bytes) std::memcpy(dst, hostSrc, bytes);
}
void CpuOps::download(void* hostDst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(hostDst, src, bytes);
}
void CpuOps::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}
void CpuOps::zero(void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

void CpuOps::encoderForward(void* out, const int32_t* tokens, const void* wte, const void* wpe,
                            int B, int T, int C, DType dt) {
  requireF32(dt, "encoderForward");
  runtime::encoderForward(f(out), tokens, f(wte), f(wpe), B, T, C);
}

void CpuOps::encoderBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens,
                             int B, int T, int C, DType dt) {
  requireF32(dt, "encoderBackward");
  runtime::encoderBackward(dwte, dwpe, f(dout), tokens, B, T, C);
}

void CpuOps::layernormForward(void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int N, int C, DType dt) {
  requireF32(dt, "layernormForward");
  runtime::layernormForward(f(out), mean, rstd, f(inp), f(weight), f(bias), N, C);
}

void CpuOps::layernormBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean,
                               const float* rstd, int N, int C, DType dt) {
  requireF32(dt, "layernormBackward");
  runtime::layernormBackward(f(dinp), dweight, dbias, f(dout), f(inp), f(weight), mean, rstd, N, C);
}

// Composed of the separate ops: their bits.
void CpuOps::residualLayernormForward(void* res, void* out, float* mean, float* rstd, const void* a,
                                      const void* b, const void* weight, const void* bias, int N,
                                      int C, DType dt) {
  requireF32(dt, "residualLayernormForward");
  residualForward(res, a, b, static_cast<size_t>(N) * static_cast<size_t>(C), dt);
  layernormForward(out, mean, rstd, res, weight, bias, N, C, dt);
}

void CpuOps::matmulForward(void* out, const void* inp, const void* weight, const void* bias, int N,
                           int C, int OC, DType dt) {
  requireF32(dt, "matmulForward");
  runtime::matmulForward(f(out), f(inp), f(weight), f(bias), N, C, OC);
}

void CpuOps::matmulBackward(void* dinp, float* dweight, float* dbias, const void* dout,
                            const void* inp, const void* weight, int N, int C, int OC, DType dt) {
  requireF32(dt, "matmulBackward");
  runtime::matmulBackward(f(dinp), dweight, dbias, f(dout), f(inp), f(weight), N, C, OC);
}

// The product without its bias, then bias and GELU in one pass: Gpt2Model's sequence, so its
// bits (not matmulForward-with-bias's: there the sum starts from the bias).
void CpuOps::matmulGeluForward(void* out, void* pre, const void* inp, const void* weight,
                               const void* bias, int N, int C, int OC, DType dt) {
  requireF32(dt, "matmulGeluForward");
  matmulForward(pre, inp, weight, nullptr, N, C, OC, dt);
  runtime::biasGeluForward(f(out), f(pre), f(bias), N, OC);
}

// d(act) into a zeroed scratch by the accumulating matmulBackward, then GELU's backward into a
// zeroed dpre: the separate ops' sequence, so the same bits.
void CpuOps::matmulGeluBackward(void* dpre, float* dweight, float* dbias, const void* dout,
                                const void* act, const void* pre, const void* weight, int N, int C,
                                int OC, DType dt) {
  requireF32(dt, "matmulGeluBackward");
  const size_t n = static_cast<size_t>(N) * C;
  scratchGelu_.assign(n, 0.f);
  matmulBackward(scratchGelu_.data(), dweight, dbias, dout, act, weight, N, C, OC, dt);
  runtime::geluBackwardSet(f(dpre), f(pre), scratchGelu_.data(), n);
}

size_t CpuOps::attentionAuxBytes(int B, int T, int NH) const {
  return static_cast<size_t>(B) * NH * T * T * sizeof(float);
}

void CpuOps::attentionForward(void* out, void* aux, const void* qkv, int B, int T, int C, int NH,
                              DType dt) {
  requireF32(dt, "attentionForward");
  runtime::attentionForward(f(out), f(aux), f(qkv), B, T, C, NH);
}

void CpuOps::attentionBackward(void* dqkv, const void* dout, const void* qkv, const void* /*out*/,
                               const void* aux, int B, int T, int C, int NH, DType dt) {
  requireF32(dt, "attentionBackward");
  const size_t tt = static_cast<size_t>(T) * T;
  if (scratchTT_.size() < tt) scratchTT_.resize(tt);
  runtime::attentionBackward(f(dqkv), scratchTT_.data(), f(dout), f(qkv), f(aux), B, T, C, NH);
}

void CpuOps::geluForward(void* out, const void* inp, size_t n, DType dt) {
  requireF32(dt, "geluForward");
  runtime::geluForward(f(out), f(inp), n);
}

void CpuOps::geluBackward(void* dinp, const void* inp, const void* dout, size_t n, DType dt) {
  requireF32(dt, "geluBackward");
  runtime::geluBackward(f(dinp), f(inp), f(dout), n);
}

void CpuOps::residualForward(void* out, const void* a, const void* b, size_t n, DType dt) {
  requireF32(dt, "residualForward");
  runtime::residualForward(f(out), f(a), f(b), n);
}

void CpuOps::residualBackward(void* da, void* db, const void* dout, size_t n, DType dt) {
  requireF32(dt, "residualBackward");
  runtime::residualBackward(f(da), f(db), f(dout), n);
}

// Row by row through the host kernel on a copy of the row (the logits stay), so each row's
// -log p is the kernel's own, rounded once to fp32; lse is the same max and double sum.
void CpuOps::crossEntropyForward(const void* logits, float* losses, float* lse,
                                 const int32_t* targets, int N, int V, int ld, DType dt) {
  requireF32(dt, "crossEntropyForward");
  const float* x = f(logits);
#pragma omp parallel for schedule(static) if (long(N) * V >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    const float* row = x + static_cast<size_t>(n) * ld;
    std::vector<float> probs(row, row + V);
    losses[n] =
        static_cast<float>(softmaxCrossEntropyForward(probs.data(), targets + n, 1, V, nullptr));
    const float mx = *std::max_element(row, row + V);
    double sum = 0.0;
    for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
    lse[n] = static_cast<float>(mx + std::log(sum));
  }
}

// Recomputes each row's probabilities in place with the host kernel (not from lse), so the
// dlogits are bit for bit the host kernels' (Gpt2Model's); then the host backward in place.
void CpuOps::crossEntropyBackward(void* logitsToDlogits, const float* /*lse*/,
                                  const int32_t* targets, int N, int V, int ld, float scale,
                                  DType dt) {
  requireF32(dt, "crossEntropyBackward");
  float* x = f(logitsToDlogits);
#pragma omp parallel for schedule(static) if (long(N) * V >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    float* row = x + static_cast<size_t>(n) * ld;
    (void)softmaxCrossEntropyForward(row, targets + n, 1, V, nullptr);
    // In place is safe: the kernel reads p[j] only to write d[j] at the same index.
    softmaxCrossEntropyBackward(row, row, targets + n, 1, V, scale);
    std::fill(row + V, row + ld, 0.f);
  }
}

double CpuOps::sum(const float* x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s;
}

double CpuOps::sumSquares(const float* x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void CpuOps::scale(float* x, size_t n, float factor) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) x[i] *= factor;
}

void CpuOps::toBf16(bf16* dst16, const float* src, size_t n) { f32ToBf16(dst16, src, n); }

void CpuOps::toFp16(fp16* dst16, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst16[i] = floatToFp16(src[i]);
}

void CpuOps::roundToFp16(float* x, size_t n) { runtime::roundToFp16(x, n); }

namespace {
zero::Half16Out half16(bf16* out16, size_t offset) {
  if (out16 == nullptr) return {};
  return {DType::kBF16, reinterpret_cast<uint16_t*>(out16 + offset)};
}
}  // namespace

void CpuOps::adam(float* params, float* expAvg, float* expAvgSq, const float* grads, bf16* out16,
                  const DecayRange* ranges, int count, const AdamStep& step) {
  const zero::Isa isa = zero::bestIsa();
  for (int r = 0; r < count; ++r) {
    const DecayRange& range = ranges[r];
    zero::AdamConfig cfg;
    cfg.lr = step.lr;
    cfg.beta1 = step.beta1;
    cfg.beta2 = step.beta2;
    cfg.eps = step.eps;
    cfg.weightDecay = range.decay ? step.weightDecay : 0.f;
    cfg.adamwMode = step.adamw;
    cfg.biasCorrection = step.biasCorrection;
    const size_t o = range.offset;
    zero::adamStep(isa, cfg, step.step, step.gradScale, params + o, grads + o, expAvg + o,
                   expAvgSq + o, range.size, half16(out16, o));
  }
}

void CpuOps::sgd(float* params, float* momentum, const float* grads, bf16* out16,
                 const DecayRange* ranges, int count, const SgdStep& step) {
  const zero::Isa isa = zero::bestIsa();
  for (int r = 0; r < count; ++r) {
    const DecayRange& range = ranges[r];
    zero::SgdConfig cfg;
    cfg.lr = step.lr;
    cfg.momentum = step.momentum;
    cfg.weightDecay = range.decay ? step.weightDecay : 0.f;
    const size_t o = range.offset;
    zero::sgdStep(isa, cfg, step.gradScale, params + o, grads + o,
                  momentum != nullptr ? momentum + o : nullptr, range.size, half16(out16, o));
  }
}

std::unique_ptr<Ops> makeCpuOps() { return std::make_unique<CpuOps>(); }

}  // namespace ds::runtime
