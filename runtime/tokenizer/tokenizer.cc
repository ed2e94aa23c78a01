// The byte tokenizer and makeTokenizer; see tokenizer.h.
#include "runtime/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/tokenizer/gpt2_tokenizer.h"

namespace ds::runtime {
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string s(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] > 255)
        throw ConfigError(fmt::format(
            "tokenizer byte: token id {} at position {} is outside the vocabulary [0, 256)", ids[i],
            i));
      s[i] = static_cast<char>(ids[i]);
    }
    return s;
  }
  int vocabSize() const override { return 256; }
  int eosId() const override { return -1; }
  std::string describe() const override { return "byte"; }
};

}  // namespace

void requireModelVocab(const Tokenizer& tok, int modelVocab, const std::string& what) {
  if (modelVocab < tok.vocabSize())
    throw ConfigError(fmt::format(
        "{} has vocab_size {}, smaller than the {} tokenizer's {} tokens: its ids would not fit",
        what, modelVocab, tok.describe(), tok.vocabSize()));
}

std::unique_ptr<Tokenizer> makeTokenizer(const std::string& kind, const std::string& path) {
  if (kind == "byte") {
    if (!path.empty())
      throw ConfigError(fmt::format(
          "tokenizer byte: takes no vocabulary file (got '{}'); --vocab is for gpt2", path));
    return std::make_unique<ByteTokenizer>();
  }
  if (kind == "gpt2") return Gpt2Tokenizer::load(path);
  throw ConfigError(fmt::format("tokenizer: unknown kind '{}'; expected byte or gpt2", kind));
}

}  // namespace ds::runtime
