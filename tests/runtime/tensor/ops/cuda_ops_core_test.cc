// CudaOps (runtime/tensor/cuda) against the host kernels of runtime/tensor for the ops outside
// attention, cross-entropy and the optimizers: memory, reductions, linear, LayerNorm, encoder,
// GELU, residual, in fp32, bf16 and fp16. Not a speed test. Every case is [gpu] and skips without a
// CUDA device; outputs are poisoned (NaN bytes) first and gradients start non-zero (accumulate).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/tensor/elementwise.h"
#include "runtime/tensor/encoder.h"
#include "runtime/tensor/layernorm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/ops.h"
#include "tests/runtime/tensor/ops/cuda_test_util.h"
#include "tests/support/skip.h"

namespace {

using ds::DType;
using ds::runtime::Ops;
using ds::runtime::OpsBuffer;

// The visible device count (0 without CUDA kernels in the build, a driver or a device).
int cudaDevices() {
#if DS_HAVE_CUDA_KERNELS
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

// Uniform in [-1, -0.05] u [0.05, 1]: never zero, so a missed element cannot pass as a match.
std::vector<float> randomVec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = sign(rng) ? u(rng) : -u(rng);
  return v;
}

float roundBf16(float x) { return ds::bf16ToFloat(ds::floatToBf16(x)); }
float roundFp16(float x) { return ds::fp16ToFloat(ds::floatToFp16(x)); }

// What the device sees of v in dt: v itself for fp32, v rounded to bf16 or fp16.
std::vector<float> asSeen(std::vector<float> v, DType dt) {
  if (dt == DType::kBF16) {
    for (float& x : v) x = roundBf16(x);
  }
  if (dt == DType::kF16) {
    for (float& x : v) x = roundFp16(x);
  }
  return v;
}

double tolerance(DType dt) { return dt == DType::kF32 ? 1e-5 : 1e-2; }

// ||got - ref|| / ||ref||; NaN anywhere gives NaN (fails every <= check).
double relErr(const std::vector<float>& got, const std::vector<float>& ref) {
  REQUIRE(got.size() == ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(num) / std::sqrt(den);
}

// A device buffer of n elements of dt.
struct DevBuf {
  OpsBuffer buf;
  size_t n = 0;
  DType dt = DType::kF32;
  void* get() const { return buf.get(); }
  float* f32() const { return buf.as<float>(); }
};

DevBuf upload(Ops& ops, const std::vector<float>& v, DType dt) {
  DevBuf b{OpsBuffer(ops, v.size() * ds::dtypeSize(dt), "test"), v.size(), dt};
  if (dt == DType::kF32) {
    ops.upload(b.get(), v.data(), v.size() * 4);
  } else if (dt == DType::kF16) {
    std::vector<ds::fp16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = ds::floatToFp16(v[i]);
    ops.upload(b.get(), h.data(), h.size() * 2);
  } else {
    std::vector<ds::bf16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = ds::floatToBf16(v[i]);
    ops.upload(b.get(), h.data(), h.size() * 2);
  }
  return b;
}

// An output buffer filled with 0xff bytes: NaN as fp32, bf16 and fp16.
DevBuf poisoned(Ops& ops, size_t n, DType dt) {
  DevBuf b{OpsBuffer(ops, n * ds::dtypeSize(dt), "test output"), n, dt};
  std::vector<unsigned char> junk(n * ds::dtypeSize(dt), 0xff);
  ops.upload(b.get(), junk.data(), junk.size());
  return b;
}

std::vector<float> download(Ops& ops, const DevBuf& b) {
  std::vector<float> out(b.n);
  if (b.dt == DType::kF32) {
    ops.download(out.data(), b.get(), b.n * 4);
  } else if (b.dt == DType::kF16) {
    std::vector<ds::fp16> h(b.n);
    ops.download(h.data(), b.get(), b.n * 2);
    for (size_t i = 0; i < b.n; ++i) out[i] = ds::fp16ToFloat(h[i]);
  } else {
    std::vector<ds::bf16> h(b.n);
    ops.download(h.data(), b.get(), b.n * 2);
    for (size_t i = 0; i < b.n; ++i) out[i] = ds::bf16ToFloat(h[i]);
  }
  return out;
}

void checkClose(const std::vector<float>& got, const std::vector<float>& ref, DType dt,
                const char* what) {
  const double err = relErr(got, ref);
  INFO(what << " (" << ds::dtypeName(dt) << "): relative error " << err);
  CHECK(err <= tolerance(dt));
}

const DType kTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

}  // namespace

#define DS_REQUIRE_GPU() \
  if (cudaDevices() == 0) DS_SKIP("no CUDA device")

TEST_CASE("cuda ops: name, copies, zero and round trips", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  CHECK(ops->onDevice());
  CHECK(ops->name().rfind("cuda:0 (", 0) == 0);
  CHECK(ops->name().find("GiB)") != std::string::npos);
  auto x = randomVec(1000, 1);
  DevBuf a = upload(*ops, x, DType::kF32);
  DevBuf b = poisoned(*ops, x.size(), DType::kF32);
  ops->copy(b.get(), a.get(), x.size() * 4);
  CHECK(download(*ops, b) == x);
  ops->zero(b.get(), 10 * 4);
  auto z = download(*ops, b);
  for (int i = 0; i < 10; ++i) CHECK(z[i] == 0.0f);
  CHECK(z[10] == x[10]);
  ops->synchronize();
}

TEST_CASE("cuda ops: an impossible alloc throws OutOfMemoryError naming the bytes", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  const size_t huge = size_t{1} << 50;
  try {
    (void)ops->alloc(huge, "the test's petabyte");
    FAIL("alloc of 2^50 bytes succeeded");
  } catch (const ds::runtime::OutOfMemoryError& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find(std::to_string(huge)) != std::string::npos);
    CHECK(msg.find("the test's petabyte") != std::string::npos);
    CHECK(msg.find("free") != std::string::npos);
  }
  // The failed cudaMalloc must not poison later launches.
  auto x = randomVec(100, 2);
  DevBuf a = upload(*ops, x, DType::kF32);
  double ref = 0;
  for (float v : x) ref += v;
  CHECK(std::fabs(ops->sum(a.f32(), x.size()) - ref) <= 1e-9);
}

