// Byte-level shard preparation; see prepare_data.h.
#include "runtime/data/prepare_data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/data/token_shard.h"

namespace ds::runtime {
namespace {

void writeSplit(const std::string& prefix, const std::string& split, const std::string& bytes,
                size_t begin, size_t end, size_t shardTokens, PrepareDataResult& res) {
  size_t index = 0;
  for (size_t pos = begin; pos < end; pos += shardTokens, ++index) {
    size_t stop = std::min(end, pos + shardTokens);
    std::vector<uint16_t> toks(stop - pos);
    for (size_t i = pos; i < stop; ++i) toks[i - pos] = static_cast<unsigned char>(bytes[i]);
    std::string path = fmt::format("{}_{}_{:06d}.bin", prefix, split, index);
    writeTokenShard(path, toks);
    res.files.push_back(path);
  }
}

}  // namespace

PrepareDataResult prepareData(const std::string& inPath, const std::string& outPrefix,
                              const PrepareDataOptions& opts) {
  if (!(opts.valFraction >= 0 && opts.valFraction < 1))
    throw ConfigError(
        fmt::format("prepare-data: --val_fraction must be in [0, 1), got {}", opts.valFraction));
  if (opts.shardTokens == 0) throw ConfigError("prepare-data: --shard_tokens must be > 0");
  std::ifstream in(inPath, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("prepare-data: cannot read '{}'", inPath));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.size() < 2)
    throw ConfigError(
        fmt::format("prepare-data: '{}' has {} bytes; need at least 2", inPath, bytes.size()));
  auto parent = std::filesystem::path(outPrefix).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  PrepareDataResult res;
  res.valTokens = size_t(std::floor(double(bytes.size()) * opts.valFraction));
  res.trainTokens = bytes.size() - res.valTokens;
  writeSplit(outPrefix, "train", bytes, 0, res.trainTokens, opts.shardTokens, res);
  writeSplit(outPrefix, "val", bytes, res.trainTokens, bytes.size(), opts.shardTokens, res);
  res.trainGlob = outPrefix + "_train_*.bin";
  res.valGlob = res.valTokens ? outPrefix + "_val_*.bin" : "";
  return res;
}

}  // namespace ds::runtime
