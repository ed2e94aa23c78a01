// Block int8 quantization (see block_quant.h).
#include "zero/block_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"

namespace ds::zero {
namespace {

size_t blocks(size_t count) { return (count + kQuantBlock - 1) / kQuantBlock; }
size_t codeBytes(size_t count) { return (count + 3) / 4 * 4; }

float* scalesOf(uint8_t* packed, size_t count) {
  return reinterpret_cast<float*>(packed + codeBytes(count));
}
const float* scalesOf(const uint8_t* packed, size_t count) {
  return reinterpret_cast<const float*>(packed + codeBytes(count));
}

// Round to nearest even without libm: adding and removing 1.5 * 2^23 leaves the integer part in
// the mantissa (|value| <= 127 here). Branch-free, so the block loops vectorize with SSE2.
inline float roundEven(float value) {
  constexpr float kMagic = 12582912.f;
  return (value + kMagic) - kMagic;
}

template <typename Load>
void quantize(size_t count, uint8_t* dst, Load load) {
  auto* codes = reinterpret_cast<int8_t*>(dst);
  float* scales = scalesOf(dst, count);
  std::memset(dst + count, 0, codeBytes(count) - count);
#pragma omp parallel for schedule(static) if (count > (1u << 18))
  for (size_t block = 0; block < blocks(count); ++block) {
    const size_t begin = block * kQuantBlock, end = std::min(count, begin + kQuantBlock);
    float amax = 0.f;
    bool nan = false;
    for (size_t i = begin; i < end; ++i) {
      const float mag = std::fabs(load(i));
      nan |= mag != mag;
      amax = mag > amax ? mag : amax;
    }
    const float scale = nan ? std::nanf("") : amax / 127.f;
    scales[block] = scale;
    if (!(scale > 0.f) || !std::isfinite(scale)) {  // zeros, or poisoned by the scale
      std::memset(codes + begin, 0, end - begin);
      continue;
    }
    const float inv = 1.f / scale;
    for (size_t i = begin; i < end; ++i) {
      float code = roundEven(load(i) * inv);
      code = code < -127.f ? -127.f : (code > 127.f ? 127.f : code);
      codes[i] = static_cast<int8_t>(static_cast<int>(code));
    }
  }
}

template <typename Store>
void dequantize(const uint8_t* packed, size_t count, Store store) {
  const auto* codes = reinterpret_cast<const int8_t*>(packed);
  const float* scales = scalesOf(packed, count);
#pragma omp parallel for schedule(static) if (count > (1u << 18))
  for (size_t block = 0; block < blocks(count); ++block) {
    const size_t begin = block * kQuantBlock, end = std::min(count, begin + kQuantBlock);
    const float scale = scales[block];
    if (std::isfinite(scale)) {
      for (size_t i = begin; i < end; ++i) store(i, static_cast<float>(codes[i]) * scale);
    } else {
      // A non-finite scale (a non-finite input) poisons its whole block.
      for (size_t i = begin; i < end; ++i) store(i, scale);
    }
  }
}

}  // namespace

size_t quantPackedBytes(size_t count) { return codeBytes(count) + blocks(count) * sizeof(float); }

void quantizeBlocks(const float* src, size_t count, uint8_t* dst) {
  quantize(count, dst, [src](size_t idx) { return src[idx]; });
}

void quantizeBlocksBf16(const uint16_t* src, size_t count, uint8_t* dst) {
  quantize(count, dst, [src](size_t idx) { return bf16ToFloat(bf16{src[idx]}); });
}

void dequantizeBlocks(const uint8_t* packed, size_t count, float* dst) {
  dequantize(packed, count, [dst](size_t idx, float val) { dst[idx] = val; });
}

void dequantizeAddBlocks(const uint8_t* packed, size_t count, float* dst) {
  dequantize(packed, count, [dst](size_t idx, float val) { dst[idx] += val; });
}

void dequantizeBlocksBf16(const uint8_t* packed, size_t count, uint16_t* dst) {
  dequantize(packed, count, [dst](size_t idx, float val) { dst[idx] = floatToBf16(val).bits; });
}

}  // namespace ds::zero
