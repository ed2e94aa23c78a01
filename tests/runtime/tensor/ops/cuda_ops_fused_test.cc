// CudaOps' fused and vectorised paths [gpu] against the host kernels: matmulGeluForward /
// matmulGeluBackward with the cuBLASLt GELU epilogues (DS_CUDA_GELU_FUSION=auto) and with the
// separate kernels (off), at aligned and odd shapes (an odd width takes the fallback), and the
// 128-bit GELU / residual kernels at unaligned pointers and sizes below one pack, and the
// vectorised LayerNorm forward alone and fused with the residual (residualLayernormForward). Error
// is
// ||got - ref|| / ||ref||: fp32 <= 1e-5 (2e-4 where cuBLASLt's own GELU runs), bf16 and fp16 <=
// 1e-2. Outputs poisoned first; skips without a CUDA device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"

namespace {

using ds::DType;
using ds::runtime::Ops;
using ds::runtime::OpsBuffer;
using ds::test::haveCudaDevice;
using ds::test::relError;

const DType kTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

std::vector<float> randomVec(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// What the device holds of v in dt (bf16, fp16: rounded).
std::vector<float> asSeen(std::vector<float> v, DType dt) {
  for (float& x : v) x = ds::test::roundTo(x, dt);
  return v;
}

// A buffer of `offset` + v.size() elements; v starts `offset` elements in (host null: poison).
struct Dev {
  OpsBuffer buf;
  size_t offset = 0, n = 0;
  DType dt = DType::kF32;
  void* at() const { return static_cast<char*>(buf.get()) + offset * ds::dtypeSize(dt); }
  float* f32() const { return buf.as<float>() + offset; }
};

Dev upload(Ops& ops, const std::vector<float>* v, size_t n, DType dt, size_t offset = 0) {
  Dev d{OpsBuffer(ops, (offset + n) * ds::dtypeSize(dt), "test"), offset, n, dt};
  std::vector<unsigned char> poison(d.buf.bytes(), 0xff);  // NaN in fp32, bf16 and fp16
  ops.upload(d.buf.get(), poison.data(), poison.size());
  if (v == nullptr) return d;
  if (dt == DType::kF32) {
    ops.upload(d.at(), v->data(), n * 4);
  } else {
    const std::vector<uint16_t> h = ds::test::toWords16(*v, dt);
    ops.upload(d.at(), h.data(), n * 2);
  }
  return d;
}

std::vector<float> download(Ops& ops, const Dev& d) {
  std::vector<float> out(d.n);
  if (d.dt == DType::kF32) {
    ops.download(out.data(), d.at(), d.n * 4);
  } else {
    std::vector<uint16_t> h(d.n);
    ops.download(h.data(), d.at(), d.n * 2);
    out = ds::test::fromWords16(h, d.dt);
  }
  return out;
}

// Sets DS_CUDA_GELU_FUSION for a scope, restoring the previous value after.
class FusionEnv {
 public:
  explicit FusionEnv(const char* value) {
    if (const char* prev = std::getenv("DS_CUDA_GELU_FUSION")) prev_ = prev, had_ = true;
    ::setenv("DS_CUDA_GELU_FUSION", value, 1);
  }
  ~FusionEnv() {
    if (had_) ::setenv("DS_CUDA_GELU_FUSION", prev_.c_str(), 1);
    else ::unsetenv("DS_CUDA_GELU_FUSION");
  }

 private:
  std::string prev_;
  bool had_ = false;
};

// GELU with erf, to tell which GELU cuBLASLt's epilogue computes.
std::vector<float> geluErf(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = float(0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0))));
  return y;
}