TEST_CASE("cuda ops: a device index past the count is refused naming the count", "[gpu]") {
  DS_REQUIRE_GPU();
  const int count = cudaDevices();
  try {
    (void)ds::runtime::makeCudaOps(99);
    FAIL("makeCudaOps(99) succeeded");
  } catch (const ds::Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("99") != std::string::npos);
    CHECK(msg.find(std::to_string(count) + " CUDA device") != std::string::npos);
  }
}

TEST_CASE("cuda ops: sum and sumSquares match double sums; NaN and inf propagate", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  for (size_t n : {size_t{1}, size_t{255}, size_t{1000003}}) {
    auto x = randomVec(n, static_cast<uint32_t>(n));
    double s = 0, s2 = 0;
    for (float v : x) s += v, s2 += double(v) * v;
    DevBuf a = upload(*ops, x, DType::kF32);
    INFO("n = " << n);
    CHECK(std::fabs(ops->sum(a.f32(), n) - s) <= 1e-10 * (1 + std::fabs(s)) + 1e-9);
    CHECK(std::fabs(ops->sumSquares(a.f32(), n) - s2) <= 1e-10 * s2);
    // Deterministic: the same input gives the same bits.
    CHECK(ops->sum(a.f32(), n) == ops->sum(a.f32(), n));
  }
  auto x = randomVec(100000, 7);
  x[54321] = std::numeric_limits<float>::quiet_NaN();
  DevBuf a = upload(*ops, x, DType::kF32);
  CHECK(std::isnan(ops->sum(a.f32(), x.size())));
  CHECK(std::isnan(ops->sumSquares(a.f32(), x.size())));
  x[54321] = std::numeric_limits<float>::infinity();
  DevBuf b = upload(*ops, x, DType::kF32);
  CHECK(std::isinf(ops->sum(b.f32(), x.size())));
  CHECK(std::isinf(ops->sumSquares(b.f32(), x.size())));
}

