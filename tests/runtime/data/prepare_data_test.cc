// prepare-data: bytes become uint16 tokens in llm.c shards, split train/val at the end, sharded.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/error.h"
#include "runtime/data/prepare_data.h"
#include "runtime/data/token_corpus.h"
#include "tests/support/spawn_ranks.h"

#include <nlohmann/json.hpp>

using namespace ds::runtime;

namespace {

PrepareDataOptions opts(double valFraction, size_t shardTokens) {
  PrepareDataOptions o;
  o.valFraction = valFraction;
  o.shardTokens = shardTokens;
  return o;
}

}  // namespace

TEST_CASE("prepare-data: byte tokens, val split at the end, shard size", "[unit]") {
  ds::test::TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += char(i * 7 % 256);
  ds::test::writeFile(dir.file("in.txt"), text);
  auto r = prepareData(dir.file("in.txt"), dir.file("out/tiny"), opts(0.25, 30));
  CHECK(r.trainTokens == 75);
  CHECK(r.valTokens == 25);
  CHECK(r.files.size() == 4);  // train: 30+30+15, val: 25
  auto train = TokenCorpus::fromShards(r.trainGlob, 256, "train");
  auto val = TokenCorpus::fromShards(r.valGlob, 256, "val");
  REQUIRE(train->size() == 75);
  std::vector<int32_t> all(100);
  train->read(0, 75, all.data());
  val->read(0, 25, all.data() + 75);
  for (int i = 0; i < 100; ++i) CHECK(all[size_t(i)] == (i * 7 % 256));
  CHECK_THROWS_WITH(prepareData(dir.file("in.txt"), dir.file("x"), opts(1.0, 10)),
                    "prepare-data: --val_fraction must be in [0, 1), got 1");
  CHECK_THROWS_WITH(prepareData(dir.file("missing.txt"), dir.file("x"), {}),
                    "prepare-data: cannot read '" + dir.file("missing.txt") + "'");
}

TEST_CASE("prepare-data: gpt2 tokenizer, one document per file after <|endoftext|>", "[unit]") {
  // A vocabulary of the 256 byte characters (bytes_to_unicode) and <|endoftext|>, no merges: each
  // byte of the text is one token, whose id is its character's index.
  ds::test::TempDir dir;
  nlohmann::json enc = nlohmann::json::object();
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    int cp = printable ? b : 256 + n++;
    std::string ch = cp < 0x80 ? std::string(1, char(cp))
                               : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    enc[ch] = b;
  }
  enc["<|endoftext|>"] = 256;
  std::filesystem::create_directories(dir.file("v"));
  ds::test::writeFile(dir.file("v/encoder.json"), enc.dump());
  ds::test::writeFile(dir.file("v/vocab.bpe"), "#version: 0.2\n");
  ds::test::writeFile(dir.file("a.txt"), "ab");
  ds::test::writeFile(dir.file("b.txt"), "c\n");
  PrepareDataOptions o = opts(0, 1000);
  o.tokenizer = "gpt2";
  o.vocab = dir.file("v");
  auto r = prepareData({dir.file("a.txt"), dir.file("b.txt")}, dir.file("o/g"), o);
  CHECK(r.vocabSize == 257);
  REQUIRE(r.trainTokens == 6);
  std::vector<int32_t> got(6);
  TokenCorpus::fromShards(r.trainGlob, 257, "train")->read(0, 6, got.data());
  CHECK(got == std::vector<int32_t>{256, 'a', 'b', 256, 'c', '\n'});
  ds::test::writeFile(dir.file("bad.txt"), "ok\xc3(");
  CHECK_THROWS_WITH(prepareData(dir.file("bad.txt"), dir.file("o/h"), o),
                    "prepare-data: '" + dir.file("bad.txt") +
                        "' is not UTF-8 text: byte 0xc3 at offset 2 does not begin a valid "
                        "character (the gpt2 tokenizer reads UTF-8)");
}
