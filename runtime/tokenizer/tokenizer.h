// Tokenizers: text (bytes) <-> token ids, behind one small interface that `dsrt prepare-data` and
// `dsrt generate` use. Two kinds:
//   byte  vocabulary 256, token = byte value (the vocabulary of byte-level corpora); no eos.
//   gpt2  GPT-2's byte-level BPE from encoder.json + vocab.bpe (a folder holding both) or a
//         Hugging Face tokenizer.json; the same ids as GPT-2's reference encoder (encoder.py).
// Errors in the vocabulary files are ConfigError naming the file and what was expected.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any bytes encode: text that is not UTF-8 is not refused here (invalid bytes pre-tokenize as
  // symbols of their own, see gpt2_pretokenize.h); decode(encode(s)) == s for every s.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes of the tokens, concatenated (may end inside a UTF-8 character). ConfigError for an
  // id outside [0, vocabSize()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocabSize() const = 0;
  virtual int eosId() const = 0;             // -1: this vocabulary has no end-of-text token
  virtual std::string describe() const = 0;  // "byte" or "gpt2 (<path>)" for messages
};

// A model whose vocabulary (vocab_size, possibly padded as llm.c pads GPT-2's to 50304) is
// smaller than the tokenizer's cannot read its ids: ConfigError naming `what` (the checkpoint or
// plan) and both sizes.
void requireModelVocab(const Tokenizer& tok, int modelVocab, const std::string& what);

// kind "byte" (path must be empty) or "gpt2" (path: a folder with encoder.json and vocab.bpe,
// or vocab.json and merges.txt, or tokenizer.json; or a tokenizer.json file). ConfigError for an
// unknown kind or a bad file.
std::unique_ptr<Tokenizer> makeTokenizer(const std::string& kind, const std::string& path);

}  // namespace ds::runtime
