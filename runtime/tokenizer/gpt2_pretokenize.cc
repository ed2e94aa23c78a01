// The GPT-2 pre-tokenizer regex, alternative by alternative; see gpt2_pretokenize.h.
#include "runtime/tokenizer/gpt2_pretokenize.h"

#include "runtime/tokenizer/unicode.h"

namespace ds::runtime {
namespace {

enum class Cls { kLetter, kNumber, kSpace, kOther };

Cls classOf(uint32_t cp) {
  if (unicode::isLetter(cp)) return Cls::kLetter;
  if (unicode::isNumber(cp)) return Cls::kNumber;
  if (cp != unicode::kInvalid && unicode::isWhiteSpace(cp)) return Cls::kSpace;
  return Cls::kOther;
}

struct Scanner {
  std::string_view text;

  Cls classAt(size_t pos) const { return classOf(unicode::decodeAt(text, pos).cp); }
  size_t next(size_t pos) const { return pos + unicode::decodeAt(text, pos).len; }
  // End of the run of characters of class c starting at pos (pos itself when none).
  size_t runEnd(size_t pos, Cls c) const {
    while (pos < text.size() && classAt(pos) == c) pos = next(pos);
    return pos;
  }

  // 's 't 're 've 'm 'll 'd: the match length, or 0.
  size_t contraction(size_t pos) const {
    if (text[pos] != '\'' || pos + 1 >= text.size()) return 0;
    char a = text[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= text.size()) return 0;
    char b = text[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // The end of the match starting at pos (> pos).
  size_t matchAt(size_t pos) const {
    if (size_t n = contraction(pos)) return pos + n;
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional U+0020, then a run of one class.
    size_t body = text[pos] == ' ' && pos + 1 < text.size() ? pos + 1 : pos;
    for (size_t start : {body, pos}) {
      if (start >= text.size()) continue;
      Cls c = classAt(start);
      if (c != Cls::kSpace) return runEnd(start, c);
    }
    // "\s+(?!\S)": the longest run of white space not followed by a non-space, backing off one
    // character when the run is followed by one; else "\s+".
    size_t end = runEnd(pos, Cls::kSpace);
    if (end == text.size()) return end;
    size_t lastStart = pos;
    for (size_t p = pos; p < end; p = next(p)) lastStart = p;
    return lastStart > pos ? lastStart : end;
  }
};

}  // namespace

std::vector<std::string_view> gpt2Pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  Scanner s{text};
  for (size_t pos = 0; pos < text.size();) {
    size_t end = s.matchAt(pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

}  // namespace ds::runtime
