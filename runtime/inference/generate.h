// generate: prompts (token ids) to continuations over a Decoder. Each prompt is prefilled in its
// own slot with one forward of its tokens; then every unfinished prompt gets one new token per
// decode step, all prompts in one batched forward of one row each (the KV cache holds the prefix).
// A prompt's tokens depend only on its own ids, the options and its index (its sampling stream is
// seeded from seed and the index), so greedy results are the same batched or alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/inference/inference_model.h"
#include "runtime/inference/sampler.h"

namespace ds::comm {
class ProcessGroup;
}

namespace ds::runtime {

struct GenerateOptions {
  int maxNewTokens = 32;
  SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<int32_t> stop;  // a generated stop token ends its prompt (kept as its last token)
  bool keepLogits = false;    // record the logits every generated token was chosen from
  // Tensor-parallel (model sharded): the group of its ranks; every rank calls generate with the
  // same prompts and options and gets the same tokens (the logits are all-gathered).
  comm::ProcessGroup* group = nullptr;
};

struct Generation {
  std::vector<int32_t> tokens;  // new tokens only
  std::string finish;           // "length" | "stop" | "context" (the model's seq_len reached)
  std::vector<float> logits;    // [tokens.size(), vocab] when keepLogits
};

// ConfigError naming --prompt_ids and the prompt's number (from 1) for an empty prompt, one longer
// than the context, or an id outside the vocabulary; --max_new_tokens < 0 and bad sampling values
// likewise.
void validatePrompts(const InferenceModel& model, const std::vector<std::vector<int32_t>>& prompts);
std::vector<Generation> generate(const InferenceModel& model,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerateOptions& opts);

}  // namespace ds::runtime
