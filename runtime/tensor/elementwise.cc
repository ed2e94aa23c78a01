// GELU and residual kernels (see elementwise.h). GELU: the ISA's kernel (gelu_kernels.h) over
// blocks of kBlock elements, the blocks split over OpenMP threads.
#include "runtime/tensor/elementwise.h"

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/tensor/gelu_kernels.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {
namespace {

constexpr size_t kBlock = 4096;  // elements per work item: 16 KiB of each operand, in L1/L2

void check(GeluIsa isa) {
  if (!geluIsaSupported(isa))
    throw InternalError(fmt::format("gelu: ISA {} is not supported on this CPU", geluIsaName(isa)));
}

void forwardRange(GeluIsa isa, float* out, float* pre, const float* inp, const float* bias,
                  size_t n) {
  if (isa == GeluIsa::kAvx512) {
    detail::geluForwardAvx512(out, pre, inp, bias, n);
  } else if (isa == GeluIsa::kAvx2) {
    detail::geluForwardAvx2(out, pre, inp, bias, n);
  } else {
    detail::geluForwardPortable(out, pre, inp, bias, n);
  }
}

void backward(GeluIsa isa, float* dinp, const float* inp, const float* dout, size_t n,
              bool accumulate) {
  const long blocks = long((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (long b = 0; b < blocks; ++b) {
    const size_t i0 = size_t(b) * kBlock, len = n - i0 < kBlock ? n - i0 : kBlock;
    if (isa == GeluIsa::kAvx512) {
      detail::geluBackwardAvx512(dinp + i0, inp + i0, dout + i0, len, accumulate);
    } else if (isa == GeluIsa::kAvx2) {
      detail::geluBackwardAvx2(dinp + i0, inp + i0, dout + i0, len, accumulate);
    } else {
      detail::geluBackwardPortable(dinp + i0, inp + i0, dout + i0, len, accumulate);
    }
  }
}

}  // namespace

const char* geluIsaName(GeluIsa isa) {
  switch (isa) {
    case GeluIsa::kPortable: return "portable";
    case GeluIsa::kAvx2: return "avx2";
    case GeluIsa::kAvx512: return "avx512";
  }
  return "?";
}

bool geluIsaSupported(GeluIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case GeluIsa::kPortable: return true;
    case GeluIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GeluIsa::kAvx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
}

GeluIsa geluBestIsa() {
  static const GeluIsa best = geluIsaSupported(GeluIsa::kAvx512) ? GeluIsa::kAvx512
                              : geluIsaSupported(GeluIsa::kAvx2) ? GeluIsa::kAvx2
                                                                 : GeluIsa::kPortable;
  return best;
}

void geluForward(float* out, const float* inp, size_t n, GeluIsa isa) {
  check(isa);
  const long blocks = long((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (long b = 0; b < blocks; ++b) {
    const size_t i0 = size_t(b) * kBlock, len = n - i0 < kBlock ? n - i0 : kBlock;
    forwardRange(isa, out + i0, nullptr, inp + i0, nullptr, len);
  }
}

void geluBackward(float* dinp, const float* inp, const float* dout, size_t n, GeluIsa isa) {
  check(isa);
  backward(isa, dinp, inp, dout, n, true);
}

void geluForward(float* out, const float* inp, size_t n) {
  geluForward(out, inp, n, geluBestIsa());
}

void geluBackward(float* dinp, const float* inp, const float* dout, size_t n) {
  backward(geluBestIsa(), dinp, inp, dout, n, true);
}

void geluBackwardSet(float* dinp, const float* inp, const float* dout, size_t n) {
  backward(geluBestIsa(), dinp, inp, dout, n, false);
}

void biasGeluForward(float* out, float* pre, const float* bias, int N, int OC) {
  const GeluIsa isa = geluBestIsa();
  const size_t oc = size_t(OC);
#pragma omp parallel for schedule(static) if (long(N) * OC >= kMinParallelWork)
  for (long row = 0; row < long(N); ++row) {
    float* p = pre + size_t(row) * oc;
    forwardRange(isa, out + size_t(row) * oc, p, p, bias, oc);
  }
}

void residualForward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void residualBackward(float* da, float* db, const float* dout, size_t n) {
#pragma omp parallel for schedule(static) if (long(n) >= kMinParallelWork)
  for (size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace ds::runtime
