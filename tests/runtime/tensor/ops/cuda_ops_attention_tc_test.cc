// CudaOps' tensor-core attention path (bf16 and fp16, head size 64; attention_tc_kernels.cu,
// attention_tc2/tc3: fp16 only on tc3) [gpu]: against the host kernels of
// runtime/tensor/attention.h (inputs rounded to the 16-bit type first) and against the
// SIMT kernels (DS_CUDA_ATTENTION=simt) on the same inputs, outputs poisoned first; each
// tensor-core variant (auto = tc3, tc2, tc1) by the knob. Out, dq, dk,
// dv within 1e-2 relative (||got - ref|| / ||ref||), lse within 1e-3 absolute, at tail and
// multiple-of-64 lengths. Skips without a CUDA device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ds/config.h"
#include "runtime/tensor/attention.h"
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

constexpr int kHs = 64;

using ds::test::haveCudaDevice;

// Sets DS_CUDA_ATTENTION for a scope (nullptr: unset), restoring the previous value after.
class ScopedAttentionPath {
 public:
  explicit ScopedAttentionPath(const char* value) {
    if (const char* prev = std::getenv("DS_CUDA_ATTENTION")) prev_ = prev;
    if (value) ::setenv("DS_CUDA_ATTENTION", value, 1);
    else ::unsetenv("DS_CUDA_ATTENTION");
  }
  ~ScopedAttentionPath() {
    if (prev_) ::setenv("DS_CUDA_ATTENTION", prev_->c_str(), 1);
    else ::unsetenv("DS_CUDA_ATTENTION");
  }
  ScopedAttentionPath(const ScopedAttentionPath&) = delete;
  ScopedAttentionPath& operator=(const ScopedAttentionPath&) = delete;

 private:
  std::optional<std::string> prev_;
};

// Uniform in [lo, hi), rounded to dt (bf16 or fp16: the values both sides then see exactly).
std::vector<float> random16Vec(size_t n, uint32_t seed, float lo, float hi, DType dt) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = ds::test::roundTo(u(rng), dt);
  return v;
}

// A 16-bit (dt) device buffer of n elements holding host, or poison (NaN) bytes when host is null.
OpsBuffer device16(Ops& ops, size_t n, const std::vector<float>* host, const char* what, DType dt) {
  OpsBuffer buf(ops, n * 2, what);
  const std::vector<uint16_t> h =
      host ? ds::test::toWords16(*host, dt) : std::vector<uint16_t>(n, 0xffff);
  ops.upload(buf.get(), h.data(), buf.bytes());
  return buf;
}

std::vector<float> download16(Ops& ops, const OpsBuffer& buf, size_t n, DType dt) {
  std::vector<uint16_t> h(n);
  ops.download(h.data(), buf.get(), n * 2);
  return ds::test::fromWords16(h, dt);
}

using ds::test::relError;

double maxAbsDiff(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(got[i]) - ref[i]);
    if (!(d <= worst)) worst = d;  // NaN sticks
  }
  return worst;
}

// ln(sum_{j <= t} exp(scale * q_t . k_j)) in double for every (b, h, t), [B, NH, T].
std::vector<double> lseReference(const std::vector<float>& qkv, int B, int T, int NH) {
  const int C = NH * kHs;
  const double scale = 1.0 / std::sqrt(double(kHs));
  std::vector<double> lse(size_t(B) * NH * T), s(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = qkv.data() + (size_t(b) * T + t) * 3 * C + h * kHs;
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          const float* k = qkv.data() + (size_t(b) * T + j) * 3 * C + C + h * kHs;
          double dot = 0;
          for (int d = 0; d < kHs; ++d) dot += double(q[d]) * k[d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(s[j] - mx);
        lse[(size_t(b) * NH + h) * T + t] = mx + std::log(sum);
      }
  return lse;
}

struct AttentionResult {
  std::vector<float> out, lse, dqkv;
};

// Forward then backward on the device with DS_CUDA_ATTENTION=path (nullptr: unset, auto), dt
// storage (bf16 or fp16).
AttentionResult runDevice(Ops& ops, const char* path, const std::vector<float>& qkv,
                          const std::vector<float>& dout, const std::vector<float>& dqkv0, int B,
                          int T, int NH, DType dt = DType::kBF16) {
  ScopedAttentionPath scoped(path);
  const int C = NH * kHs;
  const size_t nqkv = size_t(B) * T * 3 * C, nout = size_t(B) * T * C;
  OpsBuffer dQkv = device16(ops, nqkv, &qkv, "qkv", dt);
  OpsBuffer dOut = device16(ops, nout, nullptr, "out", dt);
  OpsBuffer dAux(ops, ops.attentionAuxBytes(B, T, NH), "aux");
  std::vector<unsigned char> poison(dAux.bytes(), 0xff);
  ops.upload(dAux.get(), poison.data(), poison.size());
  ops.attentionForward(dOut.get(), dAux.get(), dQkv.get(), B, T, C, NH, dt);
  AttentionResult r;
  r.out = download16(ops, dOut, nout, dt);
  r.lse.resize(size_t(B) * NH * T);
  ops.download(r.lse.data(), dAux.get(), r.lse.size() * 4);
  OpsBuffer dDout = device16(ops, nout, &dout, "dout", dt);
  OpsBuffer dDqkv = device16(ops, nqkv, &dqkv0, "dqkv", dt);
  ops.attentionBackward(dDqkv.get(), dDout.get(), dQkv.get(), dOut.get(), dAux.get(), B, T, C, NH,
                        dt);
  r.dqkv = download16(ops, dDqkv, nqkv, dt);
  return r;
}

// got's out and dq, dk, dv within 1e-2 of ref's (relative), lse within 1e-3 (absolute).
void checkClose(const AttentionResult& got, const std::vector<float>& outRef,
                const std::vector<double>& lseRef, const std::vector<float>& dqkvRef, int C) {
  const double errOut = relError(got.out, outRef, [](size_t) { return true; });
  INFO("forward rel error " << errOut);
  CHECK(errOut <= 1e-2);
  const double errLse = maxAbsDiff(got.lse, lseRef);
  INFO("lse max abs error " << errLse);
  CHECK(errLse <= 1e-3);
  const char* part[3] = {"dq", "dk", "dv"};
  for (int p = 0; p < 3; ++p) {
    const double err =
        relError(got.dqkv, dqkvRef, [&](size_t i) { return int(i % (3 * C)) / C == p; });
    INFO(part[p] << " rel error " << err);
    CHECK(err <= 1e-2);
  }
}

struct Inputs {
  std::vector<float> qkv, dout, dqkv0;
};

Inputs randomInputs(int B, int T, int NH, uint32_t seed, DType dt = DType::kBF16) {
  const int C = NH * kHs;
  const size_t nqkv = size_t(B) * T * 3 * C, nout = size_t(B) * T * C;
  return {random16Vec(nqkv, seed, -1.f, 1.f, dt), random16Vec(nout, seed + 1, -1.f, 1.f, dt),
          random16Vec(nqkv, seed + 2, -0.1f, 0.1f, dt)};
}

}  // namespace

