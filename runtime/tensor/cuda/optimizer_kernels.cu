// CudaOps Adam/AdamW and SGD over lists of DecayRange, one launch per 64 ranges, with the bf16
// copy of the updated params written in the same pass. Not a second definition of the update:
// the arithmetic is zero/cpu_adam_math.h's adamAt/sgdAt, step for step, with explicit rounding
// intrinsics. Invariant: results are bit-identical to zero::adamStep/sgdStep with Isa::kScalar.
#include "runtime/tensor/cuda/cuda_check.h"
#include "runtime/tensor/cuda/cuda_ops.h"
#include "zero/cpu_adam_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace ds::runtime::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRanges = 64;         // ranges per launch (the table travels as a kernel argument)
constexpr unsigned kMaxBlocks = 4096;  // grid-stride beyond this

// The ranges of one launch: element i of the concatenation lies in range r with
// begin[r] <= i < begin[r + 1], at flat index offset[r] + (i - begin[r]).
struct RangeTable {
  size_t offset[kMaxRanges];
  size_t begin[kMaxRanges + 1];
  bool decay[kMaxRanges];
  int count;
};

// The step's coefficients come from zero/cpu_adam_kernels.h (adamCoeffs, sgdCoeffs): the same
// host computation as the CPU engine's, so both start from the same floats.
using zero::kernels::AdamCoeffs;
using zero::kernels::SgdCoeffs;

// Round to nearest even, NaN kept (zero/cpu_adam_math.h's bf16Bits).
__device__ __forceinline__ uint16_t bf16Bits(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ __forceinline__ int findRange(const RangeTable& table, size_t i) {
  int lo = 0, hi = table.count - 1;  // the last range whose begin <= i
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.begin[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// cpu_adam_math.h's adamAt on one element: the same fp32 operations in the same order, each
// rounded once (__fmul_rn and fmaf are never contracted or split by the compiler).
// decay false: the coefficients of weight decay 0 (only l2Mode and decoupledOn differ).
__device__ __forceinline__ void adamAt(const AdamCoeffs& k, bool decay, float* params,
                                       const float* grads, float* expAvg, float* expAvgSq,
                                       size_t idx, bf16* out16) {
  float grad = __fmul_rn(grads[idx], k.gradScale);
  float param = params[idx];
  if (decay && k.l2Mode) grad = fmaf(param, k.l2Decay, grad);
  const float mom = fmaf(grad, k.oneMinusBeta1, __fmul_rn(expAvg[idx], k.beta1));
  const float var = fmaf(__fmul_rn(grad, grad), k.oneMinusBeta2, __fmul_rn(expAvgSq[idx], k.beta2));
  const float denom = fmaf(__fsqrt_rn(var), k.bc2RsqrtInv, k.eps);
  const float update = __fdiv_rn(mom, denom);
  if (decay && k.decoupledOn) param = fmaf(param, k.decoupled, param);
  param = fmaf(update, k.stepSize, param);
  params[idx] = param;
  expAvg[idx] = mom;
  expAvgSq[idx] = var;
  if (out16 != nullptr) out16[idx].bits = bf16Bits(param);
}

// cpu_adam_math.h's sgdAt on one element.
// decay false: the coefficients of weight decay 0 (only the decay flag differs).
__device__ __forceinline__ void sgdAt(const SgdCoeffs& k, bool decay, float* params,
                                      const float* grads, float* buf, size_t idx, bf16* out16) {
  float grad = __fmul_rn(grads[idx], k.gradScale);
  float param = params[idx];
  if (decay && k.decay) grad = fmaf(param, k.weightDecay, grad);
  if (k.useMomentum) {
    grad = fmaf(buf[idx], k.momentum, grad);
    buf[idx] = grad;
  }
  param = fmaf(grad, k.negLr, param);
  params[idx] = param;
  if (out16 != nullptr) out16[idx].bits = bf16Bits(param);
}

__global__ void __launch_bounds__(kThreads)
    adamKernel(float* params, float* expAvg, float* expAvgSq, const float* grads, bf16* out16,
               const RangeTable table, const AdamCoeffs coeffs) {
  const size_t total = table.begin[table.count];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int r = findRange(table, i);
    const size_t idx = table.offset[r] + (i - table.begin[r]);
    adamAt(coeffs, table.decay[r], params, grads, expAvg, expAvgSq, idx, out16);
  }
}

__global__ void __launch_bounds__(kThreads)
    sgdKernel(float* params, float* buf, const float* grads, bf16* out16, const RangeTable table,
              const SgdCoeffs coeffs) {
  const size_t total = table.begin[table.count];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int r = findRange(table, i);
    const size_t idx = table.offset[r] + (i - table.begin[r]);
    sgdAt(coeffs, table.decay[r], params, grads, buf, idx, out16);
  }
}

AdamCoeffs adamCoeffs(const AdamStep& step) {
  return zero::kernels::adamCoeffs({step.lr, step.beta1, step.beta2, step.eps, step.weightDecay,
                                    step.adamw, step.biasCorrection},
                                   step.step, step.gradScale);
}

SgdCoeffs sgdCoeffs(const SgdStep& step) {
  return zero::kernels::sgdCoeffs(step.lr, step.momentum, step.weightDecay, step.gradScale);
}

// Splits ranges into tables of at most kMaxRanges and calls launch(table, blocks) for each.
template <class Launch>
void forEachTable(const DecayRange* ranges, int count, Launch&& launch) {
  for (int first = 0; first < count; first += kMaxRanges) {
    RangeTable table{};
    table.count = std::min(kMaxRanges, count - first);
    size_t total = 0;
    for (int r = 0; r < table.count; ++r) {
      const DecayRange& range = ranges[first + r];
      table.offset[r] = range.offset;
      table.begin[r] = total;
      table.decay[r] = range.decay;
      total += range.size;
    }
    table.begin[table.count] = total;
    if (total == 0) continue;
    const size_t blocks = (total + kThreads - 1) / kThreads;
    launch(table, static_cast<unsigned>(std::min<size_t>(blocks, kMaxBlocks)));
  }
}

}  // namespace

void CudaOps::adam(float* params, float* expAvg, float* expAvgSq, const float* grads, bf16* out16,
                   const DecayRange* ranges, int count, const AdamStep& step) {
  if (step.step < 1)
    throw InternalError("CudaOps::adam: step count " + std::to_string(step.step) +
                        " (must count this step, from 1)");
  const AdamCoeffs coeffs = adamCoeffs(step);
  forEachTable(ranges, count, [&](const RangeTable& table, unsigned blocks) {
    adamKernel<<<blocks, kThreads, 0, stream_>>>(params, expAvg, expAvgSq, grads, out16, table,
                                                 coeffs);
    DS_CUDA_LAUNCHED("adamKernel");
  });
}

void CudaOps::sgd(float* params, float* momentum, const float* grads, bf16* out16,
                  const DecayRange* ranges, int count, const SgdStep& step) {
  if (step.momentum != 0.f && momentum == nullptr)
    throw InternalError("CudaOps::sgd: momentum " + std::to_string(step.momentum) +
                        " needs a momentum buffer");
  const SgdCoeffs coeffs = sgdCoeffs(step);
  forEachTable(ranges, count, [&](const RangeTable& table, unsigned blocks) {
    sgdKernel<<<blocks, kThreads, 0, stream_>>>(params, momentum, grads, out16, table, coeffs);
    DS_CUDA_LAUNCHED("sgdKernel");
  });
}

}  // namespace ds::runtime::cuda
