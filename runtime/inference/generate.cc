// generate (see generate.h).
#include "runtime/inference/generate.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/inference/decoder.h"

namespace ds::runtime {

void validatePrompts(const InferenceModel& model,
                     const std::vector<std::vector<int32_t>>& prompts) {
  const int V = model.vocab(), T = model.config().seqLen;
  if (prompts.empty()) throw ConfigError("generate: no prompt given (--prompt_ids or --prompt)");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& ids = prompts[p];
    if (ids.empty()) throw ConfigError(fmt::format("--prompt_ids #{}: the prompt is empty", p + 1));
    if (ids.size() > static_cast<size_t>(T))
      throw ConfigError(
          fmt::format("--prompt_ids #{}: {} tokens, longer than the model's context of {} tokens",
                      p + 1, ids.size(), T));
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= V)
        throw ConfigError(fmt::format(
            "--prompt_ids #{}: token id {} (position {}) outside the vocabulary [0, {})", p + 1,
            ids[i], i, V));
  }
}

std::vector<Generation> generate(const InferenceModel& model,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerateOptions& opts) {
  validatePrompts(model, prompts);
  if (opts.maxNewTokens < 0)
    throw ConfigError(fmt::format("--max_new_tokens {}: expected >= 0", opts.maxNewTokens));
  Sampler sampler(opts.sampling);
  const int P = static_cast<int>(prompts.size()), V = model.vocab(), T = model.config().seqLen;
  const size_t Vs = static_cast<size_t>(V);
  std::vector<Generation> out(prompts.size());
  if (opts.maxNewTokens == 0) {
    for (auto& g : out) g.finish = "length";
    return out;
  }
  DecoderOptions decOpts;
  decOpts.group = opts.group;
  Decoder dec(model, P, decOpts);
  std::vector<SplitMix64> rng;
  for (int p = 0; p < P; ++p)
    rng.emplace_back(opts.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1);
  std::vector<float> logits(Vs * static_cast<size_t>(P));
  std::vector<int32_t> last(static_cast<size_t>(P));
  std::vector<bool> done(static_cast<size_t>(P), false);
  // Accept token tok for prompt p (chosen from row); mark it done when it must stop.
  auto accept = [&](int p, const float* row) {
    Generation& g = out[static_cast<size_t>(p)];
    const int32_t tok = sampler.next(row, V, rng[static_cast<size_t>(p)]);
    g.tokens.push_back(tok);
    if (opts.keepLogits) g.logits.insert(g.logits.end(), row, row + V);
    last[static_cast<size_t>(p)] = tok;
    if (std::find(opts.stop.begin(), opts.stop.end(), tok) != opts.stop.end()) g.finish = "stop";
    else if (static_cast<int>(g.tokens.size()) >= opts.maxNewTokens) g.finish = "length";
    else if (dec.length(p) >= T) g.finish = "context";  // no position left for tok
    done[static_cast<size_t>(p)] = !g.finish.empty();
  };
  for (int p = 0; p < P; ++p) {  // prefill: one forward of the whole prompt, last row's logits
    const auto& ids = prompts[static_cast<size_t>(p)];
    const std::vector<int> slots(ids.size(), p);
    std::vector<bool> rows(ids.size(), false);
    rows.back() = true;
    dec.forward(slots.data(), ids.data(), static_cast<int>(ids.size()), rows, logits.data());
    accept(p, logits.data());
  }
  std::vector<int> slots;
  std::vector<int32_t> toks;
  for (;;) {
    slots.clear();
    toks.clear();
    for (int p = 0; p < P; ++p) {
      if (done[static_cast<size_t>(p)]) continue;
      slots.push_back(p);
      toks.push_back(last[static_cast<size_t>(p)]);
    }
    if (slots.empty()) break;
    dec.forward(slots.data(), toks.data(), static_cast<int>(slots.size()), {}, logits.data());
    for (size_t i = 0; i < slots.size(); ++i) accept(slots[i], logits.data() + i * Vs);
  }
  return out;
}

}  // namespace ds::runtime
