// Text files to token shards; see prepare_data.h.
#include "runtime/data/prepare_data.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/data/token_shard.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/unicode.h"

namespace ds::runtime {
namespace {

void writeSplit(const std::string& prefix, const std::string& split,
                const std::vector<uint16_t>& tokens, size_t begin, size_t end, size_t shardTokens,
                PrepareDataResult& res) {
  size_t index = 0;
  for (size_t pos = begin; pos < end; pos += shardTokens, ++index) {
    size_t stop = std::min(end, pos + shardTokens);
    std::vector<uint16_t> toks(tokens.begin() + long(pos), tokens.begin() + long(stop));
    std::string path = fmt::format("{}_{}_{:06d}.bin", prefix, split, index);
    writeTokenShard(path, toks);
    res.files.push_back(path);
  }
}

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path))
    throw ConfigError(fmt::format("prepare-data: cannot read '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Appends the tokens of one input file.
void tokenizeFile(const Tokenizer& tok, const std::string& kind, const std::string& path,
                  std::vector<uint16_t>& out) {
  std::string text = readText(path);
  if (kind != "byte") {
    size_t bad = unicode::firstInvalidUtf8(text);
    if (bad != text.size())
      throw ConfigError(fmt::format(
          "prepare-data: '{}' is not UTF-8 text: byte {:#04x} at offset {} does not begin a "
          "valid character (the {} tokenizer reads UTF-8)",
          path, static_cast<unsigned char>(text[bad]), bad, kind));
    if (tok.eosId() >= 0) out.push_back(static_cast<uint16_t>(tok.eosId()));
  }
  for (int32_t id : tok.encode(text)) out.push_back(static_cast<uint16_t>(id));
}

}  // namespace

PrepareDataResult prepareData(const std::vector<std::string>& inPaths, const std::string& outPrefix,
                              const PrepareDataOptions& opts) {
  if (!(opts.valFraction >= 0 && opts.valFraction < 1))
    throw ConfigError(
        fmt::format("prepare-data: --val_fraction must be in [0, 1), got {}", opts.valFraction));
  if (opts.shardTokens == 0) throw ConfigError("prepare-data: --shard_tokens must be > 0");
  if (inPaths.empty()) throw ConfigError("prepare-data: no input text file");
  auto tok = makeTokenizer(opts.tokenizer, opts.vocab);
  if (tok->vocabSize() > 65536)
    throw ConfigError(fmt::format(
        "prepare-data: tokenizer {} has {} tokens; llm.c shards hold uint16 ids (at most 65536)",
        tok->describe(), tok->vocabSize()));
  std::vector<uint16_t> tokens;
  for (const auto& path : inPaths) tokenizeFile(*tok, opts.tokenizer, path, tokens);
  if (tokens.size() < 2)
    throw ConfigError(fmt::format("prepare-data: {} gives {} tokens; need at least 2",
                                  inPaths.size() == 1 ? "'" + inPaths[0] + "'" : "the inputs",
                                  tokens.size()));
  auto parent = std::filesystem::path(outPrefix).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  PrepareDataResult res;
  res.vocabSize = tok->vocabSize();
  res.valTokens = size_t(std::floor(double(tokens.size()) * opts.valFraction));
  res.trainTokens = tokens.size() - res.valTokens;
  writeSplit(outPrefix, "train", tokens, 0, res.trainTokens, opts.shardTokens, res);
  writeSplit(outPrefix, "val", tokens, res.trainTokens, tokens.size(), opts.shardTokens, res);
  res.trainGlob = outPrefix + "_train_*.bin";
  res.valGlob = res.valTokens ? outPrefix + "_val_*.bin" : "";
  return res;
}

}  // namespace ds::runtime