TEST_CASE("cuda ops: scale is exact; toBf16 and toFp16 match the host bit for bit", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  auto x = randomVec(5000, 3);
  // Ties, NaN, inf, the largest finite value and a subnormal: the rounding corner cases.
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x7fc00000u, 0xffc00001u, 0x7f800000u,
                               0xff800000u, 0x7f7fffffu, 0x00000001u, 0x80000000u, 0x7f7f8000u};
  for (size_t i = 0; i < std::size(specials); ++i) std::memcpy(&x[i], &specials[i], 4);
  DevBuf a = upload(*ops, x, DType::kF32);
  OpsBuffer out16(*ops, x.size() * 2, "bf16 out");
  ops->toBf16(out16.as<ds::bf16>(), a.f32(), x.size());
  std::vector<ds::bf16> got(x.size());
  ops->download(got.data(), out16.get(), x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i].bits == ds::floatToBf16(x[i]).bits);
  }
  // toFp16: the host's floatToFp16 bit for bit (a NaN stays a NaN; its payload is the kernel's).
  OpsBuffer outHalf(*ops, x.size() * 2, "fp16 out");
  ops->toFp16(outHalf.as<ds::fp16>(), a.f32(), x.size());
  std::vector<ds::fp16> gotHalf(x.size());
  ops->download(gotHalf.data(), outHalf.get(), x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << " (fp16)");
    if (std::isnan(x[i])) REQUIRE(std::isnan(ds::fp16ToFloat(gotHalf[i])));
    else REQUIRE(gotHalf[i].bits == ds::floatToFp16(x[i]).bits);
  }
  auto y = randomVec(5000, 4);
  DevBuf b = upload(*ops, y, DType::kF32);
  ops->scale(b.f32(), y.size(), 0.37f);
  auto scaled = download(*ops, b);
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(scaled[i] == y[i] * 0.37f);
}

