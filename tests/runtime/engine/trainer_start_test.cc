// How a run starts: from an llm.c gpt2_*.bin (model.gpt.init_from; a mismatched header is
// refused naming file and field; a resume ignores it) and from its own checkpoints (a checkpoint
// of another model/data configuration is refused naming both plan hashes and the fields, while
// what may change on a resume - batch layout, steps, optimizer, precision - is accepted).
#include <catch2/catch.hpp>

#include <cstdio>

#include "core/error.h"
#include "runtime/engine/trainer.h"
#include "tests/runtime/engine/engine_fixtures.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::TempDir;

namespace {

// llm.c's gpt2_*.bin (fp32, version 3): 256 int32 header, then the params in llm.c's order.
void writeLlmc(const std::string& path, const ModelConfig& m, const std::vector<float>& flat) {
  int32_t h[256] = {};
  h[0] = 20240326;
  h[1] = 3;
  h[2] = m.seqLen;
  h[3] = m.vocabSize;
  h[4] = m.nLayer;
  h[5] = m.nHead;
  h[6] = m.nEmbd;
  h[7] = m.paddedVocab ? m.paddedVocab : m.vocabSize;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(std::fwrite(h, 4, 256, f) == 256);
  REQUIRE(std::fwrite(flat.data(), 4, flat.size(), f) == flat.size());
  REQUIRE(std::fclose(f) == 0);
}

std::vector<float> weightsFor(const ModelConfig& m, uint64_t seed) {
  auto model = makeModel(m);
  std::vector<float> flat(model->numParamsTotal());
  model->initParams(flat.data(), seed);
  return flat;
}

TrainerOptions quiet(const std::string& resume = "") {
  TrainerOptions o;
  o.out = nullptr;
  o.resume = resume;
  return o;
}

}  // namespace

TEST_CASE("trainer: model.gpt.init_from starts a fresh run from an llm.c checkpoint", "[unit]") {
  TempDir dir;
  Plan p = test::gptPlan(1, 0, 1, 6);
  const std::vector<float> file = weightsFor(p.model, 4242);  // not the plan's seed
  writeLlmc(dir.file("gpt2_tiny.bin"), p.model, file);
  std::vector<double> fresh;
  {
    Trainer t(p, nullptr, quiet());
    CHECK(t.fullParams() != file);
    fresh.push_back(t.trainStep().loss);
  }
  p.initFrom = dir.file("gpt2_tiny.bin");
  p.train.checkpointDir = dir.file("ckpt");
  Trainer t(p, nullptr, quiet());
  CHECK(t.fullParams() == file);  // bitwise: fp32 payload copied in
  const auto& s = t.run();
  REQUIRE(s.steps.size() == 6);
  CHECK(s.steps.front().loss != fresh.front());  // other weights, same first batch
  CHECK(s.steps.back().loss < s.steps.front().loss);

  // A resume takes the checkpoint's weights and never reads init_from.
  Plan r = p;
  r.initFrom = dir.file("missing.bin");
  r.train.steps = 7;
  Trainer resumed(r, nullptr, quiet("latest"));
  CHECK(resumed.step() == 6);
}

// llm.c (train_gpt2.c) runs a model of maxT positions on T <= maxT tokens, reading wpe's first T
// rows; init_from does the same: every tensor as in the file, wpe cut to seq_len rows.
TEST_CASE("trainer: init_from takes the first seq_len positions of a file with a larger maxT",
          "[unit]") {
  TempDir dir;
  Plan p = test::gptPlan(1, 0, 1, 2);  // seq_len 16
  ModelConfig wide = p.model;
  wide.seqLen = 40;
  const std::vector<float> file = weightsFor(wide, 99);
  writeLlmc(dir.file("gpt2_wide.bin"), wide, file);
  std::vector<float> want;  // the file with wpe's rows 16..39 removed
  const size_t wteN = size_t(wide.vocabSize) * size_t(wide.nEmbd);
  const size_t keep = size_t(p.model.seqLen) * size_t(p.model.nEmbd);
  const size_t wpeN = size_t(wide.seqLen) * size_t(wide.nEmbd);
  want.insert(want.end(), file.begin(), file.begin() + long(wteN + keep));
  want.insert(want.end(), file.begin() + long(wteN + wpeN), file.end());
  p.initFrom = dir.file("gpt2_wide.bin");
  Trainer t(p, nullptr, quiet());
  const auto got = t.fullParams();
  REQUIRE(got.size() == want.size());
  CHECK(got == want);
  CHECK(t.trainStep().loss > 0);
}

