// GPT-2's pre-tokenizer, by hand: the pieces that Python's `regex.findall` gives for
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (openai/gpt-2 encoder.py), as byte ranges of the input. The pieces cover the input exactly, in
// order. A byte that is not part of valid UTF-8 counts as one character outside \s, \p{L} and
// \p{N} (a symbol), so every input splits and round-trips.
#pragma once

#include <string_view>
#include <vector>

namespace ds::runtime {

std::vector<std::string_view> gpt2Pretokenize(std::string_view text);

}  // namespace ds::runtime
