// CpuOps against the host kernels it wraps: every op's output (and accumulated gradients) equal
// bit for bit to the kernel's on the same inputs, except the cross-entropy per-row losses, which
// are the kernel's double row losses rounded to fp32 (their sum matches the kernel's to ~1e-7),
// and the fused matmulGelu* calls, equal bit for bit to the separate kernels composed.
// Also: bf16 is refused naming the op, memory ops, and adam/sgd equal zero::adamStep/sgdStep.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor/attention.h"
#include "runtime/tensor/bf16_convert.h"
#include "runtime/tensor/cpu/cpu_ops.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "tests/runtime/tensor/grad_check.h"
#include "zero/cpu_adam.h"

namespace rt = ds::runtime;
using ds::DType;
using ds::test::uniformVec;
using Vec = std::vector<float>;

namespace {

constexpr DType kF32 = DType::kF32;

bool sameBits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Vec plus(Vec v, float x) {
  for (float& e : v) e += x;
  return v;
}

}  // namespace

TEST_CASE("CpuOps memory: aligned alloc, upload/download/copy/zero are byte copies", "[unit]") {
  auto ops = rt::makeCpuOps();
  CHECK(ops->name() == "cpu");
  CHECK_FALSE(ops->onDevice());
  rt::OpsBuffer a(*ops, 100, "a"), b(*ops, 100, "b");
  REQUIRE(reinterpret_cast<uintptr_t>(a.get()) % 64 == 0);
  std::vector<unsigned char> host(100), back(100);
  for (int i = 0; i < 100; ++i) host[i] = static_cast<unsigned char>(i * 7 + 1);
  ops->upload(a.get(), host.data(), 100);
  ops->copy(b.get(), a.get(), 100);
  ops->download(back.data(), b.get(), 100);
  CHECK(back == host);
  ops->zero(b.get(), 100);
  ops->download(back.data(), b.get(), 100);
  CHECK(back == std::vector<unsigned char>(100, 0));
  ops->synchronize();
  CHECK(ops->alloc(0, "nothing") == nullptr);
}