// fc (N x C -> OC) with GELU, then fcproj (OC -> C2) backward through the GELU.
void checkMatmulGelu(Ops& ops, DType dt, int N, int C, int OC, int C2, bool fused) {
  INFO("N=" << N << " C=" << C << " OC=" << OC << " C2=" << C2 << " " << ds::dtypeName(dt)
            << (fused ? " fusion auto" : " fusion off"));
  const double tol = dt != DType::kF32 ? 1e-2 : (fused ? 2e-4 : 1e-5);
  auto inp = asSeen(randomVec(size_t(N) * C, 1), dt);
  auto w = asSeen(randomVec(size_t(OC) * C, 2), dt);
  auto b = asSeen(randomVec(OC, 3), dt);
  auto w2 = asSeen(randomVec(size_t(C2) * OC, 4), dt);
  auto dout = asSeen(randomVec(size_t(N) * C2, 5), dt);
  auto dw0 = randomVec(size_t(C2) * OC, 6), db0 = randomVec(C2, 7);

  Dev dInp = upload(ops, &inp, inp.size(), dt), dW = upload(ops, &w, w.size(), dt);
  Dev dB = upload(ops, &b, b.size(), dt), dW2 = upload(ops, &w2, w2.size(), dt);
  Dev dDout = upload(ops, &dout, dout.size(), dt);
  for (bool withBias : {true, false}) {
    INFO("bias " << withBias);
    Dev out = upload(ops, nullptr, size_t(N) * OC, dt),
        pre = upload(ops, nullptr, size_t(N) * OC, dt);
    ops.matmulGeluForward(out.at(), pre.at(), dInp.at(), dW.at(), withBias ? dB.at() : nullptr, N,
                          C, OC, dt);
    std::vector<float> preRef(size_t(N) * OC), outRef(preRef.size());
    ds::runtime::matmulForward(preRef.data(), inp.data(), w.data(), withBias ? b.data() : nullptr,
                               N, C, OC);
    ds::runtime::geluForward(outRef.data(), preRef.data(), preRef.size());
    const auto gotPre = download(ops, pre), gotOut = download(ops, out);
    const double ePre = relError(gotPre, preRef), eOut = relError(gotOut, outRef);
    INFO("forward relative errors: pre " << ePre << " out " << eOut);
    CHECK(ePre <= tol);
    CHECK(eOut <= tol);
    if (dt == DType::kF32) {
      // Closer to the tanh GELU (GPT-2's) than to the erf one.
      const double eErf = relError(gotOut, geluErf(preRef));
      INFO("against erf GELU " << eErf);
      CHECK(eOut < eErf);
    }
    if (!withBias) continue;

    // Backward from the device's own pre and out (what the model keeps).
    const auto preSeen = gotPre, act = gotOut;
    Dev dpre = upload(ops, nullptr, preSeen.size(), dt);  // poisoned: must be written
    Dev gW = upload(ops, &dw0, dw0.size(), DType::kF32),
        gB = upload(ops, &db0, db0.size(), DType::kF32);
    ops.matmulGeluBackward(dpre.at(), gW.f32(), gB.f32(), dDout.at(), out.at(), pre.at(), dW2.at(),
                           N, OC, C2, dt);
    std::vector<float> dact(preSeen.size(), 0.f), dpreRef(preSeen.size(), 0.f);
    auto rW = dw0, rB = db0;
    ds::runtime::matmulBackward(dact.data(), rW.data(), rB.data(), dout.data(), act.data(),
                                w2.data(), N, OC, C2);
    ds::runtime::geluBackward(dpreRef.data(), preSeen.data(), dact.data(), dact.size());
    const double eD = relError(download(ops, dpre), dpreRef);
    const double eW = relError(download(ops, gW), rW), eB = relError(download(ops, gB), rB);
    INFO("backward relative errors: dpre " << eD << " dweight " << eW << " dbias " << eB);
    CHECK(eD <= tol);
    CHECK(eW <= (dt != DType::kF32 ? 1e-2 : 1e-5));
    CHECK(eB <= (dt != DType::kF32 ? 1e-2 : 1e-5));
  }
}

}  // namespace

TEST_CASE("cuda matmulGelu forward/backward match matmul + gelu, fused and not", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  for (bool fused : {true, false}) {
    FusionEnv env(fused ? "auto" : "off");
    auto ops = ds::runtime::makeCudaOps(0);
    for (DType dt : kTypes) {
      checkMatmulGelu(*ops, dt, 64, 128, 256, 96, fused);  // widths multiples of 8: the epilogues
      checkMatmulGelu(*ops, dt, 37, 72, 53, 40, fused);    // OC = 53: forward falls back
      checkMatmulGelu(*ops, dt, 33, 40, 96, 20, fused);    // odd N
    }
  }
}

