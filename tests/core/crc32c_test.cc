// CRC-32C: the standard check value, a bit-at-a-time reference computed here over every length
// and alignment the hardware path splits differently, chaining, and the TFRecord mask.
#include "core/crc32c.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

// Bit-at-a-time CRC-32C, independent of the implementation under test.
uint32_t slowCrc32c(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

}  // namespace

TEST_CASE("crc32c: standard check value", "[unit]") {
  CHECK(ds::crc32c("123456789", 9) == 0xE3069283u);
  CHECK(slowCrc32c("123456789") == 0xE3069283u);
  CHECK(ds::crc32c("", 0) == 0u);
}

TEST_CASE("crc32c: equals the bit-at-a-time reference at every length and offset", "[unit]") {
  std::string text;
  for (int i = 0; i < 300; ++i) text.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (size_t off = 0; off < 8; ++off) {
    for (size_t n = 0; off + n <= 80; ++n) {
      INFO("offset " << off << " length " << n);
      CHECK(ds::crc32c(text.data() + off, n) == slowCrc32c(text.substr(off, n)));
    }
  }
  CHECK(ds::crc32c(text.data(), text.size()) == slowCrc32c(text));
}

TEST_CASE("crc32c: updates chain", "[unit]") {
  CHECK(ds::crc32c("6789", 4, ds::crc32c("12345", 5)) == 0xE3069283u);
  CHECK(ds::crc32c("56789", 5, ds::crc32c("1234", 4)) == 0xE3069283u);
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= text.size(); ++cut)
    CHECK(ds::crc32c(text.data() + cut, text.size() - cut, ds::crc32c(text.data(), cut)) ==
          slowCrc32c(text));
}

TEST_CASE("crc32c: TFRecord mask", "[unit]") {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  const uint32_t c = slowCrc32c(text);
  CHECK(ds::maskedCrc32c(text.data(), text.size()) == ((c >> 15) | (c << 17)) + 0xa282ead8u);
  const std::string record = std::string("\x1a\x11", 2) + "CRC test, one two";
  CHECK(ds::maskedCrc32c(record.data(), record.size()) == 0x5794d08au);
}
