// dsrt generate's engine (runtime/inference) against the training model: the logits the KV-cached
// decoder gives for every position equal a full forward of the whole sequence through Gpt2Model
// (fp32, within 1e-5), for a random-initialised GPT and for one trained by `dsrt train`; greedy
// output is deterministic; seeded sampling reproduces; prompts batched with different lengths give
// each prompt's tokens alone; bad sampling values, prompts and models are refused by name, and
// the CLI exits 2 for them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "ds/config.h"
#include "runtime/data/rng.h"
#include "runtime/inference/decoder.h"
#include "runtime/inference/generate.h"
#include "runtime/inference/inference_model.h"
#include "runtime/inference/sampler.h"
#include "runtime/model/gpt2.h"
#include "runtime/tensor/gemv.h"
#include "runtime/tensor/matmul_bf16.h"
#include "tests/support/skip.h"
#include "tests/support/spawn_ranks.h"

using namespace ds::runtime;
using ds::DType;
using ds::test::runCommand;
using ds::test::TempDir;

namespace {

struct NoHooks : ds::zero::BlockHooks {
  void beforeForward(int) override {}
  void afterForward(int) override {}
  void beforeBackward(int) override {}
  void afterBackward(int) override {}
};

ModelConfig smallGpt() {
  ModelConfig c;
  c.nLayer = 2;
  c.nHead = 4;
  c.nEmbd = 32;
  c.seqLen = 24;
  c.vocabSize = 50;
  c.paddedVocab = 64;
  return c;
}

InferenceModel randomModel(DType dtype = DType::kF32, uint64_t seed = 7) {
  const ModelConfig cfg = smallGpt();
  auto model = makeModel(cfg);
  std::vector<float> flat(model->numParamsTotal());
  model->initParams(flat.data(), seed);
  // GPT-2's init leaves biases and LayerNorm shifts at 0 and gains at 1; perturb every tensor so
  // a wrong bias, gain or layout shows in the logits.
  SplitMix64 rng(99);
  for (float& x : flat) x += static_cast<float>((rng.uniform() - 0.5) * 0.2);
  return InferenceModel(cfg, std::move(flat), dtype);
}

// Softmax probabilities [T, V] of one sequence from the training model's forward (fp32).
std::vector<float> fullForwardProbs(const InferenceModel& m, const std::vector<int32_t>& seq) {
  ModelConfig cfg = m.config();
  Gpt2Model model(cfg);
  ds::zero::ParamTable table;
  for (size_t i = 0; i < model.params().size(); ++i)
    table.value.push_back(const_cast<float*>(m.f32(static_cast<int>(i))));
  table.grad.assign(model.params().size(), nullptr);
  NoHooks hooks;
  const std::vector<int32_t> targets(seq.size(), -1);
  model.forward(seq.data(), targets.data(), 1, static_cast<int>(seq.size()), table, hooks);
  const float* p = model.probabilities();
  REQUIRE(p != nullptr);
  return std::vector<float>(p, p + seq.size() * static_cast<size_t>(m.vocab()));
}

// Largest |log_softmax(logits) - log(probs)| over one row: the logits up to the constant shift
// softmax ignores (the training forward keeps only probabilities).
double rowError(const float* logits, const float* probs, int V) {
  double mx = logits[0];
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(logits[v]));
  double sum = 0.0;
  for (int v = 0; v < V; ++v) sum += std::exp(double(logits[v]) - mx);
  const double lse = mx + std::log(sum);
  double err = 0.0;
  for (int v = 0; v < V; ++v)
    err = std::max(err, std::fabs((logits[v] - lse) - std::log(probs[v])));
  return err;
}

// Every generated token's logits against a full forward of prompt + generated tokens.
double generationError(const InferenceModel& m, const std::vector<int32_t>& prompt,
                       const Generation& g) {
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), g.tokens.begin(), g.tokens.end() - 1);
  const auto probs = fullForwardProbs(m, seq);
  const int V = m.vocab();
  double err = 0.0;
  for (size_t j = 0; j < g.tokens.size(); ++j) {
    const size_t pos = prompt.size() - 1 + j;
    err =
        std::max(err, rowError(g.logits.data() + j * size_t(V), probs.data() + pos * size_t(V), V));
  }
  return err;
}

std::vector<int32_t> randomTokens(int n, int V, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng.below(uint64_t(V))));
  return t;
}

constexpr double kTol = 1e-5;

}  // namespace

