// Text files -> llm.c token shards: the work behind `dsrt prepare-data`. The tokenizer is byte
// (vocabulary 256, token = byte value; the files' bytes are concatenated) or gpt2 (GPT-2's BPE
// from a vocabulary folder or tokenizer.json, runtime/tokenizer/; each file is one document,
// preceded by the end-of-text token as llm.c's data scripts do, and must be UTF-8). The last
// val_fraction of the tokens (whole shards aside) become the validation split. Writes
// <prefix>_train_NNNNNN.bin and <prefix>_val_NNNNNN.bin.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ds::runtime {

struct PrepareDataOptions {
  double valFraction = 0.1;        // in [0, 1)
  size_t shardTokens = 100000000;  // tokens per shard (llm.c writes 100M-token shards)
  std::string tokenizer = "byte";  // byte | gpt2
  std::string vocab;               // gpt2: encoder.json + vocab.bpe folder, or tokenizer.json
};

struct PrepareDataResult {
  size_t trainTokens = 0, valTokens = 0;
  int vocabSize = 256;
  std::vector<std::string> files;
  std::string trainGlob, valGlob;  // for a plan's data.shards / data.val
};

PrepareDataResult prepareData(const std::vector<std::string>& inPaths, const std::string& outPrefix,
                              const PrepareDataOptions& opts);
inline PrepareDataResult prepareData(const std::string& inPath, const std::string& outPrefix,
                                     const PrepareDataOptions& opts) {
  return prepareData(std::vector<std::string>{inPath}, outPrefix, opts);
}

}  // namespace ds::runtime
