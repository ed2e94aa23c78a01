// Next-token choice from one position's logits: greedy (temperature 0), or a draw from
// softmax(logits / temperature) restricted to the top_k most likely tokens and then to the
// smallest set whose probability reaches top_p (nucleus). Draws come from a SplitMix64 stream, so
// the same seed gives the same tokens on every host. Ties go to the lower token id.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/data/rng.h"

namespace ds::runtime {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy; > 0: sample
  int topK = 0;              // 0: no limit
  float topP = 1.0f;         // in (0, 1]; 1: no limit
};

// ConfigError naming the flag (--temperature, --top_k, --top_p) and the value when out of range.
void validateSampling(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p) { validateSampling(p); }
  int32_t next(const float* logits, int vocab, SplitMix64& rng);

 private:
  SamplingParams p_;
  std::vector<std::pair<double, int32_t>> cand_;  // (probability, id)
};

int32_t argmaxToken(const float* logits, int vocab);

}  // namespace ds::runtime
