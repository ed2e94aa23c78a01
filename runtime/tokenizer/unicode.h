// The Unicode pieces the GPT-2 pre-tokenizer needs: UTF-8 decoding and the classes \p{L},
// \p{N} (tables generated at build time from Python's unicodedata, gen_unicode_tables.py) and
// \s (the White_Space property, as the Python `regex` module GPT-2 used defines it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ds::runtime::unicode {

// Decodes the UTF-8 character at text[pos]: its code point and length in bytes. A byte that does
// not begin a valid, shortest-form character (or a surrogate) decodes as kInvalid, length 1.
constexpr uint32_t kInvalid = 0xFFFFFFFF;
struct Decoded {
  uint32_t cp;
  size_t len;
};
Decoded decodeAt(std::string_view text, size_t pos);

// Byte offset of the first invalid UTF-8 sequence, or text.size() when all of it is valid.
size_t firstInvalidUtf8(std::string_view text);

bool isLetter(uint32_t cp);      // general category L*
bool isNumber(uint32_t cp);      // general category N*
bool isWhiteSpace(uint32_t cp);  // White_Space
const char* tablesVersion();     // the Unicode version of the L/N tables

}  // namespace ds::runtime::unicode
