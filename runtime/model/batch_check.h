// The checks every model makes of a batch before it runs (the host models and the op models
// alike, so a bad token id gives the same error on the CPU and the GPU): shapes and id ranges,
// each a ConfigError naming the position and the allowed range. Negative targets are ignored
// positions. Not the data loader's checks (runtime/data).
#pragma once

#include <cstdint>

namespace ds::runtime {

// GPT-2: B >= 1, 1 <= T <= seqLen, inputs in [0, vocab), targets < vocab. Returns the number of
// targets >= 0.
int checkGpt2Batch(const int32_t* inputs, const int32_t* targets, int B, int T, int vocab,
                   int seqLen);
// MLP: B, T >= 1, inputs in [0, inputs), targets < classes. Returns the number of targets >= 0.
int checkMlpBatch(const int32_t* inputs, const int32_t* targets, int B, int T, int numInputs,
                  int numClasses);

}  // namespace ds::runtime
