// roundToFp16 (see fp16_round.h). The rounding works on fp32 bits: normal fp16 values keep 10
// mantissa bits (round to nearest even), fp16 subnormals are multiples of 2^-24.
#include "runtime/tensor/fp16_round.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ds::runtime {

void roundToFp16(float* x, size_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    const uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
    if (a >= 0x7f800000u) continue;  // inf, NaN
    float r;
    if (a >= 0x38800000u) {  // |x| >= 2^-14: fp16 normal range (or beyond)
      uint32_t v = a + 0xfffu + ((a >> 13) & 1u);
      v &= ~0x1fffu;
      std::memcpy(&r, &v, 4);
      if (r > 65504.f) r = kInf;  // 65520 and above round past fp16's largest finite value
    } else {                      // fp16 subnormals: multiples of 2^-24, ties to even
      float f;
      std::memcpy(&f, &a, 4);
      r = std::nearbyint(f * 16777216.f) * (1.f / 16777216.f);
    }
    uint32_t w;
    std::memcpy(&w, &r, 4);
    w |= sign;
    std::memcpy(&x[i], &w, 4);
  }
}

}  // namespace ds::runtime
