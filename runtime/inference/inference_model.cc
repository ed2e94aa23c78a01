// InferenceModel and loadInferenceModel (see inference_model.h).
#include "runtime/inference/inference_model.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/export_formats.h"
#include "runtime/inference/tensor_parallel.h"
#include "runtime/model/llmc_file.h"
#include "runtime/tensor/bf16_convert.h"

namespace ds::runtime {

InferenceModel::InferenceModel(const ModelConfig& cfg, std::vector<float> flat, DType dtype,
                               const TpShard& shard)
    : InferenceModel(cfg, dtype, shard) {
  if (flat.size() != flatSize(cfg))
    throw ConfigError(fmt::format("generate: the weights hold {} values, the model needs {}",
                                  flat.size(), flatSize(cfg)));
  std::vector<size_t> sizes;
  if (shard.size > 1) flat = shardModelWeights(cfg, flat, shard, sizes);  // this rank's slices
  else shardRanges(cfg, shard, sizes);
  hold(std::move(flat), sizes);
}

InferenceModel InferenceModel::fromSlices(const ModelConfig& cfg, std::vector<float> slices,
                                          const std::vector<size_t>& sizes, DType dtype,
                                          const TpShard& shard) {
  InferenceModel model(cfg, dtype, shard);
  size_t total = 0;
  for (size_t n : sizes) total += n;
  if (sizes.size() != model.matrix_.size() || slices.size() != total)
    throw InternalError(fmt::format(
        "InferenceModel::fromSlices: {} values in {} parameters, the model has {} parameters",
        slices.size(), sizes.size(), model.matrix_.size()));
  model.hold(std::move(slices), sizes);
  return model;
}

InferenceModel::InferenceModel(const ModelConfig& cfg, DType dtype, const TpShard& shard)
    : cfg_(cfg), dtype_(dtype), shard_(shard) {
  if (cfg.kind != "gpt2") throw ConfigError("generate: only GPT-2 models generate text");
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    throw ConfigError(fmt::format("generate: --dtype {}: expected fp32 or bf16", dtypeName(dtype)));
  auto model = makeModel(cfg);
  for (const auto& p : model->params()) matrix_.push_back(p.shape.size() == 2 && p.name != "wpe");
  checkTensorParallel(cfg, shard);
}

void InferenceModel::hold(std::vector<float> flat, const std::vector<size_t>& sizes) {
  size_t off = 0;
  offsets_.clear();
  for (size_t n : sizes) {
    offsets_.push_back(off);
    off += n;
  }
  if (dtype_ == DType::kF32) {
    flat_ = std::move(flat);
    return;
  }
  flat16_.resize(off);
  f32ToBf16(flat16_.data(), flat.data(), off);
  roundToBf16(flat.data(), off);
  // Only the non-matrix tensors stay fp32 (the matrices are read as bf16): pack them.
  std::vector<float> small;
  smallOffsets_.assign(matrix_.size(), 0);
  for (size_t i = 0; i < matrix_.size(); ++i) {
    const size_t begin = offsets_[i], end = begin + sizes[i];
    if (matrix_[i]) continue;
    smallOffsets_[i] = small.size();
    small.insert(small.end(), flat.begin() + static_cast<std::ptrdiff_t>(begin),
                 flat.begin() + static_cast<std::ptrdiff_t>(end));
  }
  flat_ = std::move(small);
}

const float* InferenceModel::f32(int i) const {
  const auto index = static_cast<size_t>(i);
  if (dtype_ == DType::kF32) return flat_.data() + offsets_[index];
  return matrix_[index] ? nullptr : flat_.data() + smallOffsets_[index];
}

const bf16* InferenceModel::b16(int i) const {
  if (dtype_ != DType::kBF16) return nullptr;
  return flat16_.data() + offsets_[static_cast<size_t>(i)];
}

size_t InferenceModel::weightBytes() const {
  if (dtype_ == DType::kF32) return flat_.size() * sizeof(float);
  return flat16_.size() * sizeof(bf16);
}

size_t InferenceModel::heldBytes() const {
  return flat_.size() * sizeof(float) + flat16_.size() * sizeof(bf16);
}

InferenceModel loadInferenceModel(const std::string& path, const LoadOptions& opts,
                                  std::string* description, size_t* valuesRead) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError(fmt::format(
        "generate: model '{}' does not exist (expected a checkpoint folder holding 'latest' or "
        "an llm.c .bin file)",
        path));
  ModelConfig cfg;
  // Reads flat elements [offset, offset + count) of the whole model, in Gpt2Model order.
  std::function<void(size_t, size_t, float*)> read;
  std::unique_ptr<LlmcFile> llmc;
  if (fs::is_directory(path, ec)) {
    Gpt2WeightSource src = openGpt2Weights(path, opts.tag.empty() ? readLatestTag(path) : opts.tag,
                                           ExportShape{opts.nHead, opts.vocabSize});
    const Gpt2Weights& w = src.facts;
    cfg.kind = "gpt2";
    cfg.nLayer = w.nLayer;
    cfg.nHead = w.nHead;
    cfg.nEmbd = w.nEmbd;
    cfg.seqLen = w.maxT;
    cfg.vocabSize = w.vocab;
    cfg.paddedVocab = w.paddedVocab;
    read = std::move(src.read);
    if (description) *description = fmt::format("checkpoint {} (step {})", w.dir, w.step);
  } else {
    if (!opts.tag.empty())
      throw ConfigError(
          fmt::format("generate: --tag {} given but '{}' is a file, not a checkpoint "
                      "folder",
                      opts.tag, path));
    llmc = std::make_unique<LlmcFile>(path, ModelConfig{});
    cfg = llmc->header();
    read = [file = llmc.get()](size_t offset, size_t count, float* out) {
      file->read(offset, count, out);
    };
    if (description) *description = fmt::format("llm.c model {}", path);
  }
  cfg.compute = opts.dtype;
  checkTensorParallel(cfg, opts.shard);
  // Only this rank's slices are read (the whole model when one rank serves).
  std::vector<size_t> sizes;
  const auto ranges = shardRanges(cfg, opts.shard, sizes);
  size_t total = 0;
  for (const WeightRange& range : ranges) total += range.count;
  std::vector<float> slices(total);
  float* out = slices.data();
  for (const WeightRange& range : ranges) {
    read(range.offset, range.count, out);
    out += range.count;
  }
  if (valuesRead) *valuesRead = total;
  return InferenceModel::fromSlices(cfg, std::move(slices), sizes, opts.dtype, opts.shard);
}

}  // namespace ds::runtime
