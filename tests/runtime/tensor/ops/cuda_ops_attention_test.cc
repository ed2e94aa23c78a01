// CudaOps' flash attention and softmax cross-entropy [gpu] against the host kernels of
// runtime/tensor (attention.h, cross_entropy.h) on fresh random inputs, outputs poisoned first.
// Error is ||got - ref|| / ||ref||: fp32 <= 1e-5, bf16 <= 1e-2 (host inputs rounded to bf16 so
// both sides see the same values). Backward starts from non-zero gradients to prove it adds.
// Skips without a CUDA device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ds/config.h"
#include "runtime/tensor/attention.h"
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"

#if DS_HAVE_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

namespace {

using ds::DType;
using ds::runtime::Ops;
using ds::runtime::OpsBuffer;

using ds::test::haveCudaDevice;

std::vector<float> randomVec(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Rounds in place to dt's precision (bf16, fp16; the values both sides then see exactly).
void roundFor(std::vector<float>& v, DType dt) {
  for (float& x : v) x = ds::test::roundTo(x, dt);
}

double tolerance(DType dt) { return dt == DType::kF32 ? 1e-5 : 1e-2; }

// A device buffer of n elements of dt holding host (or poison bytes when host is null).
OpsBuffer deviceBuffer(Ops& ops, size_t n, DType dt, const std::vector<float>* host,
                       const char* what) {
  OpsBuffer buf(ops, n * ds::dtypeSize(dt), what);
  if (host == nullptr) {
    std::vector<unsigned char> poison(buf.bytes(), 0xff);  // NaN in fp32, bf16 and fp16
    ops.upload(buf.get(), poison.data(), poison.size());
  } else if (dt == DType::kF32) {
    ops.upload(buf.get(), host->data(), buf.bytes());
  } else {
    const std::vector<uint16_t> h = ds::test::toWords16(*host, dt);
    ops.upload(buf.get(), h.data(), buf.bytes());
  }
  return buf;
}

std::vector<float> downloadAs(Ops& ops, const OpsBuffer& buf, size_t n, DType dt) {
  std::vector<float> out(n);
  if (dt == DType::kF32) {
    ops.download(out.data(), buf.get(), n * 4);
  } else {
    std::vector<uint16_t> h(n);
    ops.download(h.data(), buf.get(), n * 2);
    out = ds::test::fromWords16(h, dt);
  }
  return out;
}

using ds::test::relError;

std::string dtName(DType dt) { return std::string(ds::dtypeName(dt)); }

void checkAttention(Ops& ops, int B, int T, int NH, int hs, DType dt, uint32_t seed) {
  const int C = NH * hs;
  const size_t nqkv = size_t(B) * T * 3 * C, nout = size_t(B) * T * C;
  INFO("B=" << B << " T=" << T << " NH=" << NH << " hs=" << hs << " dt=" << dtName(dt));
  auto qkv = randomVec(nqkv, seed, -1.f, 1.f);
  auto dout = randomVec(nout, seed + 1, -1.f, 1.f);
  auto dqkv0 = randomVec(nqkv, seed + 2, -0.1f, 0.1f);
  roundFor(qkv, dt);
  roundFor(dout, dt);
  roundFor(dqkv0, dt);

  // Host reference.
  std::vector<float> outRef(nout), att(size_t(B) * NH * T * T), scratch(size_t(T) * T);
  ds::runtime::attentionForward(outRef.data(), att.data(), qkv.data(), B, T, C, NH);
  std::vector<float> dqkvRef = dqkv0;
  ds::runtime::attentionBackward(dqkvRef.data(), scratch.data(), dout.data(), qkv.data(),
                                 att.data(), B, T, C, NH);

  // Device.
  OpsBuffer dQkv = deviceBuffer(ops, nqkv, dt, &qkv, "qkv");
  OpsBuffer dOut = deviceBuffer(ops, nout, dt, nullptr, "out");
  OpsBuffer dAux(ops, ops.attentionAuxBytes(B, T, NH), "aux");
  REQUIRE(dAux.bytes() == sizeof(float) * size_t(B) * NH * T);
  std::vector<unsigned char> poison(dAux.bytes(), 0xff);
  ops.upload(dAux.get(), poison.data(), poison.size());
  ops.attentionForward(dOut.get(), dAux.get(), dQkv.get(), B, T, C, NH, dt);
  const auto out = downloadAs(ops, dOut, nout, dt);
  const double errOut = relError(out, outRef);
  INFO("forward rel error " << errOut);
  CHECK(errOut <= tolerance(dt));

  // The saved lse against ln(sum_j exp(score_j)) in double, spot rows.
  std::vector<float> lse(size_t(B) * NH * T);
  ops.download(lse.data(), dAux.get(), lse.size() * 4);
  const double scale = 1.0 / std::sqrt(double(hs));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t : {0, T / 2, T - 1}) {
        const float* q = qkv.data() + (size_t(b) * T + t) * 3 * C + h * hs;
        double mx = -1e300;
        std::vector<double> s(t + 1);
        for (int j = 0; j <= t; ++j) {
          const float* k = qkv.data() + (size_t(b) * T + j) * 3 * C + C + h * hs;
          double dot = 0;
          for (int d = 0; d < hs; ++d) dot += double(q[d]) * k[d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double x : s) sum += std::exp(x - mx);
        const double ref = mx + std::log(sum);
        INFO("lse b=" << b << " h=" << h << " t=" << t);
        CHECK(std::fabs(lse[(size_t(b) * NH + h) * T + t] - ref) <= 1e-4 * (1 + std::fabs(ref)));
      }

  OpsBuffer dDout = deviceBuffer(ops, nout, dt, &dout, "dout");
  OpsBuffer dDqkv = deviceBuffer(ops, nqkv, dt, &dqkv0, "dqkv");
  ops.attentionBackward(dDqkv.get(), dDout.get(), dQkv.get(), dOut.get(), dAux.get(), B, T, C, NH,
                        dt);
  const auto dqkv = downloadAs(ops, dDqkv, nqkv, dt);
  const char* part[3] = {"dq", "dk", "dv"};
  for (int p = 0; p < 3; ++p) {
    const double err = relError(dqkv, dqkvRef, [&](size_t i) { return int(i % (3 * C)) / C == p; });
    INFO(part[p] << " rel error " << err);
    CHECK(err <= tolerance(dt));
  }
}

}  // namespace

TEST_CASE("cuda attention forward/backward match the host kernels", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  uint32_t seed = 100;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int T : {1, 7, 64, 200}) {
      checkAttention(*ops, 2, T, 2, 64, dt, seed += 10);
      checkAttention(*ops, 2, T, 4, 64, dt, seed += 10);
    }
    checkAttention(*ops, 1, 100, 2, 32, dt, seed += 10);
    checkAttention(*ops, 3, 70, 4, 16, dt, seed += 10);  // the default plan's head size
    checkAttention(*ops, 1, 90, 2, 48, dt, seed += 10);
    checkAttention(*ops, 1, 130, 2, 128, dt, seed += 10);
  }
}

