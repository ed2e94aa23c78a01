// UTF-8 decoding and the L / N / White_Space classes; see unicode.h.
#include "runtime/tokenizer/unicode.h"

#include <algorithm>
#include <iterator>

namespace ds::runtime::unicode {
namespace {

struct CodeRange {
  uint32_t lo, hi;
};

#include "runtime/tokenizer/unicode_tables.inc"

template <size_t N>
bool inRanges(const CodeRange (&table)[N], uint32_t cp) {
  auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                             [](uint32_t c, const CodeRange& r) { return c < r.lo; });
  return it != std::begin(table) && cp <= std::prev(it)->hi;
}

}  // namespace

Decoded decodeAt(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[i])); };
  uint32_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1};
  size_t len = 0;
  uint32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {kInvalid, 1};
  }
  if (pos + len > text.size()) return {kInvalid, 1};
  for (size_t i = 1; i < len; ++i) {
    uint32_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return {kInvalid, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalid, 1};
  return {cp, len};
}

size_t firstInvalidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    Decoded d = decodeAt(text, pos);
    if (d.cp == kInvalid) return pos;
    pos += d.len;
  }
  return text.size();
}

bool isLetter(uint32_t cp) { return cp != kInvalid && inRanges(kLetterRanges, cp); }
bool isNumber(uint32_t cp) { return cp != kInvalid && inRanges(kNumberRanges, cp); }

bool isWhiteSpace(uint32_t cp) {
  // PropList.txt White_Space (unchanged since Unicode 6.3).
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

const char* tablesVersion() { return kUnicodeVersion; }

}  // namespace ds::runtime::unicode