// One linear layer, forward and accumulating backward, at a shape; `offset` elements shift every
// pointer off cudaMalloc's alignment (what flat parameter buffers give).
void checkLinear(Ops& ops, DType dt, int N, int C, int OC, size_t offset, double tol) {
  INFO("N=" << N << " C=" << C << " OC=" << OC << " offset=" << offset << " " << ds::dtypeName(dt));
  auto pad = [&](std::vector<float> v) {
    v.insert(v.begin(), offset, 0.5f);
    return v;
  };
  auto unpad = [&](std::vector<float> v) {
    return std::vector<float>(v.begin() + offset, v.end());
  };
  auto inp = asSeen(randomVec(size_t(N) * C, 11), dt);
  auto w = asSeen(randomVec(size_t(OC) * C, 12), dt);
  auto bias = asSeen(randomVec(OC, 13), dt);
  auto dout = asSeen(randomVec(size_t(N) * OC, 14), dt);
  auto dinp0 = asSeen(randomVec(size_t(N) * C, 15), dt);
  auto dw0 = randomVec(size_t(OC) * C, 16);
  auto db0 = randomVec(OC, 17);

  DevBuf dInp = upload(ops, pad(inp), dt), dW = upload(ops, pad(w), dt);
  DevBuf dBias = upload(ops, pad(bias), dt), dDout = upload(ops, pad(dout), dt);
  const size_t es = ds::dtypeSize(dt);
  auto at = [&](const DevBuf& b) { return static_cast<char*>(b.get()) + offset * es; };
  auto atF = [&](const DevBuf& b) { return b.f32() + offset; };

  // Forward, with and without bias.
  for (bool withBias : {true, false}) {
    DevBuf out = poisoned(ops, offset + size_t(N) * OC, dt);
    ops.matmulForward(at(out), at(dInp), at(dW), withBias ? at(dBias) : nullptr, N, C, OC, dt);
    std::vector<float> ref(size_t(N) * OC);
    ds::runtime::matmulForward(ref.data(), inp.data(), w.data(), withBias ? bias.data() : nullptr,
                               N, C, OC);
    const double err = relErr(unpad(download(ops, out)), ref);
    INFO("forward, bias " << withBias << ": relative error " << err);
    CHECK(err <= tol);
  }
  // Backward accumulates into non-zero gradients.
  DevBuf gInp = upload(ops, pad(dinp0), dt);
  DevBuf gW = upload(ops, pad(dw0), DType::kF32), gB = upload(ops, pad(db0), DType::kF32);
  ops.matmulBackward(at(gInp), atF(gW), atF(gB), at(dDout), at(dInp), at(dW), N, C, OC, dt);
  auto rInp = dinp0, rW = dw0, rB = db0;
  ds::runtime::matmulBackward(rInp.data(), rW.data(), rB.data(), dout.data(), inp.data(), w.data(),
                              N, C, OC);
  const double eInp = relErr(unpad(download(ops, gInp)), rInp);
  const double eW = relErr(unpad(download(ops, gW)), rW);
  const double eB = relErr(unpad(download(ops, gB)), rB);
  INFO("backward relative errors: dinp " << eInp << " dweight " << eW << " dbias " << eB);
  CHECK(eInp <= tol);
  CHECK(eW <= tol);
  CHECK(eB <= tol);
  // Null dinp and dbias are allowed: dweight alone accumulates once more.
  ops.matmulBackward(nullptr, atF(gW), nullptr, at(dDout), at(dInp), at(dW), N, C, OC, dt);
  ds::runtime::matmulBackward(nullptr, rW.data(), nullptr, dout.data(), inp.data(), w.data(), N, C,
                              OC);
  CHECK(relErr(unpad(download(ops, gW)), rW) <= tol);
  // matmulBackwardWrite overwrites a poisoned dinp (beta 0); dweight and dbias still accumulate.
  DevBuf wInp = poisoned(ops, offset + size_t(N) * C, dt);
  ops.matmulBackwardWrite(at(wInp), atF(gW), atF(gB), at(dDout), at(dInp), at(dW), N, C, OC, dt);
  std::vector<float> wRef(size_t(N) * C, 0.f);
  ds::runtime::matmulBackward(wRef.data(), rW.data(), rB.data(), dout.data(), inp.data(), w.data(),
                              N, C, OC);
  const double eWrite = relErr(unpad(download(ops, wInp)), wRef);
  INFO("backward write: dinp " << eWrite);
  CHECK(eWrite <= tol);
  CHECK(relErr(unpad(download(ops, gW)), rW) <= tol);
  CHECK(relErr(unpad(download(ops, gB)), rB) <= tol);
}

TEST_CASE("cuda ops: linear forward/backward match the host kernels (aligned shapes)", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0, /*allowTf32=*/false);
  for (DType dt : kTypes) checkLinear(*ops, dt, 64, 128, 96, 0, tolerance(dt));
}

TEST_CASE("cuda ops: linear forward/backward at odd shapes and unaligned pointers", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0, /*allowTf32=*/false);
  for (DType dt : kTypes) {
    checkLinear(*ops, dt, 37, 72, 53, 0, tolerance(dt));
    checkLinear(*ops, dt, 40, 64, 48, 1, tolerance(dt));
    checkLinear(*ops, dt, 37, 71, 53, 0, tolerance(dt));
  }
}

TEST_CASE("cuda ops: linear with TF32 allowed stays within TF32 accuracy", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0, /*allowTf32=*/true);
  checkLinear(*ops, DType::kF32, 64, 256, 96, 0, 5e-3);
}