TEST_CASE("decoder: prefill then one token at a time equals a full forward at every position",
          "[unit]") {
  const InferenceModel m = randomModel();
  const int V = m.vocab(), T = m.config().seqLen;
  const auto seq = randomTokens(T, V, 5);
  const auto probs = fullForwardProbs(m, seq);
  Decoder dec(m, 2);
  std::vector<float> logits(size_t(T) * size_t(V));
  const int prefill = 6;
  const std::vector<int> slots(prefill, 1);
  dec.forward(slots.data(), seq.data(), prefill, {}, logits.data());
  for (int t = prefill; t < T; ++t) {
    const int slot = 1;
    dec.forward(&slot, &seq[size_t(t)], 1, {}, logits.data() + size_t(t) * size_t(V));
  }
  CHECK(dec.length(1) == T);
  CHECK(dec.length(0) == 0);
  double err = 0.0;
  for (int t = 0; t < T; ++t)
    err = std::max(err, rowError(logits.data() + size_t(t) * V, probs.data() + size_t(t) * V, V));
  INFO("max |log-softmax difference| " << err);
  CHECK(err <= kTol);
  // The test can fail: a KV cache that drops a position moves the logits far past the tolerance.
  Decoder wrong(m, 1);
  const int zero = 0;
  wrong.forward(&zero, seq.data(), 1, {}, logits.data());
  wrong.forward(&zero, &seq[2], 1, {}, logits.data());  // position 1 fed token 2
  CHECK(rowError(logits.data(), probs.data() + size_t(V), V) > 1e-3);
  // Past the context: refused.
  const int one = 1;
  CHECK_THROWS_WITH(dec.forward(&one, seq.data(), 1, {}, logits.data()),
                    Catch::Contains("past the model's context of 24"));
}

TEST_CASE("generate: every generated token's logits equal the full forward; greedy repeats",
          "[unit]") {
  const InferenceModel m = randomModel();
  GenerateOptions o;
  o.maxNewTokens = 12;
  o.sampling.temperature = 0.0f;
  o.keepLogits = true;
  const std::vector<std::vector<int32_t>> prompts = {randomTokens(5, m.vocab(), 1),
                                                     randomTokens(9, m.vocab(), 2)};
  const auto a = generate(m, prompts, o);
  const auto b = generate(m, prompts, o);
  REQUIRE(a.size() == 2);
  for (size_t p = 0; p < 2; ++p) {
    CHECK(a[p].tokens.size() == 12);
    CHECK(a[p].finish == "length");
    CHECK(a[p].tokens == b[p].tokens);
    CHECK(a[p].logits == b[p].logits);  // bitwise: same calls, same order
    const double err = generationError(m, prompts[p], a[p]);
    INFO("prompt " << p << ": max |log-softmax difference| " << err);
    CHECK(err <= kTol);
    for (size_t j = 0; j < a[p].tokens.size(); ++j)  // greedy = argmax of the recorded logits
      CHECK(a[p].tokens[j] == argmaxToken(a[p].logits.data() + j * size_t(m.vocab()), m.vocab()));
  }
}

TEST_CASE("generate: prompts batched with different lengths give each prompt's tokens alone",
          "[unit]") {
  const InferenceModel m = randomModel();
  GenerateOptions o;
  o.maxNewTokens = 10;
  o.sampling.temperature = 0.0f;
  o.keepLogits = true;
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {3, 11, 1, 7}) prompts.push_back(randomTokens(n, m.vocab(), uint64_t(n) + 40));
  const auto batched = generate(m, prompts, o);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto alone = generate(m, {prompts[p]}, o);
    INFO("prompt " << p << " (" << prompts[p].size() << " tokens)");
    CHECK(batched[p].tokens == alone[0].tokens);
    CHECK(generationError(m, prompts[p], batched[p]) <= kTol);
  }
  // A prompt near the context stops there: 20 + 4 = 24 positions, the 5th token has no position
  // to be fed at but is still chosen from position 23's logits.
  o.maxNewTokens = 10;
  const auto full = generate(m, {randomTokens(20, m.vocab(), 3)}, o);
  CHECK(full[0].finish == "context");
  CHECK(full[0].tokens.size() == 5);
}

