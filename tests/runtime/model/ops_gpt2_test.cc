// OpsGpt2Model over CpuOps against Gpt2Model on small configs. Gradients: bit-equal, because
// the same host kernels run in the same order on the same inputs (the Ops model recomputes a
// layer exactly as Gpt2Model does, and its in-place dlogits equal Gpt2Model's separate buffer).
// Loss: <= 1e-6 relative, not bit-equal: CpuOps rounds each row's double loss to fp32 before the
// sum, where the kernel sums the doubles. Also: hook order, errors, buffer growth, bf16 refusal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/model/gpt2.h"
#include "runtime/model/model.h"
#include "runtime/model/ops_gpt2.h"
#include "runtime/tensor/cpu/cpu_ops.h"
#include "tests/runtime/model/model_harness.h"

namespace rt = ds::runtime;
using rt::ModelConfig;

namespace {

ModelConfig smallGpt(bool ckpt, int paddedVocab = 0) {
  ModelConfig c;
  c.kind = "gpt2";
  c.nLayer = 2;
  c.nEmbd = 32;
  c.nHead = 4;
  c.vocabSize = 67;
  c.paddedVocab = paddedVocab;
  c.seqLen = 16;
  c.activationCheckpointing = ckpt;
  return c;
}

// Flat host values and grads behind a ParamTable (every pointer always set).
struct Params {
  std::vector<float> flat, grad;
  ds::zero::ParamTable table;
  explicit Params(const rt::Model& m) {
    flat.resize(m.numParamsTotal());
    grad.assign(flat.size(), 0.f);
    m.initParams(flat.data(), 1234);
    size_t off = 0;
    for (const auto& info : m.params()) {
      table.value.push_back(flat.data() + off);
      table.value16.push_back(nullptr);
      table.grad.push_back(grad.data() + off);
      off += info.numel;
    }
  }
};

// Records the hook order; does nothing else.
struct Hooks : ds::zero::BlockHooks {
  std::vector<std::string> events;
  void beforeForward(int b) override { events.push_back("F+" + std::to_string(b)); }
  void afterForward(int b) override { events.push_back("F-" + std::to_string(b)); }
  void beforeBackward(int b) override { events.push_back("B+" + std::to_string(b)); }
  void afterBackward(int b) override { events.push_back("B-" + std::to_string(b)); }
};

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
    b.tg.push_back(i % 5 == 3 ? -1 : static_cast<int32_t>(next() % V));
  }
  return b;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Largest |a - b| / max|b| (0 when both are all zeros).
