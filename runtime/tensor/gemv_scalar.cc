// Portable gemv kernel (see gemv_kernels.h): plain fp32 dot products, for CPUs without AVX2 and as
// the reference order the vector kernels are tested against.
#include <cstddef>
#include <cstring>

#include "runtime/tensor/gemv_kernels.h"

namespace ds::runtime::detail {
namespace {

inline float widen(float v) { return v; }
inline float widen(uint16_t v) {
  const uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename T>
void run(const GemvArgs& a, const T* w, int o0, int o1) {
  const size_t C = size_t(a.C), OC = size_t(a.OC);
  for (int o = o0; o < o1; ++o) {
    const T* wr = w + size_t(o) * C;
    for (int n = 0; n < a.N; ++n) {
      const float* x = a.inp + size_t(n) * C;
      float s = 0.0f;
      for (size_t k = 0; k < C; ++k) s += widen(wr[k]) * x[k];
      a.out[size_t(n) * OC + size_t(o)] = s + (a.bias ? a.bias[o] : 0.0f);
    }
  }
}

}  // namespace

void gemvScalarF32(const GemvArgs& a, const float* w, int o0, int o1) { run(a, w, o0, o1); }
void gemvScalarBf16(const GemvArgs& a, const uint16_t* w, int o0, int o1) { run(a, w, o0, o1); }

}  // namespace ds::runtime::detail
