// Bulk bf16 conversion (runtime/tensor/bf16_convert.h) bit for bit against the scalar
// ds::floatToBf16 / bf16ToFloat, on whatever path this CPU takes (AVX-512F vectors plus scalar
// tails, or scalar only), over a sweep of float bit patterns every sign and exponent (subnormals,
// ties to even, values that round up to inf, inf, quiet and signalling NaNs), at lengths around
// the 16-lane vectors and the 16384-element blocks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/tensor/bf16_convert.h"

using namespace ds;
using namespace ds::runtime;

namespace {

std::vector<float> patterns() {
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65537 * 3) bits.push_back(uint32_t(u));
  for (uint32_t hi : {0x0000u, 0x8000u, 0x7f7fu, 0xff7fu, 0x7f80u, 0xff80u, 0x7fc0u, 0x0080u})
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      bits.push_back(hi << 16 | lo);
  bits.push_back(0x7f800001u);  // signalling NaN
  bits.push_back(0xffbfffffu);  // negative NaN, payload that rounding would carry into inf
  std::vector<float> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * sizeof(float));
  return out;
}

uint32_t bitsOf(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

}  // namespace

TEST_CASE("f32ToBf16, bf16ToF32 and roundToBf16 equal the scalar conversion bit for bit",
          "[unit]") {
  const std::vector<float> all = patterns();
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(16384 + 33), all.size()}) {
    INFO("n " << n);
    const std::vector<float> src(all.begin(), all.begin() + long(n));
    std::vector<bf16> half(n);
    f32ToBf16(half.data(), src.data(), n);
    bool same = true;
    for (size_t i = 0; i < n; ++i) same = same && half[i].bits == floatToBf16(src[i]).bits;
    CHECK(same);

    std::vector<float> wide(n);
    bf16ToF32(wide.data(), half.data(), n);
    same = true;
    for (size_t i = 0; i < n; ++i) same = same && bitsOf(wide[i]) == bitsOf(bf16ToFloat(half[i]));
    CHECK(same);

    std::vector<float> rounded = src, scalar = src;
    roundToBf16(rounded.data(), n);
    detail::roundToBf16Scalar(scalar.data(), n);
    CHECK(std::memcmp(rounded.data(), scalar.data(), n * sizeof(float)) == 0);
  }
}