TEST_CASE("CpuOps encoder, layernorm, matmul equal the host kernels", "[unit]") {
  rt::CpuOps ops;
  const int B = 2, T = 5, C = 12, V = 9, N = B * T, OC = 7;
  const std::vector<int32_t> tok = {1, 8, 0, 3, 3, 7, 2, 5, 6, 4};
  Vec wte = uniformVec(V * C, 1.f, 1), wpe = uniformVec(T * C, 1.f, 2);
  Vec dout = uniformVec(N * C, 1.f, 3), inp = uniformVec(N * C, 1.f, 4);

  Vec o1(N * C), o2(N * C);
  rt::encoderForward(o1.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
  ops.encoderForward(o2.data(), tok.data(), wte.data(), wpe.data(), B, T, C, kF32);
  CHECK(sameBits(o1, o2));
  Vec dwte1(V * C, .25f), dwpe1(T * C, .25f), dwte2 = dwte1, dwpe2 = dwpe1;
  rt::encoderBackward(dwte1.data(), dwpe1.data(), dout.data(), tok.data(), B, T, C);
  ops.encoderBackward(dwte2.data(), dwpe2.data(), dout.data(), tok.data(), B, T, C, kF32);
  CHECK(sameBits(dwte1, dwte2));
  CHECK(sameBits(dwpe1, dwpe2));

  Vec w = plus(uniformVec(C, .1f, 5), 1.f), bias = uniformVec(C, .1f, 6);
  Vec m1(N), r1(N), m2(N), r2(N);
  rt::layernormForward(o1.data(), m1.data(), r1.data(), inp.data(), w.data(), bias.data(), N, C);
  ops.layernormForward(o2.data(), m2.data(), r2.data(), inp.data(), w.data(), bias.data(), N, C,
                       kF32);
  CHECK((sameBits(o1, o2) && sameBits(m1, m2) && sameBits(r1, r2)));
  Vec di1(N * C, .5f), dw1(C, .5f), db1(C, .5f), di2 = di1, dw2 = dw1, db2 = db1;
  rt::layernormBackward(di1.data(), dw1.data(), db1.data(), dout.data(), inp.data(), w.data(),
                        m1.data(), r1.data(), N, C);
  ops.layernormBackward(di2.data(), dw2.data(), db2.data(), dout.data(), inp.data(), w.data(),
                        m2.data(), r2.data(), N, C, kF32);
  CHECK((sameBits(di1, di2) && sameBits(dw1, dw2) && sameBits(db1, db2)));

  Vec mw = uniformVec(OC * C, 1.f, 7), mb = uniformVec(OC, 1.f, 8),
      mdo = uniformVec(N * OC, 1.f, 9);
  Vec y1(N * OC), y2(N * OC);
  rt::matmulForward(y1.data(), inp.data(), mw.data(), mb.data(), N, C, OC);
  ops.matmulForward(y2.data(), inp.data(), mw.data(), mb.data(), N, C, OC, kF32);
  CHECK(sameBits(y1, y2));
  rt::matmulForward(y1.data(), inp.data(), mw.data(), nullptr, N, C, OC);
  ops.matmulForward(y2.data(), inp.data(), mw.data(), nullptr, N, C, OC, kF32);
  CHECK(sameBits(y1, y2));
  Vec mdi1(N * C, .5f), mdw1(OC * C, .5f), mdb1(OC, .5f), mdi2 = mdi1, mdw2 = mdw1, mdb2 = mdb1;
  rt::matmulBackward(mdi1.data(), mdw1.data(), mdb1.data(), mdo.data(), inp.data(), mw.data(), N, C,
                     OC);
  ops.matmulBackward(mdi2.data(), mdw2.data(), mdb2.data(), mdo.data(), inp.data(), mw.data(), N, C,
                     OC, kF32);
  CHECK((sameBits(mdi1, mdi2) && sameBits(mdw1, mdw2) && sameBits(mdb1, mdb2)));
  // Null dinp and dbias are allowed.
  rt::matmulBackward(nullptr, mdw1.data(), nullptr, mdo.data(), inp.data(), mw.data(), N, C, OC);
  ops.matmulBackward(nullptr, mdw2.data(), nullptr, mdo.data(), inp.data(), mw.data(), N, C, OC,
                     kF32);
  CHECK(sameBits(mdw1, mdw2));
}

TEST_CASE("CpuOps attention equals the host kernel, across growing T", "[unit]") {
  rt::CpuOps ops;
  const int B = 2, C = 16, NH = 4;
  for (int T : {3, 9, 5}) {  // the scratch grows, then is reused at a smaller T
    INFO("T = " << T);
    CHECK(ops.attentionAuxBytes(B, T, NH) == size_t(B) * NH * T * T * sizeof(float));
    Vec qkv = uniformVec(B * T * 3 * C, 1.f, 10 + T), dout = uniformVec(B * T * C, 1.f, 20 + T);
    Vec o1(B * T * C), o2(B * T * C), a1(B * NH * T * T), a2(B * NH * T * T);
    rt::attentionForward(o1.data(), a1.data(), qkv.data(), B, T, C, NH);
    ops.attentionForward(o2.data(), a2.data(), qkv.data(), B, T, C, NH, kF32);
    CHECK((sameBits(o1, o2) && sameBits(a1, a2)));
    Vec d1(B * T * 3 * C, .5f), d2 = d1, tt(T * T);
    rt::attentionBackward(d1.data(), tt.data(), dout.data(), qkv.data(), a1.data(), B, T, C, NH);
    ops.attentionBackward(d2.data(), dout.data(), qkv.data(), o2.data(), a2.data(), B, T, C, NH,
                          kF32);
    CHECK(sameBits(d1, d2));
  }
}

TEST_CASE("CpuOps gelu and residual equal the host kernels", "[unit]") {
  rt::CpuOps ops;
  const size_t n = 77;
  Vec x = uniformVec(n, 3.f, 30), y = uniformVec(n, 1.f, 31), dout = uniformVec(n, 1.f, 32);
  Vec o1(n), o2(n);
  rt::geluForward(o1.data(), x.data(), n);
  ops.geluForward(o2.data(), x.data(), n, kF32);
  CHECK(sameBits(o1, o2));
  Vec d1(n, .5f), d2 = d1;
  rt::geluBackward(d1.data(), x.data(), dout.data(), n);
  ops.geluBackward(d2.data(), x.data(), dout.data(), n, kF32);
  CHECK(sameBits(d1, d2));
  rt::residualForward(o1.data(), x.data(), y.data(), n);
  ops.residualForward(o2.data(), x.data(), y.data(), n, kF32);
  CHECK(sameBits(o1, o2));
  Vec da1(n, .5f), db1(n, -.5f), da2 = da1, db2 = db1;
  rt::residualBackward(da1.data(), db1.data(), dout.data(), n);
  ops.residualBackward(da2.data(), db2.data(), dout.data(), n, kF32);
  CHECK((sameBits(da1, da2) && sameBits(db1, db2)));
}

TEST_CASE("CpuOps cross-entropy: logits kept, kernel losses and lse, kernel dlogits", "[unit]") {
  rt::CpuOps ops;
  const int N = 7, V = 13;
  const std::vector<int32_t> tg = {3, -1, 0, 12, 5, -1, 7};
  Vec logits = uniformVec(N * V, 4.f, 40);
  Vec p1 = logits, x = logits, losses(N, -1.f), lse(N, -1.f);
  int valid = 0;
  const double total = rt::softmaxCrossEntropyForward(p1.data(), tg.data(), N, V, &valid);
  ops.crossEntropyForward(x.data(), losses.data(), lse.data(), tg.data(), N, V, V, kF32);
  CHECK(sameBits(x, logits));  // forward only reads
  double sum = 0.0;
  for (int n = 0; n < N; ++n) {
    // lse is log sum exp of the row, whatever the target.
    double s = 0.0;
    for (int j = 0; j < V; ++j) s += std::exp(double(logits[n * V + j]));
    CHECK(lse[n] == Approx(std::log(s)).epsilon(1e-6));
    if (tg[n] < 0) {
      CHECK(losses[n] == 0.f);
    } else {
      // Each row is -log p[target] (the kernel computes it via log-sum-exp in double).
      CHECK(losses[n] == Approx(-std::log(p1[n * V + tg[n]])).epsilon(1e-5));
      CHECK(losses[n] == Approx(lse[n] - logits[n * V + tg[n]]).epsilon(1e-5));
    }
    sum += losses[n];
  }
  CHECK(valid == 5);
  CHECK(sum == Approx(total).epsilon(1e-6));
  CHECK(ops.sum(losses.data(), N) == sum);

  Vec d1(N * V);
  rt::softmaxCrossEntropyBackward(d1.data(), p1.data(), tg.data(), N, V, 0.37f);
  ops.crossEntropyBackward(x.data(), lse.data(), tg.data(), N, V, V, 0.37f, kF32);  // in place
  CHECK(sameBits(d1, x));
}

TEST_CASE("CpuOps cross-entropy over a padded stride ignores and zeroes the padding", "[unit]") {
  rt::CpuOps ops;
  const int N = 4, V = 5, ld = 8;
  const std::vector<int32_t> tg = {4, -1, 0, 2};
  Vec plain = uniformVec(N * V, 3.f, 41), padded(N * ld, 50.f);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < V; ++j) padded[n * ld + j] = plain[n * V + j];
  Vec la(N), lb(N), sa(N), sb(N);
  ops.crossEntropyForward(plain.data(), la.data(), sa.data(), tg.data(), N, V, V, kF32);
  ops.crossEntropyForward(padded.data(), lb.data(), sb.data(), tg.data(), N, V, ld, kF32);
  CHECK((sameBits(la, lb) && sameBits(sa, sb)));
  ops.crossEntropyBackward(plain.data(), sa.data(), tg.data(), N, V, V, 0.5f, kF32);
  ops.crossEntropyBackward(padded.data(), sb.data(), tg.data(), N, V, ld, 0.5f, kF32);
  for (int n = 0; n < N; ++n) {
    for (int j = 0; j < V; ++j) CHECK(padded[n * ld + j] == plain[n * V + j]);
    for (int j = V; j < ld; ++j) CHECK(padded[n * ld + j] == 0.f);
  }
}

