// CompletionRequest: the body of POST /v1/completions (OpenAI's shape) parsed and checked against
// the model and the server's limits. Strict: unknown fields, wrong types and out-of-range values
// are HttpError 400 naming the field; bad JSON names the line and column. Not the scheduler: a
// request that passes here only still has to find room (429 when the queue is full).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/inference/sampler.h"
#include "runtime/serve/http_request.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ds::runtime::serve {

struct CompletionRequest {
  std::vector<int32_t> prompt;  // token ids (a text prompt is encoded with the tokenizer)
  int maxTokens = 16;           // OpenAI's default
  SamplingParams sampling;      // temperature 1, top_p 1 unless given; top_k is our extension
  uint64_t seed = 0;
  bool stream = false;
  std::string model;  // as the client named it ("" when absent); echoed back
};

struct CompletionLimits {
  int vocab = 0;             // ids must be below
  int context = 0;           // the model's seq_len: a longer prompt is refused
  int maxTokensLimit = 256;  // max_tokens above is refused
  uint64_t defaultSeed = 0;  // when the request has no seed
};

// Throws HttpError(400) naming the field (or the JSON position) for anything it refuses.
CompletionRequest parseCompletionRequest(const std::string& body, const Tokenizer& tokenizer,
                                         const CompletionLimits& limits);

}  // namespace ds::runtime::serve