TEST_CASE("cuda attention at T=1024 matches the host kernels", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  checkAttention(*ops, 2, 1024, 4, 64, DType::kF32, 7);
  checkAttention(*ops, 2, 1024, 4, 64, DType::kBF16, 8);
  checkAttention(*ops, 2, 1024, 4, 64, DType::kF16, 9);
}

TEST_CASE("cuda attention refuses head sizes and dtypes it has no kernel for", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  OpsBuffer buf(*ops, 4 * 3 * 96 * 4, "buf");
  OpsBuffer aux(*ops, ops->attentionAuxBytes(1, 4, 2), "aux");
  // hs = 40 (not a multiple of 16) and 144 (over 128)
  CHECK_THROWS_AS(ops->attentionForward(buf.get(), aux.get(), buf.get(), 1, 4, 80, 2, DType::kF32),
                  ds::NotSupported);
  CHECK_THROWS_AS(ops->attentionBackward(buf.get(), buf.get(), buf.get(), buf.get(), aux.get(), 1,
                                         4, 80, 2, DType::kF32),
                  ds::NotSupported);
  CHECK_THROWS_AS(ops->attentionForward(buf.get(), aux.get(), buf.get(), 1, 2, 144, 1, DType::kF32),
                  ds::NotSupported);
  // integer storage
  CHECK_THROWS_AS(ops->attentionForward(buf.get(), aux.get(), buf.get(), 1, 4, 64, 1, DType::kI32),
                  ds::NotSupported);
}