TEST_CASE("trainer: an llm.c checkpoint of another shape is refused naming file and field",
          "[unit]") {
  TempDir dir;
  Plan p = test::gptPlan(1, 0, 1, 2);
  struct Case {
    const char* what;
    void (*change)(ModelConfig&);
    const char* message;
  };
  const Case cases[] = {
      {"layers", [](ModelConfig& m) { m.nLayer = 3; },
       "header has L = 3 but the plan's model.gpt.n_layer = 2"},
      {"width", [](ModelConfig& m) { m.nEmbd = 48; },
       "header has C = 48 but the plan's model.gpt.n_embd = 32"},
      {"padded", [](ModelConfig& m) { m.paddedVocab = 64; },
       "header has Vp = 64 but the plan's model.gpt.padded_vocab_size = 32"},
      {"context", [](ModelConfig& m) { m.seqLen = 8; },
       "header has maxT = 8 but the plan's model.gpt.seq_len = 16; set the model block to the "
       "file's shape (seq_len may be smaller than maxT)"},
  };
  for (const auto& c : cases) {
    ModelConfig other = p.model;
    c.change(other);
    const std::string path = dir.file(std::string("gpt2_") + c.what + ".bin");
    writeLlmc(path, other, weightsFor(other, 1));
    Plan q = p;
    q.initFrom = path;
    INFO(c.what);
    CHECK_THROWS_AS(Trainer(q, nullptr, quiet()), ConfigError);
    CHECK_THROWS_WITH(Trainer(q, nullptr, quiet()),
                      Catch::Contains(c.message) && Catch::Contains("model.gpt.init_from " + path));
  }
  Plan q = p;
  q.initFrom = dir.file("absent.bin");
  CHECK_THROWS_WITH(Trainer(q, nullptr, quiet()), Catch::Contains("absent.bin: cannot open"));
}

TEST_CASE("trainer: a resume with another model or data configuration is refused", "[unit]") {
  TempDir dir;
  Plan p = test::mlpPlan(1, 0, 2, 4);
  p.train.checkpointDir = dir.path();
  {
    Trainer t(p, nullptr, quiet());
    t.run();
  }
  struct Case {
    const char* field;
    void (*change)(Plan&);
    const char* diff;
  };
  const Case cases[] = {
      {"data seed", [](Plan& q) { q.data.syntheticSeed = 8; },
       "data.synthetic.seed: checkpoint 7, plan 8"},
      {"corpus", [](Plan& q) { q.data.syntheticTokens = 1 << 13; },
       "data.synthetic.tokens: checkpoint 16384, plan 8192"},
      {"order seed", [](Plan& q) { q.train.seed = 12; }, "train.seed: checkpoint 11, plan 12"},
      {"context", [](Plan& q) { q.model.seqLen = 4; }, "model.mlp.seq_len: checkpoint 8, plan 4"},
  };
  for (const auto& c : cases) {
    Plan q = p;
    c.change(q);
    q.train.steps = 6;
    INFO(c.field);
    try {
      Trainer t(q, nullptr, quiet("latest"));
      FAIL("resume accepted");
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("written for plan hash ") != std::string::npos);
      CHECK(m.find("but this plan hashes to ") != std::string::npos);
      CHECK(m.find(c.diff) != std::string::npos);
      CHECK(m.find("Resume with the plan that wrote it") != std::string::npos);
    }
  }
  // What may change on a resume: steps, cadence, batch layout, optimizer, clipping, precision,
  // the validation data.
  Plan q = p;
  q.train.steps = 6;
  q.train.checkpointEvery = 1;
  q.deepspeed.gradientAccumulationSteps = 1;
  q.deepspeed.microBatchPerGpu = 16;
  q.deepspeed.optimizer.lr = 5e-3f;
  q.deepspeed.gradientClipping = 0.5;
  q.deepspeed.bf16 = true;
  q.data.syntheticValTokens = 1 << 10;
  Trainer t(q, nullptr, quiet("latest"));
  CHECK(t.step() == 4);
  CHECK(t.run().steps.size() == 2);
}
