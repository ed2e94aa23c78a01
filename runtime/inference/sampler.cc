// Sampler (see sampler.h).
#include "runtime/inference/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"

namespace ds::runtime {

void validateSampling(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    throw ConfigError(fmt::format("--temperature {}: expected a finite value >= 0 (0 means greedy)",
                                  p.temperature));
  if (p.topK < 0)
    throw ConfigError(fmt::format("--top_k {}: expected >= 0 (0 means no limit)", p.topK));
  if (!(p.topP > 0.0f && p.topP <= 1.0f))
    throw ConfigError(fmt::format("--top_p {}: expected a value in (0, 1]", p.topP));
}

int32_t argmaxToken(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t Sampler::next(const float* logits, int vocab, SplitMix64& rng) {
  if (p_.temperature == 0.0f) return argmaxToken(logits, vocab);
  const double invT = 1.0 / static_cast<double>(p_.temperature);
  double mx = logits[0];
  for (int i = 1; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  cand_.resize(static_cast<size_t>(vocab));
  double total = 0.0;
  for (int32_t i = 0; i < vocab; ++i) {
    const double d = static_cast<double>(logits[i]) - mx;  // <= 0
    const double w =
        d == 0.0 ? 1.0 : std::exp(d * invT);  // the maximum weighs 1 at any temperature
    cand_[static_cast<size_t>(i)] = {w, i};
    total += w;
  }
  size_t keep = cand_.size();
  const bool topK = p_.topK > 0 && static_cast<size_t>(p_.topK) < keep;
  if (topK || p_.topP < 1.0f) {
    auto order = [](const std::pair<double, int32_t>& a, const std::pair<double, int32_t>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    double kept = 0.0;
    if (topK) {
      keep = static_cast<size_t>(p_.topK);
      std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep),
                        cand_.end(), order);
      for (size_t i = 0; i < keep; ++i) kept += cand_[i].first;
    } else {
      // top-p alone: only the head of the order is read (until the mass reaches topP * total),
      // so sort a growing prefix (partial_sort: the same elements in the same order as a full
      // sort, ties broken by id) until it holds that mass; a full sort of the vocabulary per
      // token cost more than the rest of sampling. The cut below stays inside the prefix.
      const double target = static_cast<double>(p_.topP) * total;
      keep = std::min<size_t>(cand_.size(), 64);
      for (;;) {
        std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep),
                          cand_.end(), order);
        double head = 0.0;
        for (size_t i = 0; i < keep; ++i) head += cand_[i].first;
        if (head >= target || keep == cand_.size()) break;
        keep = std::min(cand_.size(), keep * 8);
      }
      kept = total;
    }
    if (p_.topP < 1.0f) {
      const double target = static_cast<double>(p_.topP) * kept;
      double cum = 0.0;
      for (size_t i = 0; i < keep; ++i) {
        cum += cand_[i].first;
        if (cum >= target) {
          keep = i + 1;
          break;
        }
      }
      kept = 0.0;
      for (size_t i = 0; i < keep; ++i) kept += cand_[i].first;
    }
    total = kept;
  }
  const double u = rng.uniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += cand_[i].first;
    if (u < cum) return cand_[i].second;
  }
  return cand_[keep - 1].second;  // u rounded onto the total
}

}  // namespace ds::runtime