namespace {

// Rows of stride ld >= V; the padding columns hold garbage the softmax must ignore.
void checkCrossEntropy(Ops& ops, int N, int V, int ld, DType dt, uint32_t seed) {
  INFO("N=" << N << " V=" << V << " ld=" << ld << " dt=" << dtName(dt));
  auto logits = randomVec(size_t(N) * V, seed, -4.f, 4.f);
  roundFor(logits, dt);
  std::vector<int32_t> targets(N);
  std::mt19937 rng(seed + 1);
  for (int n = 0; n < N; ++n) targets[n] = n % 3 == 1 ? -1 : int32_t(rng() % V);

  // Host reference: per-row losses and log-sum-exp in double, then the host kernels.
  std::vector<double> lossRef(N, 0.0), lseRef(N, 0.0);
  for (int n = 0; n < N; ++n) {
    const float* row = logits.data() + size_t(n) * V;
    double mx = row[0], sum = 0;
    for (int j = 1; j < V; ++j) mx = std::max(mx, double(row[j]));
    for (int j = 0; j < V; ++j) sum += std::exp(row[j] - mx);
    lseRef[n] = mx + std::log(sum);
    if (targets[n] >= 0) lossRef[n] = std::log(sum) - (row[targets[n]] - mx);
  }
  std::vector<float> probsRef = logits;
  int valid = 0;
  const double total =
      ds::runtime::softmaxCrossEntropyForward(probsRef.data(), targets.data(), N, V, &valid);
  const float scale = 1.f / float(valid);
  std::vector<float> dRef(probsRef.size());
  ds::runtime::softmaxCrossEntropyBackward(dRef.data(), probsRef.data(), targets.data(), N, V,
                                           scale);

  std::vector<float> padded(size_t(N) * ld, 30.f);
  for (int n = 0; n < N; ++n)
    std::copy_n(logits.begin() + size_t(n) * V, V, padded.begin() + size_t(n) * ld);
  OpsBuffer dLogits = deviceBuffer(ops, padded.size(), dt, &padded, "logits");
  OpsBuffer dTargets(ops, N * sizeof(int32_t), "targets");
  ops.upload(dTargets.get(), targets.data(), dTargets.bytes());
  OpsBuffer dLosses = deviceBuffer(ops, N, DType::kF32, nullptr, "losses");
  OpsBuffer dLse = deviceBuffer(ops, N, DType::kF32, nullptr, "lse");
  ops.crossEntropyForward(dLogits.get(), dLosses.as<float>(), dLse.as<float>(),
                          dTargets.as<int32_t>(), N, V, ld, dt);
  CHECK(downloadAs(ops, dLogits, padded.size(), dt) == padded);  // forward only reads
  std::vector<float> losses(N), lse(N);
  ops.download(losses.data(), dLosses.get(), N * 4);
  ops.download(lse.data(), dLse.get(), N * 4);

  double sum = 0;
  for (int n = 0; n < N; ++n) {
    INFO("row " << n << " target " << targets[n]);
    if (targets[n] < 0) CHECK(losses[n] == 0.f);
    else CHECK(std::fabs(losses[n] - lossRef[n]) <= 1e-5 * (1 + lossRef[n]));
    CHECK(std::fabs(lse[n] - lseRef[n]) <= 1e-5 * (1 + std::fabs(lseRef[n])));
    sum += losses[n];
  }
  CHECK(std::fabs(sum - total) <= 1e-5 * (1 + std::fabs(total)));

  ops.crossEntropyBackward(dLogits.get(), dLse.as<float>(), dTargets.as<int32_t>(), N, V, ld, scale,
                           dt);
  const auto dPadded = downloadAs(ops, dLogits, padded.size(), dt);
  std::vector<float> d(size_t(N) * V);
  bool padZero = true;
  for (int n = 0; n < N; ++n) {
    std::copy_n(dPadded.begin() + size_t(n) * ld, V, d.begin() + size_t(n) * V);
    for (int j = V; j < ld; ++j) padZero = padZero && dPadded[size_t(n) * ld + j] == 0.f;
  }
  CHECK(padZero);
  const double errD = relError(d, dRef);
  INFO("dlogits rel error " << errD);
  CHECK(errD <= tolerance(dt));
  for (int n = 0; n < N; ++n) {
    if (targets[n] >= 0) continue;
    bool allZero = true;
    for (int j = 0; j < V; ++j) allZero = allZero && d[size_t(n) * V + j] == 0.f;
    INFO("ignored row " << n);
    CHECK(allZero);
  }
}

}  // namespace

