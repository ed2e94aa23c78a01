// makeTextCodec and the byte-level codec (see text_codec.h).
#include "runtime/inference/text_codec.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {
namespace {

class ByteCodec : public TextCodec {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size());
    for (unsigned char ch : text) ids.push_back(static_cast<int32_t>(ch));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id > 255)
        throw ConfigError(fmt::format(
            "--tokenizer byte: token id {} is not a byte (0..255); print ids with --format ids",
            id));
      text.push_back(static_cast<char>(id));
    }
    return text;
  }
  int vocabSize() const override { return 256; }
};

}  // namespace

std::unique_ptr<TextCodec> makeTextCodec(const std::string& name) {
  if (name == "byte") return std::make_unique<ByteCodec>();
  throw ConfigError(fmt::format("--tokenizer {}: expected 'byte'", name));
}

}  // namespace ds::runtime