// matmulGelu* are the separate ops composed (forward: the product without bias, then
// biasGeluForward): the same bits, dpre written whatever it held.
TEST_CASE("CpuOps matmulGeluForward/Backward equal matmul + gelu", "[unit]") {
  rt::CpuOps ops;
  const int N = 6, C = 5, OC = 9;
  Vec inp = uniformVec(N * C, 1.f, 60), w = uniformVec(OC * C, 1.f, 61),
      b = uniformVec(OC, 1.f, 62);
  Vec pre1(N * OC), out1(N * OC), pre2(N * OC, 7.f), out2(N * OC, 7.f);
  rt::matmulForward(pre1.data(), inp.data(), w.data(), nullptr, N, C, OC);
  rt::biasGeluForward(out1.data(), pre1.data(), b.data(), N, OC);
  ops.matmulGeluForward(out2.data(), pre2.data(), inp.data(), w.data(), b.data(), N, C, OC, kF32);
  CHECK((sameBits(pre1, pre2) && sameBits(out1, out2)));

  // The next layer: act = out1 [N, OC] is its input, dout [N, C2] its output gradient.
  const int C2 = 4;
  Vec w2 = uniformVec(C2 * OC, 1.f, 63), dout = uniformVec(N * C2, 1.f, 64);
  Vec dact(N * OC, 0.f), dpre1(N * OC, 0.f), dw1(C2 * OC, .5f), db1(C2, .5f);
  Vec dpre2(N * OC, 9.f), dw2 = dw1, db2 = db1;
  rt::matmulBackward(dact.data(), dw1.data(), db1.data(), dout.data(), out1.data(), w2.data(), N,
                     OC, C2);
  rt::geluBackward(dpre1.data(), pre1.data(), dact.data(), dact.size());
  ops.matmulGeluBackward(dpre2.data(), dw2.data(), db2.data(), dout.data(), out1.data(),
                         pre1.data(), w2.data(), N, OC, C2, kF32);
  CHECK((sameBits(dpre1, dpre2) && sameBits(dw1, dw2) && sameBits(db1, db2)));
}