// The pack path (16-byte aligned, n % W left over) and the scalar path (offset by one element).
TEST_CASE("cuda gelu and residual match the host kernels at odd sizes and offsets", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  for (DType dt : kTypes) {
    for (size_t n : {size_t(1), size_t(5), size_t(8), size_t(4099)}) {
      for (size_t off : {size_t(0), size_t(1)}) {
        INFO("n=" << n << " offset=" << off << " " << ds::dtypeName(dt));
        const double tol = dt != DType::kF32 ? 1e-2 : 1e-5;
        auto x = asSeen(randomVec(n, 70, 4.f), dt), y = asSeen(randomVec(n, 71), dt);
        auto d = asSeen(randomVec(n, 72), dt), g0 = asSeen(randomVec(n, 73), dt);
        auto g1 = asSeen(randomVec(n, 74), dt);
        Dev dX = upload(*ops, &x, n, dt, off), dY = upload(*ops, &y, n, dt, off);
        Dev dD = upload(*ops, &d, n, dt, off);
        std::vector<float> ref(n);

        Dev out = upload(*ops, nullptr, n, dt, off);
        ops->geluForward(out.at(), dX.at(), n, dt);
        ds::runtime::geluForward(ref.data(), x.data(), n);
        CHECK(relError(download(*ops, out), ref) <= tol);

        Dev gX = upload(*ops, &g0, n, dt, off);
        ops->geluBackward(gX.at(), dX.at(), dD.at(), n, dt);
        auto rG = g0;
        ds::runtime::geluBackward(rG.data(), x.data(), d.data(), n);
        CHECK(relError(download(*ops, gX), rG) <= tol);

        Dev sum = upload(*ops, nullptr, n, dt, off);
        ops->residualForward(sum.at(), dX.at(), dY.at(), n, dt);
        ds::runtime::residualForward(ref.data(), x.data(), y.data(), n);
        CHECK(relError(download(*ops, sum), ref) <= tol);

        Dev gA = upload(*ops, &g0, n, dt, off), gB = upload(*ops, &g1, n, dt, off);
        ops->residualBackward(gA.at(), gB.at(), dD.at(), n, dt);
        ops->residualBackward(nullptr, gB.at(), dD.at(), n, dt);  // a null side is skipped
        auto rA = g0, rB = g1;
        ds::runtime::residualBackward(rA.data(), rB.data(), d.data(), n);
        for (size_t i = 0; i < n; ++i) rB[i] += d[i];
        CHECK(relError(download(*ops, gA), rA) <= tol);
        CHECK(relError(download(*ops, gB), rB) <= tol);
      }
    }
  }
}

// residualLayernormForward and layernormForward: the vector kernel at widths of whole warp packs
// (C = 768, GPT-2's; 256), the separate kernels at C = 100 or at a pointer offset by one element.
TEST_CASE("cuda residual + layernorm forward matches the host kernels, fused and not", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  for (DType dt : kTypes) {
    for (int C : {768, 256, 100}) {
      for (size_t off : {size_t(0), size_t(1)}) {
        const int N = 37;
        const size_t n = size_t(N) * C;
        INFO("N=" << N << " C=" << C << " offset=" << off << " " << ds::dtypeName(dt));
        const double tol = dt != DType::kF32 ? 1e-2 : 1e-5;
        auto a = asSeen(randomVec(n, 80, 2.f), dt), b = asSeen(randomVec(n, 81), dt);
        auto w = asSeen(randomVec(C, 82), dt), bias = asSeen(randomVec(C, 83), dt);
        Dev dA = upload(*ops, &a, n, dt, off), dB = upload(*ops, &b, n, dt, off);
        Dev dW = upload(*ops, &w, C, dt, off), dBias = upload(*ops, &bias, C, dt, off);
        Dev res = upload(*ops, nullptr, n, dt, off), out = upload(*ops, nullptr, n, dt, off);
        Dev mean = upload(*ops, nullptr, N, DType::kF32),
            rstd = upload(*ops, nullptr, N, DType::kF32);

        // The host sees the residual as the device stores it.
        std::vector<float> resRef(n), outRef(n), mRef(N), rRef(N);
        ds::runtime::residualForward(resRef.data(), a.data(), b.data(), n);
        resRef = asSeen(resRef, dt);
        ds::runtime::layernormForward(outRef.data(), mRef.data(), rRef.data(), resRef.data(),
                                      w.data(), bias.data(), N, C);
        ops->residualLayernormForward(res.at(), out.at(), mean.f32(), rstd.f32(), dA.at(), dB.at(),
                                      dW.at(), dBias.at(), N, C, dt);
        CHECK(relError(download(*ops, res), resRef) <= tol);
        CHECK(relError(download(*ops, out), outRef) <= tol);
        CHECK(relError(download(*ops, mean), mRef) <= 1e-5);
        CHECK(relError(download(*ops, rstd), rRef) <= 1e-5);

        // LayerNorm alone on a.
        ds::runtime::layernormForward(outRef.data(), mRef.data(), rRef.data(), a.data(), w.data(),
                                      bias.data(), N, C);
        Dev out2 = upload(*ops, nullptr, n, dt, off);
        ops->layernormForward(out2.at(), mean.f32(), rstd.f32(), dA.at(), dW.at(), dBias.at(), N, C,
                              dt);
        CHECK(relError(download(*ops, out2), outRef) <= tol);
        CHECK(relError(download(*ops, mean), mRef) <= 1e-5);
        CHECK(relError(download(*ops, rstd), rRef) <= 1e-5);
      }
    }
  }
}
