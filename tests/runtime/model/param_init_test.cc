// The per-range initialiser (Model::initParamRange, what partitioned construction fills a rank's
// shard with) against the whole-model one (initParams): the same bits on random sub-ranges,
// ranges that cross parameter boundaries and GPT-2's padded vocabulary rows, and on any thread
// count (the generator is counter-based).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/model/model.h"
#include "runtime/model/param_init.h"

using ds::runtime::ModelConfig;

namespace {

ModelConfig gpt() {
  ModelConfig c;
  c.kind = "gpt2";
  c.nLayer = 3;
  c.nHead = 2;
  c.nEmbd = 16;
  c.seqLen = 12;
  c.vocabSize = 37;
  c.paddedVocab = 48;  // rows 37..47 of wte stay zero
  return c;
}

ModelConfig mlp() {
  ModelConfig c;
  c.kind = "mlp";
  c.sizes = {23, 40, 17, 23};
  return c;
}

bool sameBits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("initParamRange equals initParams on random sub-ranges (GPT-2, MLP)", "[unit]") {
  for (const ModelConfig& cfg : {gpt(), mlp()}) {
    auto model = ds::runtime::makeModel(cfg);
    const size_t n = model->numParamsTotal();
    for (uint64_t seed : {uint64_t(0), uint64_t(1234)}) {
      std::vector<float> full(n);
      model->initParams(full.data(), seed);
      std::vector<float> all(n);
      model->initParamRange(all.data(), 0, n, seed);
      INFO(cfg.kind << " seed " << seed);
      CHECK(sameBits(all.data(), full.data(), n));
      std::mt19937_64 rng(seed + 99);
      for (int trial = 0; trial < 300; ++trial) {
        const size_t a = rng() % (n + 1), b = rng() % (n + 1);
        const size_t lo = std::min(a, b), count = std::max(a, b) - lo;
        std::vector<float> part(count + 1, -7.f);  // one guard element past the range
        model->initParamRange(part.data(), lo, count, seed);
        INFO("range [" << lo << ", " << lo + count << ")");
        REQUIRE(sameBits(part.data(), full.data() + lo, count));
        REQUIRE(part[count] == -7.f);
      }
    }
  }
}

TEST_CASE("initParamRange: each parameter's pieces (any split) rebuild it bitwise", "[unit]") {
  auto model = ds::runtime::makeModel(gpt());
  const size_t n = model->numParamsTotal();
  std::vector<float> full(n), pieces(n);
  model->initParams(full.data(), 5);
  // A stage-3-like split: every parameter in `world` chunks, filled chunk by chunk.
  for (size_t world : {size_t(2), size_t(3), size_t(7)}) {
    std::fill(pieces.begin(), pieces.end(), 0.f);
    size_t off = 0;
    for (const auto& p : model->params()) {
      const size_t chunk = (p.numel + world - 1) / world;
      for (size_t r = 0; r < world; ++r) {
        const size_t lo = std::min(p.numel, r * chunk), hi = std::min(p.numel, lo + chunk);
        model->initParamRange(pieces.data() + off + lo, off + lo, hi - lo, 5);
      }
      off += p.numel;
    }
    INFO("world " << world);
    CHECK(sameBits(pieces.data(), full.data(), n));
  }
  // The padded vocabulary rows are zero in a range that covers only them.
  const size_t live = size_t(gpt().vocabSize) * gpt().nEmbd;
  const size_t pad = size_t(gpt().paddedVocab - gpt().vocabSize) * gpt().nEmbd;
  std::vector<float> tail(pad, 1.f);
  model->initParamRange(tail.data(), live, pad, 5);
  for (float v : tail) REQUIRE(v == 0.f);
}

TEST_CASE("fillNormalAt continues fillNormal's stream at any element", "[unit]") {
  std::vector<float> whole(1000);
  ds::runtime::fillNormal(whole.data(), whole.size(), 0.5f, 42, 3);
  for (size_t first : {size_t(0), size_t(1), size_t(511), size_t(999)}) {
    std::vector<float> part(whole.size() - first);
    ds::runtime::fillNormalAt(part.data(), first, part.size(), 0.5f, 42, 3);
    CHECK(sameBits(part.data(), whole.data() + first, part.size()));
  }
}

TEST_CASE("initParamRange past the model's parameters is an internal error", "[unit]") {
  auto model = ds::runtime::makeModel(mlp());
  std::vector<float> out(8);
  CHECK_THROWS_WITH(model->initParamRange(out.data(), model->numParamsTotal() - 2, 4, 1),
                    Catch::Contains("past the model's"));
}
