// DataLoader: this rank's disjoint slice of every global micro-batch, deterministic from the
// seed. The corpus is cut into samples of seqLen+1 tokens (sample i starts at i*seqLen); each
// epoch visits them in a seeded permutation; global micro-batch g holds the samples
// perm[g*B*world .. (g+1)*B*world) and rank r takes the r-th run of B of them. So for the same
// seed and global batch, the union over ranks is identical for any world size.
// Not thread-safe (one loader per rank thread).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/data/token_corpus.h"

namespace ds::runtime {

struct Batch {
  int B = 0, T = 0;
  std::vector<int32_t> inputs;   // [B*T]
  std::vector<int32_t> targets;  // [B*T], inputs shifted by one
};

struct LoaderOptions {
  int seqLen = 0;      // T
  int microBatch = 0;  // B (per rank)
  int rank = 0, world = 1;
  uint64_t seed = 0;
  bool shuffle = true;  // false: samples in corpus order (evaluation)
};

class DataLoader {
 public:
  // ConfigError if the corpus holds fewer samples than one global micro-batch.
  DataLoader(std::shared_ptr<const TokenCorpus> corpus, LoaderOptions opts);

  void next(Batch& out);                             // fills the next micro-batch of this rank
  uint64_t position() const { return batchIndex_; }  // global micro-batches consumed
  void seek(uint64_t batchIndex);  // resume: the same sequence continues (checkpoints)
  void reset() { seek(0); }
  uint64_t samplesPerEpoch() const { return numSamples_; }
  uint64_t batchesPerEpoch() const;

 private:
  void buildEpoch(uint64_t epoch);

  std::shared_ptr<const TokenCorpus> corpus_;
  LoaderOptions opts_;
  uint64_t numSamples_ = 0, batchIndex_ = 0, epoch_ = UINT64_MAX;
  std::vector<uint64_t> perm_;
};

}  // namespace ds::runtime