TEST_CASE("CpuOps residualLayernormForward equals residual + layernorm", "[unit]") {
  rt::CpuOps ops;
  const int N = 5, C = 11;
  Vec a = uniformVec(N * C, 1.f, 65), b = uniformVec(N * C, 1.f, 66);
  Vec w = plus(uniformVec(C, .1f, 67), 1.f), bias = uniformVec(C, .1f, 68);
  Vec r1(N * C), o1(N * C), m1(N), s1(N), r2(N * C, 3.f), o2(N * C, 3.f), m2(N), s2(N);
  rt::residualForward(r1.data(), a.data(), b.data(), r1.size());
  rt::layernormForward(o1.data(), m1.data(), s1.data(), r1.data(), w.data(), bias.data(), N, C);
  ops.residualLayernormForward(r2.data(), o2.data(), m2.data(), s2.data(), a.data(), b.data(),
                               w.data(), bias.data(), N, C, kF32);
  CHECK((sameBits(r1, r2) && sameBits(o1, o2) && sameBits(m1, m2) && sameBits(s1, s2)));
}

TEST_CASE("CpuOps reductions, scale and bf16 conversion", "[unit]") {
  rt::CpuOps ops;
  Vec x = uniformVec(1001, 2.f, 50);
  double s = 0, s2 = 0;
  for (float v : x) {
    s += v;
    s2 += double(v) * v;
  }
  CHECK(ops.sum(x.data(), x.size()) == s);
  CHECK(ops.sumSquares(x.data(), x.size()) == s2);
  Vec nan = {1.f, NAN, 2.f};
  CHECK(std::isnan(ops.sumSquares(nan.data(), 3)));
  Vec y = x;
  ops.scale(y.data(), y.size(), 0.3f);
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(y[i] == x[i] * 0.3f);
  std::vector<ds::bf16> h1(x.size()), h2(x.size());
  rt::f32ToBf16(h1.data(), x.data(), x.size());
  ops.toBf16(h2.data(), x.data(), x.size());
  CHECK(std::memcmp(h1.data(), h2.data(), h1.size() * 2) == 0);
}

