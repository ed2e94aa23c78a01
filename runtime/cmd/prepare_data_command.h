// `dsrt prepare-data in.txt [more.txt ...] out_prefix [--val_fraction F] [--shard_tokens N]
// [--tokenizer byte|gpt2] [--vocab DIR|tokenizer.json]`: text to llm.c token shards for a
// plan's data.shards / data.val (docs/tokenizer.md).
#pragma once

namespace ds::runtime {

int prepareDataCommand(int argc, char** argv);

}  // namespace ds::runtime
