// InferenceModel and loadInferenceModel (see inference_model.h).
#include "runtime/inference/inference_model.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/export_formats.h"
#include "runtime/inference/tensor_parallel.h"
#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime {

InferenceModel::InferenceModel(const ModelConfig& cfg, std::vector<float> flat, DType dtype,
                               const TpShard& shard)
    : cfg_(cfg), dtype_(dtype), shard_(shard) {
  if (cfg.kind != "gpt2") throw ConfigError("generate: only GPT-2 models generate text");
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    throw ConfigError(fmt::format("generate: --dtype {}: expected fp32 or bf16", dtypeName(dtype)));
  auto model = makeModel(cfg);
  size_t off = 0;
  for (const auto& p : model->params()) {
    offsets_.push_back(off);
    matrix_.push_back(p.shape.size() == 2 && p.name != "wpe");
    off += p.numel;
  }
  if (flat.size() != off)
    throw ConfigError(
        fmt::format("generate: the weights hold {} values, the model needs {}", flat.size(), off));
  checkTensorParallel(cfg, shard);
  if (shard.size > 1) {  // keep only this rank's slices; the offsets follow the sliced sizes
    std::vector<size_t> sizes;
    flat = shardModelWeights(cfg, flat, shard, sizes);
    off = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      offsets_[i] = off;
      off += sizes[i];
    }
  }
  if (dtype == DType::kF32) {
    flat_ = std::move(flat);
    return;
  }
  flat16_.resize(off);
  f32ToBf16(flat16_.data(), flat.data(), off);
  roundToBf16(flat.data(), off);
  for (size_t i = 0; i < matrix_.size(); ++i) {  // drop the matrices' fp32 copies
    if (!matrix_[i]) continue;
    const size_t end = i + 1 < offsets_.size() ? offsets_[i + 1] : off;
    std::fill(flat.begin() + static_cast<std::ptrdiff_t>(offsets_[i]),
              flat.begin() + static_cast<std::ptrdiff_t>(end), 0.0f);
  }
  flat_ = std::move(flat);  // matrices zeroed; vectors and wpe rounded to bf16 values
}

const float* InferenceModel::f32(int i) const {
  if (dtype_ == DType::kBF16 && matrix_[static_cast<size_t>(i)]) return nullptr;
  return flat_.data() + offsets_[static_cast<size_t>(i)];
}

const bf16* InferenceModel::b16(int i) const {
  if (dtype_ != DType::kBF16) return nullptr;
  return flat16_.data() + offsets_[static_cast<size_t>(i)];
}

size_t InferenceModel::weightBytes() const {
  if (dtype_ == DType::kF32) return flat_.size() * sizeof(float);
  return flat16_.size() * sizeof(bf16);
}

InferenceModel loadInferenceModel(const std::string& path, const LoadOptions& opts,
                                  std::string* description) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError(fmt::format(
        "generate: model '{}' does not exist (expected a checkpoint folder holding 'latest' or "
        "an llm.c .bin file)",
        path));
  ModelConfig cfg;
  std::vector<float> flat;
  if (fs::is_directory(path, ec)) {
    Gpt2Weights w = readGpt2Weights(path, opts.tag.empty() ? readLatestTag(path) : opts.tag,
                                    ExportShape{opts.nHead, opts.vocabSize});
    cfg.kind = "gpt2";
    cfg.nLayer = w.nLayer;
    cfg.nHead = w.nHead;
    cfg.nEmbd = w.nEmbd;
    cfg.seqLen = w.maxT;
    cfg.vocabSize = w.vocab;
    cfg.paddedVocab = w.paddedVocab;
    flat = std::move(w.flat);
    if (description) *description = fmt::format("checkpoint {} (step {})", w.dir, w.step);
  } else {
    if (!opts.tag.empty())
      throw ConfigError(
          fmt::format("generate: --tag {} given but '{}' is a file, not a checkpoint "
                      "folder",
                      opts.tag, path));
    loadLlmcCheckpoint(path, cfg, flat);
    if (description) *description = fmt::format("llm.c model {}", path);
  }
  cfg.compute = opts.dtype;
  return InferenceModel(cfg, std::move(flat), opts.dtype, opts.shard);
}

}  // namespace ds::runtime