TEST_CASE("CpuOps adam and sgd equal zero::adamStep / sgdStep per range, decay per range",
          "[unit]") {
  rt::CpuOps ops;
  const size_t n = 70000;  // more than one cpu_adam chunk
  const std::vector<rt::DecayRange> ranges = {{0, 40000, true}, {40000, 29000, false}};
  Vec p0 = uniformVec(n, 1.f, 60), g = uniformVec(n, 1.f, 61);
  Vec m0 = uniformVec(n, .01f, 62), v0 = plus(uniformVec(n, .001f, 63), .001f);
  for (bool adamw : {true, false}) {
    INFO("adamw = " << adamw);
    rt::AdamStep st;
    st.lr = 3e-3f;
    st.weightDecay = 0.1f;
    st.adamw = adamw;
    st.step = 4;
    st.gradScale = 0.5f;
    Vec p1 = p0, m1 = m0, v1 = v0, p2 = p0, m2 = m0, v2 = v0;
    std::vector<uint16_t> h1(n, 0), h2(n, 0);
    const ds::zero::Isa isa = ds::zero::bestIsa();
    for (const rt::DecayRange& r : ranges) {
      ds::zero::AdamConfig c;
      c.lr = st.lr;
      c.weightDecay = r.decay ? st.weightDecay : 0.f;
      c.adamwMode = adamw;
      ds::zero::adamStep(isa, c, st.step, st.gradScale, p1.data() + r.offset, g.data() + r.offset,
                         m1.data() + r.offset, v1.data() + r.offset, r.size,
                         {DType::kBF16, h1.data() + r.offset});
    }
    ops.adam(p2.data(), m2.data(), v2.data(), g.data(), reinterpret_cast<ds::bf16*>(h2.data()),
             ranges.data(), 2, st);
    CHECK((sameBits(p1, p2) && sameBits(m1, m2) && sameBits(v1, v2)));
    CHECK(h1 == h2);
    CHECK(p2[n - 1] == p0[n - 1]);  // outside every range: untouched
  }
  rt::SgdStep sg;
  sg.lr = 0.1f;
  sg.momentum = 0.9f;
  sg.weightDecay = 0.01f;
  sg.gradScale = 2.f;
  Vec p1 = p0, b1 = m0, p2 = p0, b2 = m0;
  for (const rt::DecayRange& r : ranges) {
    ds::zero::SgdConfig c;
    c.lr = sg.lr;
    c.momentum = sg.momentum;
    c.weightDecay = r.decay ? sg.weightDecay : 0.f;
    ds::zero::sgdStep(ds::zero::bestIsa(), c, sg.gradScale, p1.data() + r.offset,
                      g.data() + r.offset, b1.data() + r.offset, r.size);
  }
  ops.sgd(p2.data(), b2.data(), g.data(), nullptr, ranges.data(), 2, sg);
  CHECK((sameBits(p1, p2) && sameBits(b1, b2)));
}

TEST_CASE("CpuOps refuses bf16, naming the op", "[unit]") {
  rt::CpuOps ops;
  const DType b = DType::kBF16;
  float buf[64] = {};
  int32_t tok[4] = {};
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"encoderForward", [&] { ops.encoderForward(buf, tok, buf, buf, 1, 1, 1, b); }},
      {"layernormForward", [&] { ops.layernormForward(buf, buf, buf, buf, buf, buf, 1, 1, b); }},
      {"matmulForward", [&] { ops.matmulForward(buf, buf, buf, buf, 1, 1, 1, b); }},
      {"matmulBackward", [&] { ops.matmulBackward(buf, buf, buf, buf, buf, buf, 1, 1, 1, b); }},
      {"attentionForward", [&] { ops.attentionForward(buf, buf, buf, 1, 1, 1, 1, b); }},
      {"geluForward", [&] { ops.geluForward(buf, buf, 1, b); }},
      {"residualBackward", [&] { ops.residualBackward(buf, buf, buf, 1, b); }},
      {"residualLayernormForward",
       [&] { ops.residualLayernormForward(buf, buf, buf, buf, buf, buf, buf, buf, 1, 1, b); }},
      {"matmulGeluForward", [&] { ops.matmulGeluForward(buf, buf, buf, buf, buf, 1, 1, 1, b); }},
      {"matmulGeluBackward",
       [&] { ops.matmulGeluBackward(buf, buf, buf, buf, buf, buf, buf, 1, 1, 1, b); }},
      {"crossEntropyForward", [&] { ops.crossEntropyForward(buf, buf, buf, tok, 1, 1, 1, b); }},
      {"crossEntropyBackward", [&] { ops.crossEntropyBackward(buf, buf, tok, 1, 1, 1, 1.f, b); }},
  };
  for (const auto& [op, call] : calls) {
    INFO(op);
    try {
      call();
      FAIL("no exception");
    } catch (const ds::NotSupported& e) {
      const std::string msg = e.what();
      CHECK(msg.find(op) != std::string::npos);
      CHECK(msg.find("bf16") != std::string::npos);
      CHECK(msg.find("cpu ops run fp32; bf16 on the CPU goes through Gpt2Model") !=
            std::string::npos);
    }
  }
}
