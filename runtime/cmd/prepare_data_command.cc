// `dsrt prepare-data`: CLI over runtime/data/prepare_data.h; prints the files and the plan lines.
#include "runtime/cmd/prepare_data_command.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "runtime/data/prepare_data.h"

namespace ds::runtime {

int prepareDataCommand(int argc, char** argv) {
  CLI::App app{"Turn a text file into byte-level llm.c token shards (vocab 256)", "prepare-data"};
  std::string in, prefix;
  PrepareDataOptions opts;
  app.add_option("input", in, "text file")->required();
  app.add_option("out_prefix", prefix, "output path prefix (folders are created)")->required();
  app.add_option("--val_fraction", opts.valFraction, "fraction of the bytes (at the end) for val")
      ->capture_default_str();
  app.add_option("--shard_tokens", opts.shardTokens, "tokens per shard file")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    throw ConfigError("prepare-data: " + std::string(e.what()));
  }
  auto res = prepareData(in, prefix, opts);
  for (const auto& f : res.files) std::printf("wrote %s\n", f.c_str());
  std::printf("%zu train tokens, %zu val tokens (vocab 256). In a plan:\n", res.trainTokens,
              res.valTokens);
  std::printf(
      "model:\n  gpt: {n_layer: 4, n_head: 4, n_embd: 128, seq_len: 128, vocab_size: 256}\n");
  std::printf("data:\n  shards: \"%s\"\n", res.trainGlob.c_str());
  if (!res.valGlob.empty()) std::printf("  val: \"%s\"\n", res.valGlob.c_str());
  return 0;
}

}  // namespace ds::runtime
