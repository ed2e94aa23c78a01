// gemv driver (see gemv.h): ISA choice and the split of output columns over OpenMP threads.
#include "runtime/tensor/gemv.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/tensor/bf16_convert.h"
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

// Threads take chunks of output columns (a multiple of 4 wide: the kernels' weight group, so every
// weight row is read by exactly one thread) from a shared counter, each chunk about kChunkBytes of
// weights: on a machine shared with other processes a thread that loses its core for a slice no
// longer holds a fixed half of the matrix while the other waits at the join (static halves did).
// A column's sum does not depend on which thread or chunk computes it, so results stay independent
// of the thread count and of the schedule.
constexpr long kChunkBytes = 64L * 1024;

template <typename T, typename Kernel>
void split(const GemvArgs& a, const T* w, Kernel kernel) {
  const long work = long(a.N) * a.C * a.OC;
  const int groups = (a.OC + 3) / 4;
  const long groupBytes = 4L * a.C * long(sizeof(T));
  const int chunk = int(std::max(1L, kChunkBytes / std::max(1L, groupBytes)));
  std::atomic<int> next{0};
#pragma omp parallel if (work >= kMinParallelWork)
  {
    for (int g0 = next.fetch_add(chunk); g0 < groups; g0 = next.fetch_add(chunk)) {
      const int g1 = std::min(groups, g0 + chunk);
      kernel(a, w, 4 * g0, std::min(4 * g1, a.OC));
    }
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

bool gemvBf16DotSupported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return gemvIsaSupported(GemvIsa::kAvx512) && __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return supported;
}

void gemvForwardBf16Dot(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                        int C, int OC) {
  if (!gemvBf16DotSupported())
    throw InternalError(
        "gemv: the bf16 dot-product kernel needs AVX512-BF16, which this CPU lacks");
  if (N < 1 || OC < 1) return;
  // The input rounded to bf16 once per call, rows padded with zeros to a multiple of 32 columns;
  // thread_local and grown to the largest call, so steady-state decoding allocates nothing.
  thread_local std::vector<bf16> rounded;
  const size_t ldx = (size_t(C) + 31) / 32 * 32;
  if (rounded.size() < size_t(N) * ldx) rounded.resize(size_t(N) * ldx);
  for (size_t n = 0; n < size_t(N); ++n) {
    bf16* row = rounded.data() + n * ldx;
    f32ToBf16(row, inp + n * size_t(C), size_t(C));
    std::fill(row + C, row + ldx, bf16{});
  }
  const detail::GemvDotArgs args{
      out, reinterpret_cast<const uint16_t*>(rounded.data()), bias, N, C, OC, int(ldx)};
  // GemvArgs only for split's work and chunk sizes (the kernel reads args).
  const GemvArgs shape{out, inp, bias, N, C, OC};
  split(shape, reinterpret_cast<const uint16_t*>(weight),
        [&args](const GemvArgs&, const uint16_t* wgt, int o0, int o1) {
          detail::gemvAvx512Bf16Dot(args, wgt, o0, o1);
        });
}

}  // namespace ds::runtime