TEST_CASE("generate: the same seed gives the same tokens, another seed others", "[unit]") {
  const InferenceModel m = randomModel();
  const std::vector<std::vector<int32_t>> prompts = {randomTokens(4, m.vocab(), 8),
                                                     randomTokens(6, m.vocab(), 9)};
  GenerateOptions o;
  o.maxNewTokens = 18;
  o.sampling = {1.5f, 0, 1.0f};
  o.seed = 11;
  const auto a = generate(m, prompts, o);
  const auto b = generate(m, prompts, o);
  o.seed = 12;
  const auto c = generate(m, prompts, o);
  for (size_t p = 0; p < 2; ++p) {
    CHECK(a[p].tokens == b[p].tokens);
    CHECK(a[p].tokens != c[p].tokens);
  }
  CHECK(a[0].tokens != a[1].tokens);
  // top_k 1 and a tiny top_p leave only the most likely token: sampling equals greedy.
  GenerateOptions greedy = o;
  greedy.sampling = {0.0f, 0, 1.0f};
  const auto g = generate(m, prompts, greedy);
  o.sampling = {1.5f, 1, 1.0f};
  CHECK(generate(m, prompts, o)[1].tokens == g[1].tokens);
  o.sampling = {1.5f, 0, 1e-6f};
  CHECK(generate(m, prompts, o)[1].tokens == g[1].tokens);
  // A vanishing temperature is greedy too.
  o.sampling = {1e-30f, 0, 1.0f};
  CHECK(generate(m, prompts, o)[0].tokens == g[0].tokens);
  // Stop tokens end a prompt and are kept as its last token.
  GenerateOptions s = greedy;
  s.stop = {g[0].tokens[3]};
  const auto stopped = generate(m, {prompts[0]}, s);
  const auto first = std::find(g[0].tokens.begin(), g[0].tokens.end(), g[0].tokens[3]);
  CHECK(stopped[0].finish == "stop");
  CHECK(stopped[0].tokens == std::vector<int32_t>(g[0].tokens.begin(), first + 1));
}

TEST_CASE("sampler: top-k and top-p keep the right candidates", "[unit]") {
  // logits for p = {0.5, 0.3, 0.15, 0.05}
  const float logits[4] = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto counts = [&](SamplingParams p) {
    Sampler s(p);
    SplitMix64 rng(1);
    std::vector<int> n(4, 0);
    for (int i = 0; i < 4000; ++i) ++n[size_t(s.next(logits, 4, rng))];
    return n;
  };
  auto k2 = counts({1.0f, 2, 1.0f});
  CHECK(k2[2] == 0);
  CHECK(k2[3] == 0);
  CHECK(k2[0] > k2[1]);
  auto p75 = counts({1.0f, 0, 0.75f});  // 0.5 + 0.3 reaches 0.75: ids 0 and 1
  CHECK(p75[2] == 0);
  CHECK(p75[1] > 0);
  auto p85 = counts({1.0f, 0, 0.85f});  // needs id 2 too
  CHECK(p85[2] > 0);
  CHECK(p85[3] == 0);
  auto all = counts({1.0f, 0, 1.0f});
  CHECK(all[3] > 0);
}

TEST_CASE("generate: bad sampling values, prompts and models are refused by name", "[unit]") {
  const InferenceModel m = randomModel();
  GenerateOptions o;
  auto gen = [&](std::vector<std::vector<int32_t>> prompts) { return generate(m, prompts, o); };
  CHECK_THROWS_WITH(gen({randomTokens(25, 50, 1)}),
                    Catch::Contains("--prompt_ids #1: 25 tokens, longer than the model's context "
                                    "of 24"));
  CHECK_THROWS_WITH(gen({{1, 2}, {3, 50}}),
                    Catch::Contains("--prompt_ids #2: token id 50 (position 1) outside the "
                                    "vocabulary [0, 50)"));
  CHECK_THROWS_WITH(gen({{1}, {}}), Catch::Contains("--prompt_ids #2: the prompt is empty"));
  CHECK_THROWS_WITH(gen({{-1}}), Catch::Contains("token id -1"));
  o.sampling.temperature = -0.5f;
  CHECK_THROWS_WITH(gen({{1}}), Catch::Contains("--temperature -0.5"));
  o.sampling = {1.0f, -1, 1.0f};
  CHECK_THROWS_WITH(gen({{1}}), Catch::Contains("--top_k -1"));
  o.sampling = {1.0f, 0, 0.0f};
  CHECK_THROWS_WITH(gen({{1}}), Catch::Contains("--top_p 0: expected a value in (0, 1]"));
  o.sampling = {1.0f, 0, 1.25f};
  CHECK_THROWS_WITH(gen({{1}}), Catch::Contains("--top_p 1.25"));
  CHECK_THROWS_AS(gen({{1}}), ds::ConfigError);
  CHECK_THROWS_WITH(loadInferenceModel("/nonexistent/ck", {}),
                    Catch::Contains("model '/nonexistent/ck' does not exist"));
}

