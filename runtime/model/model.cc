// makeModel (config validation naming the plan key) and Model::numParamsTotal (see model.h).
// Not the plan parser: keys are named as the plan spells them (model.n_embd ...) for messages.
#include "runtime/model/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/model/gpt2.h"
#include "runtime/model/mlp.h"

namespace ds::runtime {
namespace {

void requirePositive(int v, const char* key) {
  if (v < 1) throw ConfigError(fmt::format("model.{} must be >= 1 (got {})", key, v));
}

void validateGpt2(const ModelConfig& c) {
  requirePositive(c.nLayer, "n_layer");
  requirePositive(c.nHead, "n_head");
  requirePositive(c.nEmbd, "n_embd");
  requirePositive(c.seqLen, "seq_len");
  requirePositive(c.vocabSize, "vocab_size");
  if (c.nEmbd % c.nHead != 0) {
    throw ConfigError(
        fmt::format("model.n_embd ({}) % model.n_head ({}) != 0: the embedding "
                    "must split evenly into heads",
                    c.nEmbd, c.nHead));
  }
  if (c.paddedVocab != 0 && c.paddedVocab < c.vocabSize) {
    throw ConfigError(fmt::format("model.padded_vocab_size ({}) < model.vocab_size ({})",
                                  c.paddedVocab, c.vocabSize));
  }
}

void validateMlp(const ModelConfig& c) {
  if (c.sizes.size() < 2) {
    throw ConfigError(fmt::format("model.sizes needs at least 2 entries (input, output); got {}",
                                  c.sizes.size()));
  }
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    if (c.sizes[i] < 1) {
      throw ConfigError(fmt::format("model.sizes[{}] must be >= 1 (got {})", i, c.sizes[i]));
    }
  }
}

}  // namespace

size_t Model::numParamsTotal() const {
  size_t n = 0;
  for (const zero::ParamInfo& p : params()) n += p.numel;
  return n;
}

void Model::initParamRange(float* out, size_t offset, size_t count, uint64_t seed) const {
  const auto& ps = params();
  size_t begin = 0;
  for (size_t i = 0; i < ps.size() && count > 0; ++i) {
    const size_t end = begin + ps[i].numel;
    if (offset < end) {
      const size_t first = offset - begin, n = std::min(count, end - offset);
      fillParamRange(out, first, n, initRule(i), seed, i);
      out += n;
      offset += n;
      count -= n;
    }
    begin = end;
  }
  DS_CHECK(count == 0, "initParamRange: {} elements past the model's {} parameters", count,
           numParamsTotal());
}

std::unique_ptr<Model> makeModel(const ModelConfig& cfg) {
  if (cfg.compute != DType::kF32 && cfg.compute != DType::kBF16) {
    throw ConfigError(fmt::format("model compute dtype {} not supported; use fp32 or bf16",
                                  dtypeName(cfg.compute)));
  }
  if (cfg.kind == "gpt2" || cfg.kind == "gpt") {
    validateGpt2(cfg);
    return std::make_unique<Gpt2Model>(cfg);
  }
  if (cfg.kind == "mlp") {
    validateMlp(cfg);
    return std::make_unique<MlpModel>(cfg);
  }
  throw ConfigError(fmt::format("model.kind '{}' unknown; expected gpt2 or mlp", cfg.kind));
}

}  // namespace ds::runtime
