// llm.c gpt2_*.bin loading: a tiny checkpoint written here in llm.c's layout (256 int32 header,
// then the 16 tensors, each stacked over layers) must land in the right ParamInfo tensors; bad
// files are refused naming the file and the problem. Also makeModel's config errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/model/model.h"
#include "tests/support/spawn_ranks.h"

using Catch::Matchers::Contains;
using ds::runtime::ModelConfig;

namespace {

constexpr int maxT = 6, V = 10, L = 2, NH = 2, C = 4, Vp = 16;

// llm.c's tensor sizes in file order (train_gpt2.c fill_in_parameter_sizes), written out here
// independently of Gpt2Model.
std::vector<size_t> llmcSizes() {
  return {size_t(Vp) * C,
          size_t(maxT) * C,
          size_t(L) * C,
          size_t(L) * C,
          size_t(L) * 3 * C * C,
          size_t(L) * 3 * C,
          size_t(L) * C * C,
          size_t(L) * C,
          size_t(L) * C,
          size_t(L) * C,
          size_t(L) * 4 * C * C,
          size_t(L) * 4 * C,
          size_t(L) * C * 4 * C,
          size_t(L) * C,
          size_t(C),
          size_t(C)};
}

std::string writeLlmc(const std::string& path, int magic, int version, size_t dropBytes = 0,
                      int headerC = C) {
  int32_t h[256] = {};
  h[0] = magic;
  h[1] = version;
  h[2] = maxT;
  h[3] = V;
  h[4] = L;
  h[5] = NH;
  h[6] = headerC;
  h[7] = Vp;
  size_t n = 0;
  for (size_t s : llmcSizes()) n += s;
  std::string bytes(reinterpret_cast<const char*>(h), sizeof(h));
  for (size_t i = 0; i < n; ++i) {
    float v = static_cast<float>(i);  // value = position in the llm.c payload
    if (version == 5) {
      ds::bf16 b = ds::floatToBf16(v);
      bytes.append(reinterpret_cast<const char*>(&b), 2);
    } else {
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  bytes.resize(bytes.size() - dropBytes);
  ds::test::writeFile(path, bytes);
  return path;
}

}  // namespace

TEST_CASE("llm.c checkpoint loads into the right tensors (fp32 and bf16)", "[unit]") {
  ds::test::TempDir dir;
  for (int version : {3, 5}) {
    std::string path =
        writeLlmc(dir.file("gpt2_v" + std::to_string(version) + ".bin"), 20240326, version);
    ModelConfig cfg;
    std::vector<float> flat;
    ds::runtime::loadLlmcCheckpoint(path, cfg, flat);
    REQUIRE(cfg.kind == "gpt2");
    REQUIRE(cfg.seqLen == maxT);
    REQUIRE(cfg.vocabSize == V);
    REQUIRE(cfg.nLayer == L);
    REQUIRE(cfg.nHead == NH);
    REQUIRE(cfg.nEmbd == C);
    REQUIRE(cfg.paddedVocab == Vp);
    auto model = ds::runtime::makeModel(cfg);
    REQUIRE(flat.size() == model->numParamsTotal());
    // Walk llm.c's layout: tensor k of layer l starts at base(k) + l * perLayer(k).
    std::vector<size_t> sizes = llmcSizes(), base(sizes.size());
    for (size_t k = 1; k < sizes.size(); ++k) base[k] = base[k - 1] + sizes[k - 1];
    const char* kinds[12] = {"ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                             "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw",  "fcprojb"};
    size_t off = 0;
    int checked = 0;
    for (const auto& p : model->params()) {
      size_t expect = 0;
      if (p.name == "wte") expect = base[0];
      else if (p.name == "wpe") expect = base[1];
      else if (p.name == "lnfw") expect = base[14];
      else if (p.name == "lnfb") expect = base[15];
      else {
        for (int k = 0; k < 12; ++k) {
          for (int l = 0; l < L; ++l) {
            if (p.name == "h." + std::to_string(l) + "." + kinds[k]) {
              expect = base[2 + k] + l * (sizes[2 + k] / L);
              REQUIRE(p.numel == sizes[2 + k] / L);
            }
          }
        }
      }
      INFO(p.name << " version " << version);
      // First and last element of the tensor carry their llm.c payload positions (bf16 holds
      // integers exactly up to 256; beyond that compare with bf16 rounding).
      float first = flat[off], last = flat[off + p.numel - 1];
      REQUIRE(first == ds::bf16ToFloat(ds::floatToBf16(float(expect))) +
                           (version == 3
                                ? float(expect) - ds::bf16ToFloat(ds::floatToBf16(float(expect)))
                                : 0.0f));
      float lastWant = float(expect + p.numel - 1);
      if (version == 5) lastWant = ds::bf16ToFloat(ds::floatToBf16(lastWant));
      REQUIRE(last == lastWant);
      off += p.numel;
      ++checked;
    }
    REQUIRE(checked == 16 + 10 * (L - 1) + 2 * (L - 1));
  }
}

TEST_CASE("llm.c checkpoint: bad magic, version, size and header are refused naming the file",
          "[unit]") {
  ds::test::TempDir dir;
  ModelConfig cfg;
  std::vector<float> flat;
  auto expectError = [&](const std::string& path, const std::string& what) {
    try {
      ds::runtime::loadLlmcCheckpoint(path, cfg, flat);
      FAIL("no error for " << path);
    } catch (const ds::ConfigError& e) {
      REQUIRE_THAT(e.what(), Contains(path) && Contains(what));
    }
  };
  expectError(writeLlmc(dir.file("magic.bin"), 20240520, 3),
              "bad magic 20240520 (expected 20240326)");
  expectError(writeLlmc(dir.file("ver.bin"), 20240326, 4), "version 4 unsupported");
  expectError(writeLlmc(dir.file("short.bin"), 20240326, 3, 8), "truncated");
  expectError(writeLlmc(dir.file("shape.bin"), 20240326, 3, 0, 5), "n_embd (5) % model.n_head (2)");
  ds::test::writeFile(dir.file("tiny.bin"), "abc");
  expectError(dir.file("tiny.bin"), "shorter than the 1024-byte header");
  expectError(dir.file("missing.bin"), "cannot open");
}

TEST_CASE("makeModel refuses bad shapes naming the key", "[unit]") {
  auto expectError = [](ModelConfig c, const std::string& what) {
    try {
      ds::runtime::makeModel(c);
      FAIL("no error");
    } catch (const ds::ConfigError& e) {
      REQUIRE_THAT(e.what(), Contains(what));
    }
  };
  ModelConfig g;
  g.kind = "gpt2";
  g.nLayer = 2;
  g.nHead = 3;
  g.nEmbd = 10;
  g.seqLen = 8;
  g.vocabSize = 5;
  expectError(g, "model.n_embd (10) % model.n_head (3) != 0");
  g.nHead = 2;
  g.nLayer = 0;
  expectError(g, "model.n_layer must be >= 1 (got 0)");
  g.nLayer = 1;
  g.paddedVocab = 3;
  expectError(g, "padded_vocab_size (3) < model.vocab_size (5)");
  ModelConfig m;
  m.kind = "mlp";
  m.sizes = {4};
  expectError(m, "model.sizes needs at least 2 entries");
  m.sizes = {4, 0, 2};
  expectError(m, "model.sizes[1] must be >= 1 (got 0)");
  m.kind = "rnn";
  expectError(m, "model.kind 'rnn' unknown");
}

TEST_CASE("forward refuses out-of-range tokens and over-long sequences", "[unit]") {
  ModelConfig g;
  g.kind = "gpt2";
  g.nLayer = 1;
  g.nHead = 1;
  g.nEmbd = 4;
  g.seqLen = 3;
  g.vocabSize = 5;
  auto m = ds::runtime::makeModel(g);
  std::vector<float> flat(m->numParamsTotal()), grad(flat.size());
  m->initParams(flat.data(), 1);
  ds::zero::ParamTable t;
  size_t off = 0;
  for (const auto& p : m->params()) {
    t.value.push_back(flat.data() + off);
    t.value16.push_back(nullptr);
    t.grad.push_back(grad.data() + off);
    off += p.numel;
  }
  struct : ds::zero::BlockHooks {
    void beforeForward(int) override {}
    void afterForward(int) override {}
    void beforeBackward(int) override {}
    void afterBackward(int) override {}
  } hooks;
  std::vector<int32_t> in = {0, 5, 1}, tg = {1, 2, 3};
  REQUIRE_THROWS_WITH(m->forward(in.data(), tg.data(), 1, 3, t, hooks),
                      Contains("token id 5 at [b=0, t=1] outside the vocabulary [0, 5)"));
  in[1] = 1;
  REQUIRE_THROWS_WITH(m->forward(in.data(), tg.data(), 1, 4, t, hooks),
                      Contains("1 <= T <= seq_len (3)"));
  REQUIRE_THROWS_WITH(m->backward(1.0f, t, hooks), Contains("without a forward"));
}