TEST_CASE("cuda ops: layernorm forward/backward match the host kernels", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  for (DType dt : kTypes) {
    // 768 and 1536: bf16 takes the 16-byte vector kernel for dinp (C a multiple of 256); 256 to
    // 1024 the fused backward (DS_CUDA_LAYERNORM_BWD auto), both kernels checked below. Odd N:
    // the fused kernel's grid-strided rows end mid-block.
    for (auto [N, C] : {std::pair{37, 72}, std::pair{130, 769}, std::pair{67, 768},
                        std::pair{9, 1536}, std::pair{1023, 64}, std::pair{3001, 768},
                        std::pair{517, 1024}, std::pair{33, 1600}, std::pair{5, 256}}) {
      INFO("N=" << N << " C=" << C);
      auto inp = asSeen(randomVec(size_t(N) * C, 21), dt);
      for (float& v : inp) v = v * 3.0f + 0.5f;  // a non-zero mean and spread
      inp = asSeen(inp, dt);
      auto w = asSeen(randomVec(C, 22), dt), b = asSeen(randomVec(C, 23), dt);
      auto dout = asSeen(randomVec(size_t(N) * C, 24), dt);
      auto dinp0 = asSeen(randomVec(size_t(N) * C, 25), dt);
      auto dw0 = randomVec(C, 26), db0 = randomVec(C, 27);

      DevBuf dInp = upload(*ops, inp, dt), dW = upload(*ops, w, dt), dB = upload(*ops, b, dt);
      DevBuf out = poisoned(*ops, size_t(N) * C, dt);
      DevBuf mean = poisoned(*ops, N, DType::kF32), rstd = poisoned(*ops, N, DType::kF32);
      ops->layernormForward(out.get(), mean.f32(), rstd.f32(), dInp.get(), dW.get(), dB.get(), N, C,
                            dt);
      std::vector<float> rOut(size_t(N) * C), rMean(N), rRstd(N);
      ds::runtime::layernormForward(rOut.data(), rMean.data(), rRstd.data(), inp.data(), w.data(),
                                    b.data(), N, C);
      checkClose(download(*ops, out), rOut, dt, "layernorm out");
      checkClose(download(*ops, mean), rMean, DType::kF32, "layernorm mean");
      checkClose(download(*ops, rstd), rRstd, DType::kF32, "layernorm rstd");

      DevBuf dDout = upload(*ops, dout, dt);
      // Backward from the host's mean/rstd so both sides use the same saved statistics.
      DevBuf hMean = upload(*ops, rMean, DType::kF32), hRstd = upload(*ops, rRstd, DType::kF32);
      auto rInp = dinp0, rW = dw0, rB = db0;
      ds::runtime::layernormBackward(rInp.data(), rW.data(), rB.data(), dout.data(), inp.data(),
                                     w.data(), rMean.data(), rRstd.data(), N, C);
      for (const char* path : {"split", "auto"}) {
        INFO("DS_CUDA_LAYERNORM_BWD=" << path);
        ::setenv("DS_CUDA_LAYERNORM_BWD", path, 1);
        DevBuf gInp = upload(*ops, dinp0, dt);
        DevBuf gW = upload(*ops, dw0, DType::kF32), gB = upload(*ops, db0, DType::kF32);
        ops->layernormBackward(gInp.get(), gW.f32(), gB.f32(), dDout.get(), dInp.get(), dW.get(),
                               hMean.f32(), hRstd.f32(), N, C, dt);
        ::unsetenv("DS_CUDA_LAYERNORM_BWD");
        checkClose(download(*ops, gInp), rInp, dt, "layernorm dinp");
        checkClose(download(*ops, gW), rW, dt, "layernorm dweight");
        checkClose(download(*ops, gB), rB, dt, "layernorm dbias");
      }
    }
  }
}