// Every tensor-core variant DS_CUDA_ATTENTION selects (auto = tc3), at lengths below, at and
// past the 64-key and 128-query tiles (1, 17, 63, 64, 65, 100, 127, 128, 129, 200) and T=1024,
// several B and NH (the grid's head dimension).
TEST_CASE("cuda tensor-core attention matches the host kernels", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  struct Shape {
    int B, NH, T;
  };
  const Shape shapes[] = {{2, 3, 1},   {2, 3, 17},  {1, 2, 63},  {2, 3, 64},
                          {1, 1, 65},  {2, 3, 100}, {1, 2, 127}, {3, 1, 128},
                          {1, 2, 129}, {2, 2, 200}, {2, 3, 1024}};
  uint32_t seed = 500;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (const Shape& sh : shapes) {
      const int B = sh.B, NH = sh.NH, T = sh.T, C = NH * kHs;
      const Inputs in = randomInputs(B, T, NH, seed += 10, dt);
      std::vector<float> outRef(size_t(B) * T * C), att(size_t(B) * NH * T * T),
          scratch(size_t(T) * T);
      ds::runtime::attentionForward(outRef.data(), att.data(), in.qkv.data(), B, T, C, NH);
      std::vector<float> dqkvRef = in.dqkv0;
      ds::runtime::attentionBackward(dqkvRef.data(), scratch.data(), in.dout.data(), in.qkv.data(),
                                     att.data(), B, T, C, NH);
      const auto lseRef = lseReference(in.qkv, B, T, NH);
      for (const char* path : {"auto", "tc3", "tc2", "tc1"}) {
        INFO("path " << path << " " << ds::dtypeName(dt) << " B=" << B << " T=" << T << " NH=" << NH
                     << " hs=" << kHs);
        const AttentionResult tc = runDevice(*ops, path, in.qkv, in.dout, in.dqkv0, B, T, NH, dt);
        checkClose(tc, outRef, lseRef, dqkvRef, C);
      }
    }
  }
}

TEST_CASE("cuda tensor-core attention matches the SIMT kernels", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  constexpr int B = 2, NH = 3, C = NH * kHs;
  uint32_t seed = 900;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int T : {1, 17, 64, 100, 129, 1024}) {
      const Inputs in = randomInputs(B, T, NH, seed += 10, dt);
      const AttentionResult simt = runDevice(*ops, "simt", in.qkv, in.dout, in.dqkv0, B, T, NH, dt);
      const std::vector<double> simtLse(simt.lse.begin(), simt.lse.end());
      for (const char* path : {static_cast<const char*>(nullptr), "tc2", "tc1"}) {
        INFO("path " << (path ? path : "unset") << " " << ds::dtypeName(dt) << " B=" << B
                     << " T=" << T << " NH=" << NH);
        const AttentionResult tc = runDevice(*ops, path, in.qkv, in.dout, in.dqkv0, B, T, NH, dt);
        checkClose(tc, simt.out, simtLse, simt.dqkv, C);
      }
    }
  }
}

TEST_CASE("cuda attention rejects an unknown DS_CUDA_ATTENTION", "[gpu]") {
  if (!haveCudaDevice()) DS_SKIP("no CUDA device");
  auto ops = ds::runtime::makeCudaOps(0);
  const Inputs in = randomInputs(1, 4, 1, 7);
  CHECK_THROWS_AS(runDevice(*ops, "wmma", in.qkv, in.dout, in.dqkv0, 1, 4, 1), ds::ConfigError);
}
