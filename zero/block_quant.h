// Block-wise symmetric int8 quantization for ZeRO++ (qwZ: quantized parameter all-gather; qgZ:
// quantized gradient reduce-scatter). A run of count fp32 values becomes one packed byte buffer:
// count int8 codes, padding to 4 bytes, then one fp32 scale per block of kQuantBlock values
// (scale = max |x| / 127 over the block, code = round(x / scale)), so a value comes back within
// scale / 2 of itself and a block of zeros stays exact. Packing is deterministic: the same input
// gives the same bytes on every rank, so every rank dequantizes a gathered parameter to the same
// values. Non-finite inputs make their block's scale non-finite, which propagates to the loss
// (the overflow checks then see it) instead of being clipped silently.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::zero {

inline constexpr size_t kQuantBlock = 512;

// Bytes of the packed form of count values.
size_t quantPackedBytes(size_t count);

// src: count fp32 values -> dst: quantPackedBytes(count) bytes.
void quantizeBlocks(const float* src, size_t count, uint8_t* dst);
// The same from bf16 bits (the half-compute copy of a parameter).
void quantizeBlocksBf16(const uint16_t* src, size_t count, uint8_t* dst);

// packed (of count values) -> dst: count fp32 values; or, accumulating, dst[i] += value.
void dequantizeBlocks(const uint8_t* packed, size_t count, float* dst);
void dequantizeAddBlocks(const uint8_t* packed, size_t count, float* dst);
// packed -> count bf16 bits (rounded to nearest even).
void dequantizeBlocksBf16(const uint8_t* packed, size_t count, uint16_t* dst);

}  // namespace ds::zero
