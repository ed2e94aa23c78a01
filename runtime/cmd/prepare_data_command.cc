// `dsrt prepare-data`: CLI over runtime/data/prepare_data.h; prints the files and the plan lines.
#include "runtime/cmd/prepare_data_command.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "runtime/data/prepare_data.h"

namespace ds::runtime {

int prepareDataCommand(int argc, char** argv) {
  CLI::App app{
      "Turn text files into llm.c token shards: byte-level (vocab 256, the default) or GPT-2's "
      "BPE (--tokenizer gpt2 --vocab DIR|tokenizer.json)",
      "prepare-data"};
  std::vector<std::string> inputs;
  std::string prefix;
  PrepareDataOptions opts;
  // One positional list (CLI11 gives a list positional every remaining argument): the text
  // files, then the output prefix.
  app.add_option("input", inputs,
                 "text files (gpt2: one document each, UTF-8), then out_prefix: the output path "
                 "prefix (folders are created)")
      ->required();
  app.add_option("--val_fraction", opts.valFraction, "fraction of the tokens (at the end) for val")
      ->capture_default_str();
  app.add_option("--shard_tokens", opts.shardTokens, "tokens per shard file")
      ->capture_default_str();
  app.add_option("--tokenizer", opts.tokenizer,
                 "byte (token = byte) or gpt2 (GPT-2 byte-level BPE; needs --vocab)")
      ->check(CLI::IsMember({"byte", "gpt2"}))
      ->capture_default_str();
  app.add_option("--vocab", opts.vocab,
                 "gpt2: a folder with encoder.json and vocab.bpe, or a tokenizer.json file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("prepare-data: " + std::string(e.what()));
  }
  if (inputs.size() < 2)
    throw ConfigError("prepare-data: expected the input text file(s), then the output prefix");
  prefix = inputs.back();
  inputs.pop_back();
  auto res = prepareData(inputs, prefix, opts);
  for (const auto& f : res.files) std::printf("wrote %s\n", f.c_str());
  std::printf("%zu train tokens, %zu val tokens (%s, vocab %d). In a plan:\n", res.trainTokens,
              res.valTokens, opts.tokenizer.c_str(), res.vocabSize);
  std::printf("model:\n  gpt: {n_layer: 4, n_head: 4, n_embd: 128, seq_len: 128, vocab_size: %d}\n",
              res.vocabSize);
  std::printf("data:\n  shards: \"%s\"\n", res.trainGlob.c_str());
  if (!res.valGlob.empty()) std::printf("  val: \"%s\"\n", res.valGlob.c_str());
  return 0;
}

}  // namespace ds::runtime
