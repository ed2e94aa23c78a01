// parseCompletionRequest: OpenAI's fields with their defaults, text and id prompts, and a 400
// naming the field (or the JSON position) for everything it refuses.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/serve/completion_request.h"

using namespace ds::runtime::serve;

namespace {

CompletionLimits limits() { return {256, 16, 64, 9}; }

std::string refusal(const std::string& body) {
  const auto tok = ds::runtime::makeTokenizer("byte", "");
  try {
    parseCompletionRequest(body, *tok, limits());
  } catch (const HttpError& e) {
    CHECK(e.status() == 400);
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("completion request: fields, defaults and prompt forms", "[unit]") {
  const auto tok = ds::runtime::makeTokenizer("byte", "");
  const auto d = parseCompletionRequest(R"({"prompt": "hi"})", *tok, limits());
  CHECK(d.prompt == std::vector<int32_t>{104, 105});
  CHECK(d.maxTokens == 16);
  CHECK(d.sampling.temperature == 1.0f);
  CHECK(d.sampling.topP == 1.0f);
  CHECK(d.seed == 9);  // the server's default
  CHECK(!d.stream);
  const auto r = parseCompletionRequest(
      R"({"model": "m", "prompt": [1, 2, 255], "max_tokens": 64, "temperature": 0,
          "top_p": 0.5, "top_k": 3, "stream": true, "seed": 4, "n": 1, "user": "u"})",
      *tok, limits());
  CHECK(r.prompt == std::vector<int32_t>{1, 2, 255});
  CHECK(r.maxTokens == 64);
  CHECK(r.sampling.temperature == 0.0f);
  CHECK(r.sampling.topP == 0.5f);
  CHECK(r.sampling.topK == 3);
  CHECK(r.stream);
  CHECK(r.seed == 4);
  CHECK(r.model == "m");
}

TEST_CASE("completion request: bad JSON and bad fields are 400 naming them", "[unit]") {
  CHECK_THAT(refusal("{\"prompt\": \"x\",\n  oops}"),
             Catch::Contains("invalid JSON in the request body (byte 19): parse error at line 2, "
                             "column 3"));
  CHECK_THAT(refusal(""), Catch::Contains("invalid JSON"));
  CHECK_THAT(refusal("[1]"), Catch::Contains("must be a JSON object, got array"));
  CHECK_THAT(refusal("{}"), Catch::Contains("'prompt' is required"));
  CHECK_THAT(refusal(R"({"prompt": "x", "max_token": 3})"),
             Catch::Contains("unknown field 'max_token' (supported: model, prompt"));
  CHECK_THAT(refusal(R"({"prompt": ""})"), Catch::Contains("'prompt': the prompt is empty"));
  CHECK_THAT(refusal(R"({"prompt": 5})"),
             Catch::Contains("'prompt': expected a string or an array of token ids, got number"));
  CHECK_THAT(refusal(R"({"prompt": ["a", "b"]})"), Catch::Contains("several prompts"));
  CHECK_THAT(refusal(R"({"prompt": [1, "b"]})"),
             Catch::Contains("'prompt[1]': expected a token id (integer), got \"b\""));
  CHECK_THAT(refusal(R"({"prompt": [1, 256]})"),
             Catch::Contains("'prompt[1]': token id 256 outside the vocabulary [0, 256)"));
  CHECK_THAT(refusal(R"({"prompt": [-1]})"), Catch::Contains("token id -1 outside"));
  CHECK_THAT(refusal(R"({"prompt": "0123456789abcdefg"})"),
             Catch::Contains("'prompt': 17 tokens, longer than the model's context of 16 tokens"));
  CHECK_THAT(refusal(R"({"prompt": "x", "max_tokens": 65})"),
             Catch::Contains("'max_tokens': 65 outside [0, 64]"));
  CHECK_THAT(refusal(R"({"prompt": "x", "max_tokens": 1.5})"),
             Catch::Contains("'max_tokens': expected an integer, got 1.5"));
  CHECK_THAT(refusal(R"({"prompt": "x", "max_tokens": 18446744073709551615})"),
             Catch::Contains("'max_tokens': 18446744073709551615 outside [0, 64]"));
  CHECK_THAT(refusal(R"({"prompt": "x", "temperature": -0.5})"),
             Catch::Contains("'temperature': -0.5 outside [0, 100]"));
  // 1e999 overflows a double: nlohmann throws out_of_range, not parse_error (found by fuzzing).
  CHECK_THAT(refusal(R"({"prompt": "x", "temperature": 1e999})"),
             Catch::Contains("invalid JSON in the request body: number overflow"));
  CHECK_THAT(refusal(R"({"prompt": "x", "temperature": "hot"})"),
             Catch::Contains("'temperature': expected a number, got \"hot\""));
  CHECK_THAT(refusal(R"({"prompt": "x", "top_p": 0})"),
             Catch::Contains("'top_p': 0 outside (0, 1]"));
  CHECK_THAT(refusal(R"({"prompt": "x", "top_k": -2})"), Catch::Contains("'top_k': -2 outside"));
  CHECK_THAT(refusal(R"({"prompt": "x", "stream": "yes"})"),
             Catch::Contains("'stream': expected true or false"));
  CHECK_THAT(refusal(R"({"prompt": "x", "n": 2})"), Catch::Contains("'n': 2 outside [1, 1]"));
  CHECK_THAT(refusal(R"({"prompt": "x", "model": 3})"),
             Catch::Contains("'model': expected a string"));
}
