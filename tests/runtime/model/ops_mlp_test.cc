// OpsMlpModel over CpuOps against MlpModel, and makeModel(cfg, ops). Bit-equal: forward values
// and the gradients of every layer but the first (same kernels, same order). The first layer's
// gradient is <= 1e-6 relative: MlpModel adds each row's dz into dW in row order, the Ops model
// gets it from a gemm over the one-hot matrix (the sum of a row's hits first, then the add).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/model/mlp.h"
#include "runtime/model/ops_gpt2.h"
#include "runtime/model/ops_mlp.h"
#include "runtime/model/ops_model.h"
#include "runtime/tensor/cpu/cpu_ops.h"
#include "tests/runtime/model/model_harness.h"

namespace rt = ds::runtime;
using rt::ModelConfig;

namespace {

ModelConfig mlp(bool ckpt) {
  ModelConfig c;
  c.kind = "mlp";
  c.sizes = {23, 17, 9, 23};
  c.activationCheckpointing = ckpt;
  return c;
}

struct Batch {
  int B, T;
  std::vector<int32_t> in, tg;
};

Batch makeBatch(int B, int T, int V, uint32_t seed) {
  Batch b{B, T, {}, {}};
  uint32_t s = seed;
  auto next = [&] { return (s = s * 1664525u + 1013904223u) >> 8; };
  for (int i = 0; i < B * T; ++i) {
    b.in.push_back(static_cast<int32_t>(next() % V));
    b.tg.push_back(i % 4 == 1 ? -1 : static_cast<int32_t>(next() % V));
  }
  return b;
}

void compare(const ModelConfig& refCfg, const ModelConfig& opsCfg) {
  rt::CpuOps ops;
  rt::MlpModel ref(refCfg);
  rt::OpsMlpModel model(opsCfg, ops);
  // The gated owner proves the Ops model reads parameters only inside their block's hooks.
  ds::test::ParamOwner pr(ref, false, false), po(model, false, true);
  ref.initParams(pr.flat.data(), 5);
  model.initParams(po.flat.data(), 5);
  pr.sync();
  po.sync();
  REQUIRE(pr.flat == po.flat);
  const int V = 23;
  for (const Batch& b : {makeBatch(4, 8, V, 1), makeBatch(3, 3, V, 2), makeBatch(5, 9, V, 3)}) {
    INFO("B=" << b.B << " T=" << b.T);
    const float lr = ref.forward(b.in.data(), b.tg.data(), b.B, b.T, pr.table, pr);
    const float lo = model.forward(b.in.data(), b.tg.data(), b.B, b.T, po.table, po);
    CHECK(lo == Approx(lr).epsilon(1e-6));
    ref.backward(3.f, pr.table, pr);
    model.backward(3.f, po.table, po);
    CHECK(po.events == pr.events);
    const size_t first = ref.params()[0].numel + ref.params()[1].numel;
    for (size_t i = 0; i < pr.grad.size(); ++i) {
      INFO("grad element " << i);
      if (i < first) {
        REQUIRE(po.grad[i] == Approx(pr.grad[i]).epsilon(1e-6).margin(1e-7));
      } else {
        REQUIRE(std::memcmp(&po.grad[i], &pr.grad[i], sizeof(float)) == 0);
      }
    }
  }
  CHECK(model.deviceBytes() > 0);
}

std::string configError(const ModelConfig& c, rt::Ops* ops) {
  try {
    if (ops != nullptr) rt::makeModel(c, *ops);
    else rt::makeModel(c);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("OpsMlpModel over CpuOps equals MlpModel", "[unit]") {
  SECTION("no checkpointing") { compare(mlp(false), mlp(false)); }
  SECTION("checkpointing") { compare(mlp(false), mlp(true)); }
}

TEST_CASE("OpsMlpModel errors are MlpModel's", "[unit]") {
  rt::CpuOps ops;
  rt::MlpModel ref(mlp(false));
  rt::OpsMlpModel model(mlp(false), ops);
  ds::test::ParamOwner pr(ref, false, false), po(model, false, false);
  CHECK_THROWS_WITH(model.backward(1.f, po.table, po), "mlp backward called without a forward");
  Batch bad = makeBatch(2, 3, 23, 7);
  bad.in[4] = 23;
  std::string want, got;
  try {
    ref.forward(bad.in.data(), bad.tg.data(), 2, 3, pr.table, pr);
  } catch (const ds::ConfigError& e) {
    want = e.what();
  }
  try {
    model.forward(bad.in.data(), bad.tg.data(), 2, 3, po.table, po);
  } catch (const ds::ConfigError& e) {
    got = e.what();
  }
  CHECK(!want.empty());
  CHECK(got == want);
}

TEST_CASE("makeModel(cfg, ops) builds the Ops models with makeModel(cfg)'s checks", "[unit]") {
  rt::CpuOps ops;
  auto m = rt::makeModel(mlp(false), ops);
  CHECK(dynamic_cast<rt::OpsMlpModel*>(m.get()) != nullptr);
  ModelConfig g;
  g.kind = "gpt2";
  g.nLayer = 1;
  g.nHead = 2;
  g.nEmbd = 8;
  g.seqLen = 4;
  g.vocabSize = 5;
  auto gm = rt::makeModel(g, ops);
  CHECK(dynamic_cast<rt::OpsGpt2Model*>(gm.get()) != nullptr);
  CHECK(gm->params().size() == rt::makeModel(g)->params().size());
  g.nHead = 3;
  CHECK(configError(g, &ops) == configError(g, nullptr));
  CHECK(configError(g, &ops) != "no error");
  ModelConfig k = g;
  k.kind = "rnn";
  CHECK(configError(k, &ops) == configError(k, nullptr));
}
