// checkGpt2Batch / checkMlpBatch (see batch_check.h).
#include "runtime/model/batch_check.h"

#include <fmt/format.h>

#include <cstddef>

#include "core/error.h"

namespace ds::runtime {

int checkGpt2Batch(const int32_t* inputs, const int32_t* targets, int B, int T, int vocab,
                   int seqLen) {
  if (B < 1 || T < 1 || T > seqLen) {
    throw ConfigError(
        fmt::format("gpt2 forward: batch {}x{} invalid; need B >= 1 and "
                    "1 <= T <= seq_len ({})",
                    B, T, seqLen));
  }
  const size_t BT = static_cast<size_t>(B) * T;
  int valid = 0;
  for (size_t i = 0; i < BT; ++i) {
    if (inputs[i] < 0 || inputs[i] >= vocab) {
      throw ConfigError(
          fmt::format("gpt2 forward: token id {} at [b={}, t={}] outside the "
                      "vocabulary [0, {})",
                      inputs[i], i / T, i % T, vocab));
    }
    if (targets[i] >= vocab) {
      throw ConfigError(
          fmt::format("gpt2 forward: target id {} at [b={}, t={}] outside the "
                      "vocabulary [0, {}) (negative ids are ignored)",
                      targets[i], i / T, i % T, vocab));
    }
    valid += targets[i] >= 0 ? 1 : 0;
  }
  return valid;
}

int checkMlpBatch(const int32_t* inputs, const int32_t* targets, int B, int T, int numInputs,
                  int numClasses) {
  if (B < 1 || T < 1) throw ConfigError(fmt::format("mlp forward: batch {}x{} invalid", B, T));
  const int N = B * T;
  int valid = 0;
  for (int i = 0; i < N; ++i) {
    if (inputs[i] < 0 || inputs[i] >= numInputs) {
      throw ConfigError(fmt::format("mlp forward: input id {} at position {} outside [0, {})",
                                    inputs[i], i, numInputs));
    }
    if (targets[i] >= numClasses) {
      throw ConfigError(
          fmt::format("mlp forward: target class {} at position {} outside [0, {}) "
                      "(negative ids are ignored)",
                      targets[i], i, numClasses));
    }
    valid += targets[i] >= 0 ? 1 : 0;
  }
  return valid;
}

}  // namespace ds::runtime
