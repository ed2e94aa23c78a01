// The synthetic Markov chain and its exact entropy rate; see synthetic_corpus.h.
#include "runtime/data/synthetic_corpus.h"

#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/data/rng.h"

namespace ds::runtime {

std::vector<double> syntheticProfile(int branching) {
  std::vector<double> p(static_cast<size_t>(branching));
  for (int i = 0; i < branching; ++i) p[size_t(i)] = 1.0 / (i + 1);
  double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (auto& x : p) x /= sum;
  return p;
}

SyntheticCorpus::SyntheticCorpus(int vocab, int branching, uint64_t seed)
    : vocab_(vocab), branching_(branching) {
  if (vocab < 2 || vocab > 65536)
    throw ConfigError(
        fmt::format("synthetic corpus: vocabulary must be in [2, 65536], got {}", vocab));
  if (branching < 1 || branching > vocab)
    throw ConfigError(
        fmt::format("synthetic corpus: branching must be in [1, {}], got {}", vocab, branching));
  const auto profile = syntheticProfile(branching);
  SplitMix64 rng(seed);
  std::vector<int> pool(static_cast<size_t>(vocab));
  succ_.resize(size_t(vocab));
  prob_.resize(size_t(vocab));
  std::iota(pool.begin(), pool.end(), 0);
  std::vector<size_t> swaps(static_cast<size_t>(branching));
  for (int s = 0; s < vocab; ++s) {
    // Partial Fisher-Yates on the identity: the first `branching` entries become the successors,
    // in random order, so the profile's probabilities land on them in a random permutation.
    for (int i = 0; i < branching; ++i) {
      size_t j = size_t(i) + size_t(rng.below(uint64_t(vocab - i)));
      std::swap(pool[size_t(i)], pool[j]);
      swaps[size_t(i)] = j;
    }
    succ_[size_t(s)].assign(pool.begin(), pool.begin() + branching);
    prob_[size_t(s)] = profile;
    // Undo the swaps (O(branching), not O(vocab)): the pool is the identity again.
    for (int i = branching - 1; i >= 0; --i) std::swap(pool[size_t(i)], pool[swaps[size_t(i)]]);
  }
}

std::vector<uint16_t> SyntheticCorpus::generate(size_t n, uint64_t streamSeed) const {
  SplitMix64 rng(streamSeed ^ 0x5851F42D4C957F2Dull);
  std::vector<uint16_t> out(n);
  int s = int(rng.below(uint64_t(vocab_)));
  for (size_t t = 0; t < n; ++t) {
    out[t] = uint16_t(s);
    double u = rng.uniform(), acc = 0;
    const auto& p = prob_[size_t(s)];
    int k = 0;
    for (; k + 1 < branching_; ++k) {
      acc += p[size_t(k)];
      if (u < acc) break;
    }
    s = succ_[size_t(s)][size_t(k)];
  }
  return out;
}

double SyntheticCorpus::entropyFloor() const {
  // Every state's next-token distribution is a permutation of the profile, so the conditional
  // entropy given the previous token is H(profile) in every state: that is the entropy rate.
  double h = 0;
  for (double p : syntheticProfile(branching_)) h -= p * std::log(p);
  return h;
}

}  // namespace ds::runtime
