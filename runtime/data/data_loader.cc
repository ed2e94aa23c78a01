// DataLoader: seeded epoch permutations of fixed-length samples, sliced by rank; see data_loader.h.
#include "runtime/data/data_loader.h"

#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/data/rng.h"

namespace ds::runtime {

DataLoader::DataLoader(std::shared_ptr<const TokenCorpus> corpus, LoaderOptions opts)
    : corpus_(std::move(corpus)), opts_(opts) {
  DS_CHECK(opts_.seqLen > 0 && opts_.microBatch > 0 && opts_.world > 0, "bad loader options");
  DS_CHECK(opts_.rank >= 0 && opts_.rank < opts_.world, "rank {} of {}", opts_.rank, opts_.world);
  numSamples_ = corpus_->size() > 1 ? (corpus_->size() - 1) / uint64_t(opts_.seqLen) : 0;
  uint64_t global = uint64_t(opts_.microBatch) * uint64_t(opts_.world);
  if (numSamples_ < global)
    throw ConfigError(fmt::format(
        "data '{}': {} tokens make {} samples of {}+1 tokens, fewer than one global micro-batch "
        "({} per rank x {} ranks)",
        corpus_->name(), corpus_->size(), numSamples_, opts_.seqLen, opts_.microBatch,
        opts_.world));
}

uint64_t DataLoader::batchesPerEpoch() const {
  return numSamples_ / (uint64_t(opts_.microBatch) * uint64_t(opts_.world));
}

void DataLoader::buildEpoch(uint64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  perm_.resize(numSamples_);
  std::iota(perm_.begin(), perm_.end(), uint64_t(0));
  if (!opts_.shuffle) return;
  SplitMix64 rng(opts_.seed * 0x9E3779B97F4A7C15ull + epoch + 1);
  for (uint64_t i = numSamples_; i > 1; --i) std::swap(perm_[i - 1], perm_[rng.below(i)]);
}

void DataLoader::seek(uint64_t batchIndex) { batchIndex_ = batchIndex; }

void DataLoader::next(Batch& out) {
  const int B = opts_.microBatch, T = opts_.seqLen;
  uint64_t perEpoch = batchesPerEpoch();
  buildEpoch(batchIndex_ / perEpoch);
  uint64_t first = (batchIndex_ % perEpoch) * uint64_t(B) * uint64_t(opts_.world) +
                   uint64_t(opts_.rank) * uint64_t(B);
  out.B = B;
  out.T = T;
  out.inputs.resize(size_t(B) * size_t(T));
  out.targets.resize(size_t(B) * size_t(T));
  std::vector<int32_t> buf(size_t(T) + 1);
  for (int b = 0; b < B; ++b) {
    corpus_->read(perm_[first + uint64_t(b)] * uint64_t(T), size_t(T) + 1, buf.data());
    std::copy(buf.begin(), buf.end() - 1, out.inputs.begin() + long(b) * T);
    std::copy(buf.begin() + 1, buf.end(), out.targets.begin() + long(b) * T);
  }
  ++batchIndex_;
}

}  // namespace ds::runtime
