// gemmBf16 (AMX, native AVX512-BF16 and widen+sgemm paths) against an fp64 reference on random
// inputs at odd sizes (M, N, K not multiples of the 8x48 micro-tile, the 96x192 tile or the
// 256-wide k block), every operand layout (row-major, transposed; fp32 or bf16 source), beta 0 and
// 1, ldc > N. Tolerance: the inputs are rounded to bf16 (8-bit significands) and so are the
// reference's, each product of two bf16 is exact in fp32 (16-bit significand), so the only error is
// fp32 summation of K exact terms (plus C for beta 1) in some order: |err| <= gamma_{K+1} * (sum
// |a*b| + |C0|), gamma_n = n*u/(1-n*u), u = 2^-24 (Higham, Thm 4.4 holds for any order; vdpbf16ps
// adds its two exact products one at a time). A wrong rounding (truncating instead of nearest-even)
// or a lost term breaks this bound by orders of magnitude. AMX cases SKIP visibly on CPUs without
// AMX (after checking that forcing it is refused); they add sizes at the 16-row/32-k tile edges and
// the shapes (bf16 row-major B, K % 32 == 0) where B is read in place and C^T computed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/threads.h"
#include "tests/support/skip.h"

using ds::runtime::Bf16GemmPath;
using ds::runtime::GemmOperand;

namespace {

struct Src {  // one logical rows x K operand held in a chosen layout and type
  std::vector<float> f;
  std::vector<ds::bf16> h;
  std::vector<double> ref;  // bf16-rounded values, row-major rows x K
  GemmOperand op;
};

Src makeSrc(int rows, int K, bool transposed, bool isBf16, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Src s;
  const size_t n = static_cast<size_t>(rows) * K;
  s.f.resize(n);
  s.ref.resize(n);
  for (float& x : s.f) x = u(rng);
  const long rs = transposed ? 1 : K, cs = transposed ? rows : 1;
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) {
      const float x = s.f[r * rs + k * cs];
      s.ref[static_cast<size_t>(r) * K + k] = ds::bf16ToFloat(ds::floatToBf16(x));
    }
  }
  if (isBf16) {
    s.h.resize(n);
    for (size_t i = 0; i < n; ++i) s.h[i] = ds::floatToBf16(s.f[i]);
    s.op = ds::runtime::bf16Operand(s.h.data(), rs, cs);
  } else {
    s.op = ds::runtime::f32Operand(s.f.data(), rs, cs);
  }
  return s;
}

// Returns the largest |err| / bound over C (<= 1 passes).
double worstRatio(int M, int N, int K, bool aT, bool aBf, bool bT, bool bBf, float beta,
                  Bf16GemmPath path) {
  Src a = makeSrc(M, K, aT, aBf, 11u + M), b = makeSrc(N, K, bT, bBf, 23u + N);
  const long ldc = N + 3;
  std::vector<float> c(static_cast<size_t>(M) * ldc), c0;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (float& x : c) x = u(rng);
  c0 = c;
  ds::runtime::gemmBf16(M, N, K, a.op, b.op, c.data(), ldc, beta, path);
  const double g = (K + 1) * std::ldexp(1.0, -24);
  const double gamma = g / (1 - g);
  double worst = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double ref = beta != 0 ? c0[m * ldc + n] : 0.0, mag = std::fabs(ref);
      for (int k = 0; k < K; ++k) {
        const double p =
            a.ref[static_cast<size_t>(m) * K + k] * b.ref[static_cast<size_t>(n) * K + k];
        ref += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(c[m * ldc + n] - ref);
      worst = std::max(worst, err / (gamma * mag + 1e-30));
    }
    for (int n = N; n < ldc; ++n) {  // padding columns untouched
      if (c[m * ldc + n] != c0[m * ldc + n]) return 1e30;
    }
  }
  return worst;
}

struct Size {
  int M, N, K;
};
const std::vector<Size> kSizes = {{1, 1, 1},      {7, 5, 3},       {9, 49, 2},    {13, 50, 17},
                                  {37, 101, 129}, {101, 197, 601}, {3, 200, 1031}};

void checkPath(Bf16GemmPath path, const std::vector<Size>& sizes = kSizes) {
  for (const Size& s : sizes) {
    for (int layout = 0; layout < 16; ++layout) {
      const bool aT = layout & 1, aBf = layout & 2, bT = layout & 4, bBf = layout & 8;
      for (float beta : {0.0f, 1.0f}) {
        const double r = worstRatio(s.M, s.N, s.K, aT, aBf, bT, bBf, beta, path);
        INFO("M=" << s.M << " N=" << s.N << " K=" << s.K << " aT=" << aT << " aBf16=" << aBf
                  << " bT=" << bT << " bBf16=" << bBf << " beta=" << beta << " worst err/bound "
                  << r);
        REQUIRE(r <= 1.0);
      }
    }
  }
}

// True when this CPU has the native path; otherwise checks that forcing it is refused naming
// AVX512-BF16 (so a case asserts something on every CPU) and says so.
bool nativeOrRefused() {
  if (ds::runtime::bf16GemmNativeAvailable()) return true;
  WARN("CPU lacks AVX512-BF16: only the native path's refusal is checked");
  REQUIRE_THROWS_WITH(
      ds::runtime::gemmBf16(1, 1, 1, {}, {}, nullptr, 1, 0.0f, Bf16GemmPath::kNative),
      Catch::Matchers::Contains("AVX512-BF16"));
  return false;
}

// True when this CPU runs the AMX path; otherwise checks that forcing it is refused naming AMX.
bool amxOrRefused() {
  if (ds::runtime::bf16GemmAmxAvailable()) return true;
  REQUIRE_THROWS_WITH(ds::runtime::gemmBf16(1, 1, 1, {}, {}, nullptr, 1, 0.0f, Bf16GemmPath::kAmx),
                      Catch::Matchers::Contains("AMX"));
  return false;
}