TEST_CASE("cuda ops: encoder forward/backward match the host kernels", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  // C = 72: 128-bit packs; C = 70: element by element.
  for (int C : {72, 70}) {
    INFO("C = " << C);
    const int B = 4, T = 16, V = 13;  // V < B*T: tokens repeat, dwte rows collide
    std::mt19937 rng(31);
    std::vector<int32_t> tokens(B * T);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % V);
    OpsBuffer dTok(*ops, tokens.size() * 4, "tokens");
    ops->upload(dTok.get(), tokens.data(), tokens.size() * 4);
    for (DType dt : kTypes) {
      auto wte = asSeen(randomVec(size_t(V) * C, 32), dt),
           wpe = asSeen(randomVec(size_t(T) * C, 33), dt);
      auto dout = asSeen(randomVec(size_t(B) * T * C, 34), dt);
      auto dwte0 = randomVec(size_t(V) * C, 35), dwpe0 = randomVec(size_t(T) * C, 36);
      DevBuf dWte = upload(*ops, wte, dt), dWpe = upload(*ops, wpe, dt);
      DevBuf out = poisoned(*ops, size_t(B) * T * C, dt);
      ops->encoderForward(out.get(), dTok.as<int32_t>(), dWte.get(), dWpe.get(), B, T, C, dt);
      std::vector<float> rOut(size_t(B) * T * C);
      ds::runtime::encoderForward(rOut.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
      checkClose(download(*ops, out), rOut, dt, "encoder out");

      DevBuf dDout = upload(*ops, dout, dt);
      DevBuf gWte = upload(*ops, dwte0, DType::kF32), gWpe = upload(*ops, dwpe0, DType::kF32);
      ops->encoderBackward(gWte.f32(), gWpe.f32(), dDout.get(), dTok.as<int32_t>(), B, T, C, dt);
      auto rWte = dwte0, rWpe = dwpe0;
      ds::runtime::encoderBackward(rWte.data(), rWpe.data(), dout.data(), tokens.data(), B, T, C);
      checkClose(download(*ops, gWte), rWte, dt, "encoder dwte");
      checkClose(download(*ops, gWpe), rWpe, dt, "encoder dwpe");
    }
  }
}

TEST_CASE("cuda ops: gelu and residual forward/backward match the host kernels", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  const size_t n = 100003;
  for (DType dt : kTypes) {
    auto x = randomVec(n, 41);
    for (float& v : x) v *= 4.0f;  // cover both tails of the tanh
    x = asSeen(x, dt);
    auto y = asSeen(randomVec(n, 42), dt), dout = asSeen(randomVec(n, 43), dt);
    auto g0 = asSeen(randomVec(n, 44), dt), g1 = asSeen(randomVec(n, 45), dt);
    DevBuf dX = upload(*ops, x, dt), dY = upload(*ops, y, dt), dD = upload(*ops, dout, dt);

    DevBuf out = poisoned(*ops, n, dt);
    ops->geluForward(out.get(), dX.get(), n, dt);
    std::vector<float> ref(n);
    ds::runtime::geluForward(ref.data(), x.data(), n);
    checkClose(download(*ops, out), ref, dt, "gelu out");

    DevBuf gX = upload(*ops, g0, dt);
    ops->geluBackward(gX.get(), dX.get(), dD.get(), n, dt);
    auto rG = g0;
    ds::runtime::geluBackward(rG.data(), x.data(), dout.data(), n);
    checkClose(download(*ops, gX), rG, dt, "gelu dinp");

    DevBuf sum = poisoned(*ops, n, dt);
    ops->residualForward(sum.get(), dX.get(), dY.get(), n, dt);
    ds::runtime::residualForward(ref.data(), x.data(), y.data(), n);
    checkClose(download(*ops, sum), ref, dt, "residual out");

    DevBuf gA = upload(*ops, g0, dt), gB = upload(*ops, g1, dt);
    ops->residualBackward(gA.get(), gB.get(), dD.get(), n, dt);
    auto rA = g0, rB = g1;
    ds::runtime::residualBackward(rA.data(), rB.data(), dout.data(), n);
    checkClose(download(*ops, gA), rA, dt, "residual da");
    checkClose(download(*ops, gB), rB, dt, "residual db");
  }
}

TEST_CASE("cuda ops: an element type other than fp32/bf16/fp16 is NotSupported", "[gpu]") {
  DS_REQUIRE_GPU();
  auto ops = ds::runtime::makeCudaOps(0);
  DevBuf a = upload(*ops, randomVec(64, 51), DType::kF32);
  CHECK_THROWS_AS(ops->geluForward(a.get(), a.get(), 16, DType::kI32), ds::NotSupported);
  CHECK_THROWS_AS(ops->matmulForward(a.get(), a.get(), a.get(), nullptr, 2, 2, 2, DType::kI32),
                  ds::NotSupported);
}
