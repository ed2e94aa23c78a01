// Block int8 quantization (see block_quant.h).
#include "zero/block_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace ds::zero {
namespace {

size_t blocks(size_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }
size_t codeBytes(size_t n) { return (n + 3) / 4 * 4; }

float* scalesOf(uint8_t* packed, size_t n) {
  return reinterpret_cast<float*>(packed + codeBytes(n));
}
const float* scalesOf(const uint8_t* packed, size_t n) {
  return reinterpret_cast<const float*>(packed + codeBytes(n));
}

// Round to nearest even without libm: adding and removing 1.5 * 2^23 leaves the integer part in
// the mantissa (|x| <= 127 here). Branch-free, so the block loops vectorize with SSE2.
inline float roundEven(float x) {
  constexpr float kMagic = 12582912.f;
  return (x + kMagic) - kMagic;
}

template <typename Load>
void quantize(size_t n, uint8_t* dst, Load load) {
  auto* codes = reinterpret_cast<int8_t*>(dst);
  float* scales = scalesOf(dst, n);
  std::memset(dst + n, 0, codeBytes(n) - n);
#pragma omp parallel for schedule(static) if (n > (1u << 18))
  for (size_t b = 0; b < blocks(n); ++b) {
    const size_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
    float amax = 0.f;
    bool nan = false;
    for (size_t i = begin; i < end; ++i) {
      const float a = std::fabs(load(i));
      nan |= a != a;
      amax = a > amax ? a : amax;
    }
    const float scale = nan ? std::nanf("") : amax / 127.f;
    scales[b] = scale;
    if (!(scale > 0.f) || !std::isfinite(scale)) {  // zeros, or poisoned by the scale
      std::memset(codes + begin, 0, end - begin);
      continue;
    }
    const float inv = 1.f / scale;
    for (size_t i = begin; i < end; ++i) {
      float q = roundEven(load(i) * inv);
      q = q < -127.f ? -127.f : (q > 127.f ? 127.f : q);
      codes[i] = static_cast<int8_t>(static_cast<int>(q));
    }
  }
}

template <typename Store>
void dequantize(const uint8_t* packed, size_t n, Store store) {
  const auto* codes = reinterpret_cast<const int8_t*>(packed);
  const float* scales = scalesOf(packed, n);
#pragma omp parallel for schedule(static) if (n > (1u << 18))
  for (size_t b = 0; b < blocks(n); ++b) {
    const size_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
    const float scale = scales[b];
    if (std::isfinite(scale)) {
      for (size_t i = begin; i < end; ++i) store(i, static_cast<float>(codes[i]) * scale);
    } else {
      // A non-finite scale (a non-finite input) poisons its whole block.
      for (size_t i = begin; i < end; ++i) store(i, scale);
    }
  }
}

}  // namespace

size_t quantPackedBytes(size_t n) { return codeBytes(n) + blocks(n) * sizeof(float); }

void quantizeBlocks(const float* src, size_t n, uint8_t* dst) {
  quantize(n, dst, [src](size_t i) { return src[i]; });
}

void quantizeBlocksBf16(const uint16_t* src, size_t n, uint8_t* dst) {
  quantize(n, dst, [src](size_t i) { return bf16ToFloat(bf16{src[i]}); });
}

void dequantizeBlocks(const uint8_t* packed, size_t n, float* dst) {
  dequantize(packed, n, [dst](size_t i, float v) { dst[i] = v; });
}

void dequantizeAddBlocks(const uint8_t* packed, size_t n, float* dst) {
  dequantize(packed, n, [dst](size_t i, float v) { dst[i] += v; });
}

void dequantizeBlocksBf16(const uint8_t* packed, size_t n, uint16_t* dst) {
  dequantize(packed, n, [dst](size_t i, float v) { dst[i] = floatToBf16(v).bits; });
}

}  // namespace ds::zero
