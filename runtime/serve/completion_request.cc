// parseCompletionRequest (see completion_request.h).
#include "runtime/serve/completion_request.h"

#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ds::runtime::serve {
namespace {

using nlohmann::json;

constexpr std::string_view kFields =
    "model, prompt, max_tokens, temperature, top_p, top_k, stream, seed, n, user";

[[noreturn]] void bad(const std::string& msg) { throw HttpError(400, msg); }

json parseJson(const std::string& body) {
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    // nlohmann's text: "[json.exception.parse_error.101] parse error at line 1, column 9: ..."
    std::string what = e.what();
    const size_t at = what.find("parse error");
    if (at != std::string::npos) what = what.substr(at);
    bad(fmt::format("invalid JSON in the request body (byte {}): {}", e.byte, what));
  } catch (const json::exception& e) {  // out_of_range: a number too large for a double
    std::string what = e.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    bad(fmt::format("invalid JSON in the request body: {}", what));
  }
}

int64_t integerField(const json& j, const char* key, int64_t lo, int64_t hi) {
  if (!j.is_number_integer() && !j.is_number_unsigned())
    bad(fmt::format("'{}': expected an integer, got {}", key, j.dump()));
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(fmt::format("'{}': {} outside [{}, {}]", key, j.dump(), lo, hi));
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) bad(fmt::format("'{}': {} outside [{}, {}]", key, v, lo, hi));
  return v;
}

double numberField(const json& j, const char* key) {
  if (!j.is_number()) bad(fmt::format("'{}': expected a number, got {}", key, j.dump()));
  const double v = j.get<double>();
  if (!std::isfinite(v)) bad(fmt::format("'{}': expected a finite number", key));
  return v;
}

std::vector<int32_t> promptIds(const json& p, const Tokenizer& tok, const CompletionLimits& lim) {
  std::vector<int32_t> ids;
  if (p.is_string()) {
    ids = tok.encode(p.get<std::string>());
  } else if (p.is_array() && !p.empty() && p[0].is_string()) {
    bad("'prompt': a list of several prompts is not supported; send one request per prompt");
  } else if (p.is_array()) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (!p[i].is_number_integer() && !p[i].is_number_unsigned())
        bad(fmt::format("'prompt[{}]': expected a token id (integer), got {}", i, p[i].dump()));
      const int64_t v = p[i].is_number_unsigned() && p[i].get<uint64_t>() > INT32_MAX
                            ? INT64_MAX
                            : p[i].get<int64_t>();
      if (v < 0 || v >= lim.vocab)
        bad(fmt::format("'prompt[{}]': token id {} outside the vocabulary [0, {})", i, p[i].dump(),
                        lim.vocab));
      ids.push_back(static_cast<int32_t>(v));
    }
  } else {
    bad(fmt::format("'prompt': expected a string or an array of token ids, got {}",
                    std::string(p.type_name())));
  }
  if (ids.empty()) bad("'prompt': the prompt is empty");
  if (ids.size() > static_cast<size_t>(lim.context))
    bad(fmt::format("'prompt': {} tokens, longer than the model's context of {} tokens", ids.size(),
                    lim.context));
  return ids;
}

// One field into r; false for a key that is not a field.
bool setField(const std::string& key, const json& v, const Tokenizer& tokenizer,
              const CompletionLimits& limits, CompletionRequest& r) {
  if (key == "prompt") {
    r.prompt = promptIds(v, tokenizer, limits);
  } else if (key == "max_tokens") {
    if (!v.is_null())
      r.maxTokens = static_cast<int>(integerField(v, "max_tokens", 0, limits.maxTokensLimit));
  } else if (key == "temperature") {
    const double t = numberField(v, "temperature");
    if (t < 0.0 || t > 100.0) bad(fmt::format("'temperature': {} outside [0, 100]", t));
    r.sampling.temperature = static_cast<float>(t);
  } else if (key == "top_p") {
    const double p = numberField(v, "top_p");
    if (!(p > 0.0 && p <= 1.0)) bad(fmt::format("'top_p': {} outside (0, 1]", p));
    r.sampling.topP = static_cast<float>(p);
  } else if (key == "top_k") {
    r.sampling.topK = static_cast<int>(integerField(v, "top_k", 0, INT32_MAX));
  } else if (key == "stream") {
    if (!v.is_boolean()) bad(fmt::format("'stream': expected true or false, got {}", v.dump()));
    r.stream = v.get<bool>();
  } else if (key == "seed") {
    if (!v.is_null()) r.seed = static_cast<uint64_t>(integerField(v, "seed", 0, INT64_MAX));
  } else if (key == "n") {
    integerField(v, "n", 1, 1);
  } else if (key == "model" || key == "user") {
    if (!v.is_string()) bad(fmt::format("'{}': expected a string, got {}", key, v.dump()));
    if (key == "model") r.model = v.get<std::string>();
  } else {
    return false;
  }
  return true;
}

}  // namespace

CompletionRequest parseCompletionRequest(const std::string& body, const Tokenizer& tokenizer,
                                         const CompletionLimits& limits) {
  const json j = parseJson(body);
  if (!j.is_object())
    bad(fmt::format("the request body must be a JSON object, got {}", std::string(j.type_name())));
  CompletionRequest r;
  r.seed = limits.defaultSeed;
  for (const auto& [key, v] : j.items())
    if (!setField(key, v, tokenizer, limits, r))
      bad(fmt::format("unknown field '{}' (supported: {})", key, kFields));
  if (!j.contains("prompt")) bad("'prompt' is required");
  return r;
}

}  // namespace ds::runtime::serve
