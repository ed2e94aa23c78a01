// Sampler (runtime/inference/sampler.h) top-p alone sorts only a growing head of the candidates;
// it must draw exactly what sorting the whole vocabulary draws: the same candidate order (weight
// descending, id ascending on ties), the cut where the mass reaches top_p of the total, the same
// draw from the kept mass. Vocabularies of GPT-2's size, nearly flat logits (the head must grow
// several times), peaked ones (it never grows), ties, and top_p up to 1 - 1e-6.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/data/rng.h"
#include "runtime/inference/sampler.h"

using namespace ds::runtime;

namespace {

// The full-sort nucleus draw, written out.
int32_t referenceTopP(const std::vector<float>& logits, double temperature, double topP,
                      SplitMix64& rng) {
  double mx = logits[0];
  for (float val : logits) mx = std::max(mx, double(val));
  std::vector<std::pair<double, int32_t>> cand;
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double diff = double(logits[i]) - mx;
    const double weight = diff == 0.0 ? 1.0 : std::exp(diff / temperature);
    cand.emplace_back(weight, int32_t(i));
    total += weight;
  }
  std::sort(cand.begin(), cand.end(), [](const auto& lhs, const auto& rhs) {
    return lhs.first > rhs.first || (lhs.first == rhs.first && lhs.second < rhs.second);
  });
  const double target = topP * total;
  size_t keep = cand.size();
  double cum = 0.0;
  for (size_t i = 0; i < cand.size(); ++i) {
    cum += cand[i].first;
    if (cum >= target) {
      keep = i + 1;
      break;
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < keep; ++i) kept += cand[i].first;
  const double draw = rng.uniform() * kept;
  cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += cand[i].first;
    if (draw < cum) return cand[i].second;
  }
  return cand[keep - 1].second;
}

}  // namespace

TEST_CASE("sampler: top-p alone draws what a full sort of the vocabulary draws", "[unit]") {
  const int vocab = 50257;
  std::mt19937 gen(5);
  for (const double spread : {0.01, 1.0, 8.0}) {  // nearly flat .. peaked
    std::normal_distribution<float> dist(0.0f, float(spread));
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& val : logits) val = dist(gen);
    for (int i = 0; i < 300; ++i) logits[size_t(i) * 7] = logits[3];  // ties with one another
    for (const float topP : {0.3f, 0.9f, 0.999999f}) {
      const SamplingParams params{1.0f, 0, topP};
      Sampler sampler(params);
      SplitMix64 ours(11), ref(11);
      for (int draw = 0; draw < 20; ++draw) {
        INFO("spread " << spread << " top_p " << topP << " draw " << draw);
        REQUIRE(sampler.next(logits.data(), vocab, ours) ==
                referenceTopP(logits, 1.0, double(topP), ref));
      }
    }
  }
}
