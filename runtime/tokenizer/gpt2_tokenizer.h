// GPT-2's byte-level BPE (openai/gpt-2 encoder.py): bytes map to printable characters
// (bytes_to_unicode), the text splits into pieces (gpt2_pretokenize.h), and each piece's
// characters merge pairwise by rank (vocab.bpe order) until no ranked pair is left. Special
// tokens written in the text (such as "<|endoftext|>") are not parsed: they encode as plain text,
// as in the reference encoder; eosId() is the id of "<|endoftext|>" when the vocabulary has it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace ds::runtime {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // A folder with encoder.json and vocab.bpe (or their Hugging Face names vocab.json and
  // merges.txt, or a tokenizer.json), or a Hugging Face tokenizer.json file (a BPE model with the
  // ByteLevel pre-tokenizer, no normalizer). ConfigError naming the file for anything else.
  static std::unique_ptr<Gpt2Tokenizer> load(const std::string& path);
  // From the two standard files' paths.
  static std::unique_ptr<Gpt2Tokenizer> fromEncoderFiles(const std::string& encoderJson,
                                                         const std::string& vocabBpe);
  static std::unique_ptr<Gpt2Tokenizer> fromTokenizerJson(const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocabSize() const override { return static_cast<int>(bytesOf_.size()); }
  int eosId() const override { return eos_; }
  std::string describe() const override { return "gpt2 (" + source_ + ")"; }

 private:
  struct Merge {
    int32_t rank, id;
  };
  // vocab: token string (byte-mapped characters) -> id; merges: "a b" pairs in rank order, each
  // with the file and line it came from for messages.
  void build(const std::unordered_map<std::string, int32_t>& vocab,
             const std::vector<std::pair<std::string, std::string>>& merges,
             const std::vector<std::string>& mergeWhere, const std::string& vocabWhere);
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;

  std::string source_;
  std::vector<std::string> bytesOf_;            // id -> the bytes it stands for
  int32_t byteId_[256] = {};                    // byte -> id of its single-character token
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, result
  int eos_ = -1;
};

}  // namespace ds::runtime
