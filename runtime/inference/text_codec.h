// TextCodec: text <-> token ids for `dsrt generate --prompt`. The hook where tokenizers plug in:
// makeTextCodec("byte") is the byte-level vocabulary `dsrt prepare-data` writes (id = byte value,
// 256 ids); the GPT-2 BPE tokenizer (issue 19 item 1) is meant to be added as another name here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::runtime {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Ids the codec cannot map (outside its vocabulary) are a ConfigError naming the id.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int vocabSize() const = 0;
};

// name: "byte". ConfigError naming --tokenizer and the value otherwise.
std::unique_ptr<TextCodec> makeTextCodec(const std::string& name);

}  // namespace ds::runtime