TEST_CASE("cuda cross-entropy matches the host kernels, GPT-2 and small vocabularies", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    checkCrossEntropy(*ops, 8, 50257, 50304, dt, 11);  // GPT-2's padded rows: 128-bit packs
    checkCrossEntropy(*ops, 8, 50257, 50257, dt, 14);  // odd stride: element by element
    checkCrossEntropy(*ops, 13, 37, 40, dt, 12);       // a partial last pack
    checkCrossEntropy(*ops, 5, 3, 3, dt, 13);
  }
}

// A padded vocabulary (row stride ld > V, llm.c's Vp): the padding columns take no part in the
// softmax, whatever they hold, and backward zeroes them; the first V columns equal the unpadded
// run's bit for bit (same kernel, same pack width, same reduction order: V and ld both whole
// packs).
TEST_CASE("cuda cross-entropy over a padded row stride ignores and zeroes the padding", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  const int N = 6, V = 1000, ld = 1024;
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> plain(size_t(N) * V), padded(size_t(N) * ld, 50.f);  // garbage padding
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < V; ++j) plain[size_t(n) * V + j] = padded[size_t(n) * ld + j] = nd(rng);
  std::vector<int32_t> targets = {3, -1, 999, 0, 500, 42};
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    OpsBuffer a = deviceBuffer(*ops, plain.size(), dt, &plain, "plain");
    OpsBuffer b = deviceBuffer(*ops, padded.size(), dt, &padded, "padded");
    OpsBuffer t(*ops, N * sizeof(int32_t), "targets");
    ops->upload(t.get(), targets.data(), t.bytes());
    OpsBuffer la(*ops, N * 4, "la"), lb(*ops, N * 4, "lb");
    OpsBuffer sa(*ops, N * 4, "lse a"), sb(*ops, N * 4, "lse b");
    ops->crossEntropyForward(a.get(), la.as<float>(), sa.as<float>(), t.as<int32_t>(), N, V, V, dt);
    ops->crossEntropyForward(b.get(), lb.as<float>(), sb.as<float>(), t.as<int32_t>(), N, V, ld,
                             dt);
    std::vector<float> lossA(N), lossB(N);
    ops->download(lossA.data(), la.get(), N * 4);
    ops->download(lossB.data(), lb.get(), N * 4);
    CHECK(lossA == lossB);
    ops->crossEntropyBackward(a.get(), sa.as<float>(), t.as<int32_t>(), N, V, V, 0.5f, dt);
    ops->crossEntropyBackward(b.get(), sb.as<float>(), t.as<int32_t>(), N, V, ld, 0.5f, dt);
    const auto da = downloadAs(*ops, a, plain.size(), dt);
    const auto db = downloadAs(*ops, b, padded.size(), dt);
    bool same = true, padZero = true;
    for (int n = 0; n < N; ++n) {
      for (int j = 0; j < V; ++j) same = same && da[size_t(n) * V + j] == db[size_t(n) * ld + j];
      for (int j = V; j < ld; ++j) padZero = padZero && db[size_t(n) * ld + j] == 0.f;
    }
    CHECK(same);
    CHECK(padZero);
  }
}
