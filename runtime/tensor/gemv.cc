// gemv driver (see gemv.h): ISA choice and the split of output columns over OpenMP threads.
#include "runtime/tensor/gemv.h"

#include <omp.h>

#include <cstddef>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/tensor/gemv_kernels.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {

void detail::permuteEvenOdd32(float* dst, const float* src, int N, int C) {
  const size_t c = size_t(C), c32 = c / 32 * 32;
  for (size_t n = 0; n < size_t(N); ++n) {
    const float* s = src + n * c;
    float* d = dst + n * c;
    for (size_t k = 0; k < c32; k += 32)
      for (size_t i = 0; i < 16; ++i) {
        d[k + i] = s[k + 2 * i];
        d[k + 16 + i] = s[k + 2 * i + 1];
      }
    for (size_t k = c32; k < c; ++k) d[k] = s[k];
  }
}

namespace {

using detail::GemvArgs;

// Each thread takes a contiguous range of output columns, a multiple of 4 wide (the kernels'
// weight group), so every weight row is read by exactly one thread.
template <typename T, typename Kernel>
void split(const GemvArgs& a, const T* w, Kernel kernel) {
  const long work = long(a.N) * a.C * a.OC;
  const int groups = (a.OC + 3) / 4;
#pragma omp parallel if (work >= kMinParallelWork)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int g0 = int(long(groups) * t / nt), g1 = int(long(groups) * (t + 1) / nt);
    const int o0 = 4 * g0, o1 = 4 * g1 < a.OC ? 4 * g1 : a.OC;
    if (o0 < o1) kernel(a, w, o0, o1);
  }
}

// Scratch for the permuted input of the AVX-512 bf16 kernel: grows to the largest N * C seen, so
// steady-state decoding allocates nothing.
float* permuted(const float* inp, int N, int C) {
  thread_local std::vector<float> buf;
  const size_t n = size_t(N) * size_t(C);
  if (buf.size() < n) buf.resize(n);
  detail::permuteEvenOdd32(buf.data(), inp, N, C);
  return buf.data();
}

void check(GemvIsa isa) {
  if (!gemvIsaSupported(isa))
    throw InternalError(fmt::format("gemv: ISA {} is not supported on this CPU", gemvIsaName(isa)));
}

}  // namespace

const char* gemvIsaName(GemvIsa isa) {
  switch (isa) {
    case GemvIsa::kScalar: return "scalar";
    case GemvIsa::kAvx2: return "avx2";
    case GemvIsa::kAvx512: return "avx512";
  }
  return "?";
}

bool gemvIsaSupported(GemvIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case GemvIsa::kScalar: return true;
    case GemvIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemvIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

GemvIsa gemvBestIsa() {
  static const GemvIsa best = gemvIsaSupported(GemvIsa::kAvx512) ? GemvIsa::kAvx512
                              : gemvIsaSupported(GemvIsa::kAvx2) ? GemvIsa::kAvx2
                                                                 : GemvIsa::kScalar;
  return best;
}

void gemvForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                 int OC, GemvIsa isa) {
  check(isa);
  if (N < 1 || OC < 1) return;
  const GemvArgs a{out, inp, bias, N, C, OC};
  switch (isa) {
    case GemvIsa::kScalar: split(a, weight, detail::gemvScalarF32); break;
    case GemvIsa::kAvx2: split(a, weight, detail::gemvAvx2F32); break;
    case GemvIsa::kAvx512: split(a, weight, detail::gemvAvx512F32); break;
  }
}

void gemvForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                     int C, int OC, GemvIsa isa) {
  check(isa);
  if (N < 1 || OC < 1) return;
  const GemvArgs a{out, inp, bias, N, C, OC};
  const auto* w = reinterpret_cast<const uint16_t*>(weight);
  switch (isa) {
    case GemvIsa::kScalar: split(a, w, detail::gemvScalarBf16); break;
    case GemvIsa::kAvx2: split(a, w, detail::gemvAvx2Bf16); break;
    case GemvIsa::kAvx512: {
      GemvArgs p = a;
      p.inp = permuted(inp, N, C);
      split(p, w, detail::gemvAvx512Bf16);
      break;
    }
  }
}

}  // namespace ds::runtime
