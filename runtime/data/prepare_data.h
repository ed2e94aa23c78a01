// Text -> byte-level llm.c token shards (vocab 256, token = byte value): the work behind
// `dsrt prepare-data`. The last val_fraction of the bytes (whole shards aside) become the
// validation split. Writes <prefix>_train_NNNNNN.bin and <prefix>_val_NNNNNN.bin.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ds::runtime {

struct PrepareDataOptions {
  double valFraction = 0.1;        // in [0, 1)
  size_t shardTokens = 100000000;  // tokens per shard (llm.c writes 100M-token shards)
};

struct PrepareDataResult {
  size_t trainTokens = 0, valTokens = 0;
  std::vector<std::string> files;
  std::string trainGlob, valGlob;  // for a plan's data.shards / data.val
};

PrepareDataResult prepareData(const std::string& inPath, const std::string& outPrefix,
                              const PrepareDataOptions& opts);

}  // namespace ds::runtime