double relMax(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - double(b[i])));
    den = std::max(den, std::abs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

// Runs both models over the batches (grads accumulate across steps) and compares every step:
// bit for bit, or (gradTolerance > 0) within that relative tolerance per tensor.
void compareSteps(const ModelConfig& refCfg, const ModelConfig& opsCfg,
                  const std::vector<Batch>& batches, double gradTolerance = 0) {
  rt::CpuOps ops;
  rt::Gpt2Model ref(refCfg);
  rt::OpsGpt2Model model(opsCfg, ops);
  REQUIRE(model.numParamsTotal() == ref.numParamsTotal());
  Params pr(ref), po(model);
  REQUIRE(sameBits(pr.flat, po.flat));  // same initParams
  for (size_t step = 0; step < batches.size(); ++step) {
    const Batch& b = batches[step];
    INFO("step " << step << " B=" << b.B << " T=" << b.T);
    Hooks hr, ho;
    const float lr = ref.forward(b.in.data(), b.tg.data(), b.B, b.T, pr.table, hr);
    const float lo = model.forward(b.in.data(), b.tg.data(), b.B, b.T, po.table, ho);
    CHECK(lo == Approx(lr).epsilon(1e-6));
    ref.backward(2.f, pr.table, hr);
    model.backward(2.f, po.table, ho);
    CHECK(ho.events == hr.events);
    size_t off = 0;
    for (const auto& info : ref.params()) {
      INFO("gradient of " << info.name);
      std::vector<float> gr(pr.grad.begin() + off, pr.grad.begin() + off + info.numel);
      std::vector<float> go(po.grad.begin() + off, po.grad.begin() + off + info.numel);
      if (gradTolerance > 0) CHECK(relMax(go, gr) <= gradTolerance);
      else CHECK(sameBits(gr, go));
      off += info.numel;
    }
    CHECK(model.deviceBytes() == model.activationBytes() + model.workspaceBytes());
  }
}

std::string errorOf(rt::Model& m, const Batch& b, ds::zero::ParamTable& t) {
  Hooks h;
  try {
    m.forward(b.in.data(), b.tg.data(), b.B, b.T, t, h);
  } catch (const ds::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("OpsGpt2Model over CpuOps equals Gpt2Model: loss and every gradient", "[unit]") {
  const int V = 67;
  // Different B*T each step: 48, then 14 (shrinks: buffers reused), then 55 (grows again).
  const std::vector<Batch> steps = {makeBatch(3, 16, V, 1), makeBatch(2, 7, V, 2),
                                    makeBatch(5, 11, V, 3)};
  SECTION("no checkpointing") { compareSteps(smallGpt(false), smallGpt(false), steps); }
  SECTION("checkpointing against Gpt2Model without") {
    compareSteps(smallGpt(false), smallGpt(true), steps);
  }
  SECTION("checkpointing against Gpt2Model with") {
    compareSteps(smallGpt(true), smallGpt(true), steps);
  }
  SECTION("padded vocabulary, odd B and T") {
    // The op model's head spans the padded rows (an aligned product on the GPU), Gpt2Model's only
    // V: sgemm's blocking differs with the width, so equal to rounding, not to the bit.
    compareSteps(smallGpt(false, 72), smallGpt(false, 72),
                 {makeBatch(1, 13, V, 4), makeBatch(3, 5, V, 5)}, 1e-5);
  }
}

TEST_CASE("OpsGpt2Model reads parameters only inside their blocks' hooks", "[unit]") {
  rt::CpuOps ops;
  rt::Gpt2Model ref(smallGpt(true));
  rt::OpsGpt2Model model(smallGpt(true), ops);
  ds::test::ParamOwner gated(model, false, true), open(ref, false, false);
  model.initParams(gated.flat.data(), 7);
  ref.initParams(open.flat.data(), 7);
  gated.sync();
  open.sync();
  const Batch b = makeBatch(2, 9, 67, 9);
  const float lo = model.forward(b.in.data(), b.tg.data(), b.B, b.T, gated.table, gated);
  const float lr = ref.forward(b.in.data(), b.tg.data(), b.B, b.T, open.table, open);
  CHECK(lo == Approx(lr).epsilon(1e-6));
  model.backward(1.f, gated.table, gated);
  ref.backward(1.f, open.table, open);
  CHECK(sameBits(gated.grad, open.grad));
}

TEST_CASE("OpsGpt2Model errors are Gpt2Model's", "[unit]") {
  rt::CpuOps ops;
  rt::Gpt2Model ref(smallGpt(false));
  rt::OpsGpt2Model model(smallGpt(false), ops);
  Params pr(ref), po(model);
  Hooks h;
  CHECK_THROWS_WITH(model.backward(1.f, po.table, h), "gpt2 backward called without a forward");
  Batch badToken = makeBatch(2, 4, 67, 11);
  badToken.in[5] = 67;
  Batch negToken = makeBatch(2, 4, 67, 12);
  negToken.in[0] = -3;
  Batch badTarget = makeBatch(2, 4, 67, 13);
  badTarget.tg[6] = 90;
  Batch tooLong = makeBatch(1, 17, 67, 14);
  for (const Batch* b : {&badToken, &negToken, &badTarget, &tooLong}) {
    const std::string want = errorOf(ref, *b, pr.table);
    CHECK(want != "no error");
    CHECK(errorOf(model, *b, po.table) == want);
  }
  // A missing gradient pointer names the parameter, as ParamAccess does.
  const Batch ok = makeBatch(2, 4, 67, 15);
  model.forward(ok.in.data(), ok.tg.data(), ok.B, ok.T, po.table, h);
  po.table.grad[3] = nullptr;
  CHECK_THROWS_WITH(model.backward(1.f, po.table, h),
                    Catch::Contains("'h.1.ln1w' has no gradient buffer"));
}

TEST_CASE("OpsGpt2Model buffers grow only when a step needs more", "[unit]") {
  rt::CpuOps ops;
  rt::OpsGpt2Model model(smallGpt(false), ops);
  Params po(model);
  Hooks h;
  CHECK(model.deviceBytes() == 0);
  const Batch big = makeBatch(3, 16, 67, 21), small = makeBatch(2, 5, 67, 22);
  model.forward(big.in.data(), big.tg.data(), big.B, big.T, po.table, h);
  const size_t act = model.activationBytes(), work = model.workspaceBytes();
  CHECK(act > 0);
  CHECK(work > 0);
  model.forward(small.in.data(), small.tg.data(), small.B, small.T, po.table, h);
  CHECK(model.activationBytes() == act);
  CHECK(model.workspaceBytes() == work);
  // Checkpointing holds one layer's internals instead of L.
  rt::OpsGpt2Model ckpt(smallGpt(true), ops);
  ckpt.forward(big.in.data(), big.tg.data(), big.B, big.T, po.table, h);
  CHECK(ckpt.activationBytes() < act);
  CHECK(ckpt.workspaceBytes() == work);
}

TEST_CASE("OpsGpt2Model in bf16 over CpuOps is refused by the op", "[unit]") {
  rt::CpuOps ops;
  ModelConfig c = smallGpt(false);
  c.compute = ds::DType::kBF16;
  rt::OpsGpt2Model model(c, ops);
  ds::test::ParamOwner owner(model, true, false);
  const Batch b = makeBatch(1, 4, 67, 31);
  CHECK_THROWS_WITH(model.forward(b.in.data(), b.tg.data(), b.B, b.T, owner.table, owner),
                    Catch::Contains("encoderForward") &&
                        Catch::Contains("bf16 on the CPU goes through Gpt2Model"));
}