TEST_CASE("generate: bf16 weights decode as their own one-shot forward and near fp32", "[unit]") {
  const InferenceModel m32 = randomModel(DType::kF32);
  const InferenceModel m16 = randomModel(DType::kBF16);
  CHECK(m16.weightBytes() * 2 == m32.weightBytes());
  const int V = m16.vocab(), T = 16;
  const auto seq = randomTokens(T, V, 21);
  std::vector<float> oneShot(size_t(T) * V), stepwise(size_t(T) * V), fp32(size_t(T) * V);
  Decoder a(m16, 1), b(m16, 1), c(m32, 1);
  const std::vector<int> slots(T, 0);
  a.forward(slots.data(), seq.data(), T, {}, oneShot.data());
  c.forward(slots.data(), seq.data(), T, {}, fp32.data());
  for (int t = 0; t < T; ++t)
    b.forward(slots.data(), &seq[size_t(t)], 1, {}, &stepwise[size_t(t) * V]);
  double selfErr = 0.0, vs32 = 0.0;
  for (size_t i = 0; i < oneShot.size(); ++i) {
    selfErr = std::max(selfErr, double(std::fabs(oneShot[i] - stepwise[i])));
    vs32 = std::max(vs32, double(std::fabs(oneShot[i] - fp32[i])));
  }
  INFO("bf16 one-shot vs stepwise " << selfErr << ", bf16 vs fp32 " << vs32);
  CHECK(selfErr <= 1e-4);
  CHECK(vs32 > 0.0);   // the weights really are rounded
  CHECK(vs32 <= 0.1);  // and still the same model
}

TEST_CASE("decoder: a 16-row fp32 decode step on gemv equals the gemm path", "[unit]") {
  // 16 rows: the fp32 gemv limit (DecoderOptions), each 4-row weight group reused by 4 row blocks.
  const InferenceModel m = randomModel(DType::kF32);
  const int V = m.vocab(), B = 16;
  Decoder fast(m, B), slow(m, B, DecoderOptions{0, 0});
  std::vector<int> slots(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) slots[size_t(i)] = i;
  std::vector<float> a(size_t(B) * V), b(size_t(B) * V);
  double err = 0.0;
  for (int s = 0; s < 3; ++s) {
    const auto toks = randomTokens(B, V, uint64_t(80 + s));
    fast.forward(slots.data(), toks.data(), B, {}, a.data());
    slow.forward(slots.data(), toks.data(), B, {}, b.data());
    for (size_t i = 0; i < a.size(); ++i) err = std::max(err, double(std::fabs(a[i] - b[i])));
  }
  INFO("max |logit difference| 16-row gemv vs sgemm " << err);
  CHECK(err <= kTol);
}

TEST_CASE("decoder: native bf16 decode on the dot-product gemv equals the bf16 gemm",
          "[unit][cpu_isa]") {
  // Both round the inputs to bf16 and sum exact bf16 products in fp32, in different orders.
  if (!bf16LinearNative() || !gemvBf16DotSupported())
    DS_SKIP("bf16 linears are not native here or the CPU lacks AVX512-BF16 (no dot-product gemv)");
  const InferenceModel m = randomModel(DType::kBF16);
  const int V = m.vocab(), B = 3;
  Decoder fast(m, B), slow(m, B, DecoderOptions{0, 0});
  std::vector<float> a(size_t(B) * V), b(size_t(B) * V);
  const std::vector<int> slots = {0, 1, 2};
  double err = 0.0;
  for (int s = 0; s < 4; ++s) {  // one row a call: the rows the dot-product gemv takes
    const auto toks = randomTokens(B, V, uint64_t(60 + s));
    for (int i = 0; i < B; ++i) {
      fast.forward(&slots[size_t(i)], &toks[size_t(i)], 1, {}, a.data());
      slow.forward(&slots[size_t(i)], &toks[size_t(i)], 1, {}, b.data());
      for (size_t k = 0; k < size_t(V); ++k) err = std::max(err, double(std::fabs(a[k] - b[k])));
    }
  }
  INFO("max |logit difference| dot gemv vs bf16 gemm " << err);
  CHECK(err <= kTol);
}

TEST_CASE("decoder: the gemv decode path equals the gemm path (fp32 and bf16 weights)", "[unit]") {
  // gemv (runtime/tensor/gemv.h) sums in another order than sgemm: logits agree to fp32 rounding.
  // bf16 is compared with the widen + sgemm path, which, like gemv, keeps the inputs fp32.
  setBf16LinearNative(false);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const InferenceModel m = randomModel(dt);
    const int V = m.vocab(), B = 3, steps = 5;
    Decoder fast(m, B), slow(m, B, DecoderOptions{0, 0});
    std::vector<float> a(size_t(B) * V), b(size_t(B) * V);
    const std::vector<int> slots = {0, 1, 2};
    double err = 0.0;
    for (int s = 0; s < steps; ++s) {
      const auto toks = randomTokens(B, V, uint64_t(40 + s));
      for (int n : {1, B}) {  // one sequence alone, then all three batched
        if (n == 1 && s > 0) continue;
        fast.forward(slots.data(), toks.data(), n, {}, a.data());
        slow.forward(slots.data(), toks.data(), n, {}, b.data());
        for (size_t i = 0; i < size_t(n) * V; ++i)
          err = std::max(err, double(std::fabs(a[i] - b[i])));
      }
    }
    INFO(dtypeName(dt) << ": max |logit difference| gemv vs gemm " << err);
    CHECK(err <= kTol);
  }
  setBf16LinearNative(true);
}
