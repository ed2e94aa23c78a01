// Tests of the scalar fp16/bf16 conversions: exact values, rounding to nearest even, NaN.
#include "core/dtype.h"

#include <catch2/catch.hpp>
#include <cmath>

TEST_CASE("bf16 round trip and rounding", "[unit]") {
  CHECK(ds::bf16ToFloat(ds::floatToBf16(1.0f)) == 1.0f);
  CHECK(ds::bf16ToFloat(ds::floatToBf16(-2.5f)) == -2.5f);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1).
  CHECK(ds::bf16ToFloat(ds::floatToBf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  CHECK(ds::bf16ToFloat(ds::floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))) ==
        1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isnan(ds::bf16ToFloat(ds::floatToBf16(NAN))));
}

TEST_CASE("fp16 round trip", "[unit]") {
  CHECK(ds::fp16ToFloat(ds::floatToFp16(0.5f)) == 0.5f);
  CHECK(ds::fp16ToFloat(ds::floatToFp16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(ds::fp16ToFloat(ds::floatToFp16(70000.0f))));
}

// The portable conversions (used where the compiler lacks _Float16) agree bit for bit with
// _Float16: every fp16 value to float, and floats around every fp16 value (exact, halfway up and
// down, one ulp either side of the halfway points) plus a strided sweep of all 2^32 patterns.
TEST_CASE("fp16 soft conversions match _Float16 bit for bit", "[unit]") {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  auto fromBits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  size_t checked = 0;
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const ds::fp16 x{static_cast<uint16_t>(h)};
    const float f = ds::fp16ToFloat(x);
    REQUIRE(bits(ds::fp16ToFloatSoft(x)) == bits(f));
    if (std::isnan(f)) continue;
    const float next = ds::fp16ToFloat(ds::fp16{static_cast<uint16_t>(h + 1)});
    const uint32_t b = bits(f);
    for (uint32_t u : {b, b + 1, b - 1}) {
      const float v = fromBits(u);
      INFO("fp16 " << h << " float bits " << u);
      REQUIRE(ds::floatToFp16Soft(v).bits == ds::floatToFp16(v).bits);
    }
    if (!std::isfinite(next) || std::isnan(next)) continue;
    const float mid = f + (next - f) / 2;
    for (uint32_t u : {bits(mid), bits(mid) + 1, bits(mid) - 1}) {
      const float v = fromBits(u);
      INFO("fp16 " << h << " float bits " << u);
      REQUIRE(ds::floatToFp16Soft(v).bits == ds::floatToFp16(v).bits);
      ++checked;
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
    const float v = fromBits(static_cast<uint32_t>(u));
    if (std::isnan(v)) continue;  // NaN payload rounding is the hardware's choice
    INFO("float bits " << u);
    REQUIRE(ds::floatToFp16Soft(v).bits == ds::floatToFp16(v).bits);
  }
  CHECK(checked > 60000);
  CHECK(std::isnan(ds::fp16ToFloatSoft(ds::floatToFp16Soft(NAN))));
}