// Row-independence and thread-count independence of one path at one operand layout.
void checkBitwiseStable(Bf16GemmPath path, int M, int N, int K, bool bBf16) {
  Src a = makeSrc(M, K, false, false, 3), b = makeSrc(N, K, false, bBf16, 4);
  std::vector<float> c1(static_cast<size_t>(M) * N), c2(c1.size()), row(N);
  const int saved = ds::runtime::computeThreads();
  ds::runtime::setComputeThreads(1);
  ds::runtime::gemmBf16(M, N, K, a.op, b.op, c1.data(), N, 0.0f, path);
  ds::runtime::setComputeThreads(2);
  ds::runtime::gemmBf16(M, N, K, a.op, b.op, c2.data(), N, 0.0f, path);
  ds::runtime::setComputeThreads(saved);
  REQUIRE(c1 == c2);
  for (int m : {0, M / 2, M - 1}) {
    GemmOperand one = a.op;
    one.data = a.f.data() + static_cast<size_t>(m) * K;
    ds::runtime::gemmBf16(1, N, K, one, b.op, row.data(), N, 0.0f, path);
    INFO("row " << m);
    REQUIRE(std::equal(row.begin(), row.end(), c1.begin() + static_cast<long>(m) * N));
  }
}

}  // namespace

TEST_CASE("bf16 gemm AMX path matches fp64 within the fp32 summation bound", "[unit][cpu_isa]") {
  if (!amxOrRefused()) DS_SKIP("CPU lacks AMX (or Linux refused the tile state)");
  std::vector<Size> sizes = kSizes;
  // Tile edges (16 rows, 32 k a step, 32 x 32 blocks) and B read in place (K % 32 == 0).
  const std::vector<Size> more = {{16, 16, 32},   {17, 48, 64}, {33, 32, 96},  {5, 80, 32},
                                  {40, 16, 320},  {31, 33, 63}, {64, 64, 33},  {2, 96, 768},
                                  {70, 144, 160}, {129, 30, 1}, {48, 112, 31}, {19, 45, 96},
                                  {21, 203, 128}};
  sizes.insert(sizes.end(), more.begin(), more.end());
  checkPath(Bf16GemmPath::kAmx, sizes);
}

TEST_CASE("bf16 gemm AMX results do not depend on thread count or on the other rows",
          "[unit][cpu_isa]") {
  if (!amxOrRefused()) DS_SKIP("CPU lacks AMX (or Linux refused the tile state)");
  checkBitwiseStable(Bf16GemmPath::kAmx, 203, 211, 777, false);  // A and B packed
  checkBitwiseStable(Bf16GemmPath::kAmx, 203, 211, 768, true);   // B read in place, C^T
}

TEST_CASE("bf16 gemm native AVX512-BF16 path matches fp64 within the fp32 summation bound",
          "[unit]") {
  if (nativeOrRefused()) checkPath(Bf16GemmPath::kNative);
}

TEST_CASE("bf16 gemm widen+sgemm path matches fp64 within the fp32 summation bound", "[unit]") {
  checkPath(Bf16GemmPath::kWiden);
}

TEST_CASE("bf16 gemm: K = 0 gives beta*C; bad beta and ldc are errors naming the value", "[unit]") {
  std::vector<float> c = {1, 2, 3, 4};
  ds::runtime::gemmBf16(2, 2, 0, {}, {}, c.data(), 2, 1.0f);
  REQUIRE(c == std::vector<float>{1, 2, 3, 4});
  ds::runtime::gemmBf16(2, 2, 0, {}, {}, c.data(), 2, 0.0f);
  REQUIRE(c == std::vector<float>{0, 0, 0, 0});
  REQUIRE_THROWS_WITH(ds::runtime::gemmBf16(2, 2, 1, {}, {}, c.data(), 2, 0.5f),
                      Catch::Matchers::Contains("beta 0.5"));
  REQUIRE_THROWS_WITH(ds::runtime::gemmBf16(2, 2, 1, {}, {}, c.data(), 1, 0.0f),
                      Catch::Matchers::Contains("ldc 1 < N 2"));
}

TEST_CASE("bf16 gemm native results do not depend on thread count or on the other rows", "[unit]") {
  if (!nativeOrRefused()) return;
  // Each C element is summed in a fixed k order by one thread, whatever the tiling, so a row's
  // result is bitwise the same at 1 or 2 threads and whether it is computed alone or in a batch.
  const int M = 203, N = 211, K = 777;
  Src a = makeSrc(M, K, false, false, 3), b = makeSrc(N, K, false, true, 4);
  std::vector<float> c1(static_cast<size_t>(M) * N), c2(c1.size()), row(N);
  const int saved = ds::runtime::computeThreads();
  ds::runtime::setComputeThreads(1);
  ds::runtime::gemmBf16(M, N, K, a.op, b.op, c1.data(), N, 0.0f, Bf16GemmPath::kNative);
  ds::runtime::setComputeThreads(2);
  ds::runtime::gemmBf16(M, N, K, a.op, b.op, c2.data(), N, 0.0f, Bf16GemmPath::kNative);
  ds::runtime::setComputeThreads(saved);
  REQUIRE(c1 == c2);
  for (int m : {0, 101, M - 1}) {
    GemmOperand one = a.op;
    one.data = a.f.data() + static_cast<size_t>(m) * K;
    ds::runtime::gemmBf16(1, N, K, one, b.op, row.data(), N, 0.0f, Bf16GemmPath::kNative);
    INFO("row " << m);
    REQUIRE(std::equal(row.begin(), row.end(), c1.begin() + static_cast<long>(m) * N));
  }
}
