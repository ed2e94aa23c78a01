// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the one implementation in the tree,
// used by checkpoint files and TensorBoard records. SSE4.2 crc32 instructions when the CPU has
// them, a table otherwise (same result). Not cryptographic.
// Invariant: crc32c("123456789", 9) == 0xE3069283; updates chain: crc32c(b, nb, crc32c(a, na))
// equals the CRC of a followed by b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// CRC of n bytes at data, continuing from crc (the value returned for the preceding bytes; 0 to
// start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord/LevelDB mask of the CRC of n bytes: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t maskedCrc32c(const void* data, size_t n);

}  // namespace ds
