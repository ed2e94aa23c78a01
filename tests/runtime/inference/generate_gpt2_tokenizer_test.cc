// `dsrt generate --tokenizer gpt2`: a text prompt goes through GPT-2's BPE (the real vocabulary
// files scripts/install_deps.sh installs) and generates exactly what its ids generate; --vocab
// without --tokenizer gpt2 is refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "ds/config.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using ds::test::runCommand;
using ds::test::TempDir;

namespace {

std::string dsrt() { return ds::test::dsrtCommand(); }

const std::string kVocab = DS_GPT2_TESTDATA;

bool haveVocab() {
  return std::filesystem::exists(kVocab + "/encoder.json") &&
         std::filesystem::exists(kVocab + "/vocab.bpe");
}

}  // namespace

TEST_CASE("dsrt generate: --tokenizer gpt2 encodes a text prompt as GPT-2 does", "[unit]") {
  if (!haveVocab())
    DS_SKIP("GPT-2's encoder.json/vocab.bpe not at " + kVocab + " (scripts/install_deps.sh)");
  TempDir dir;
  {
    std::ofstream f(dir.file("text.txt"), std::ios::binary);
    for (int i = 0; i < 200; ++i) f << "Hello world, the question is " << i % 7 << ".\n";
  }
  std::string out;
  REQUIRE(runCommand(dsrt() + "prepare-data " + dir.file("text.txt") + " " + dir.file("d/tok") +
                         " --tokenizer gpt2 --vocab " + kVocab + " --val_fraction 0.2",
                     &out) == 0);
  INFO(out);
  {
    std::ofstream f(dir.file("plan.yaml"));
    f << "model:\n  gpt: {n_layer: 1, n_head: 2, n_embd: 16, seq_len: 16, vocab_size: 50257}\n"
      << "data: {shards: d/tok_train_*.bin, val: d/tok_val_*.bin}\n"
      << "train: {steps: 2, checkpoint: {dir: ck}}\n"
      << "deepspeed: {train_batch_size: 2, optimizer: {type: AdamW, params: {lr: 0.01}}}\n";
  }
  REQUIRE(runCommand("cd " + dir.file("") + " && " + dsrt() + "train plan.yaml", &out) == 0);
  const std::string gen = dsrt() + "generate " + dir.file("ck") + " --greedy --max_new_tokens 6 ";
  std::string fromText, fromIds, json;
  REQUIRE(runCommand(gen + "--tokenizer gpt2 --vocab " + kVocab +
                         " --prompt 'Hello world' --format ids 2>/dev/null",
                     &fromText) == 0);
  // "Hello" is 15496 and " world" 995 in GPT-2's vocabulary
  REQUIRE(runCommand(gen + "--prompt_ids 15496,995 --format ids 2>/dev/null", &fromIds) == 0);
  CHECK(!fromText.empty());
  CHECK(fromText == fromIds);
  REQUIRE(runCommand(gen + "--tokenizer gpt2 --vocab " + kVocab +
                         " --prompt 'Hello world' --format json 2>/dev/null",
                     &json) == 0);
  CHECK(json.find("\"text\":") != std::string::npos);

  // --vocab belongs to gpt2 only
  CHECK(runCommand(gen + "--vocab " + kVocab + " --prompt_ids 1", &out) == 2);
  CHECK(out.find("--vocab " + kVocab + ": needs --tokenizer gpt2") != std::string::npos);
  CHECK(runCommand(gen + "--tokenizer byte --vocab " + kVocab + " --prompt hi", &out) == 2);
  CHECK(out.find("takes no vocabulary file") != std::string::npos);
}
