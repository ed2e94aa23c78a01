// The OpenMP-split sgemm (runtime/tensor/sgemm.h): the split plan (which dimension, aligned
// blocks covering it exactly, no split for small products) and results equal to one OpenBLAS
// call for every transpose combination, beta 0 and 1, ldc > N, at 1 and several threads.
#include <catch2/catch.hpp>

#include <cblas.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/tensor/sgemm.h"
#include "runtime/tensor/threads.h"

using ds::runtime::planSgemmSplit;

TEST_CASE("sgemm split plan: larger dimension, aligned blocks that cover it, small stays whole",
          "[unit]") {
  auto s = planSgemmSplit(1024, 3072, 768, 2);
  CHECK(s.dim == 1);
  CHECK(s.parts == 2);
  CHECK(s.block % 16 == 0);
  CHECK(s.block * (s.parts - 1) < 3072);
  CHECK(s.block * s.parts >= 3072);
  s = planSgemmSplit(2304, 768, 1024, 4);
  CHECK(s.dim == 0);
  CHECK(s.parts == 4);
  s = planSgemmSplit(1000, 100, 64, 3);  // 1000 = 3 blocks of 336 (aligned) minus the tail
  CHECK(s.parts == 3);
  CHECK(s.block == 336);
  CHECK(planSgemmSplit(64, 64, 64, 8).parts == 1);       // 262k multiply-adds: not worth a thread
  CHECK(planSgemmSplit(1024, 3072, 768, 1).parts == 1);  // one thread
  CHECK(planSgemmSplit(20, 1 << 20, 64, 8).dim == 1);
}

TEST_CASE("sgemm equals one OpenBLAS call for every layout, beta and thread count", "[unit]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int before = ds::runtime::computeThreads();
  const int M = 203, N = 517, K = 129, ldc = N + 5;
  for (int threads : {1, 3}) {
    ds::runtime::setComputeThreads(threads);
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          INFO("threads " << threads << " ta " << ta << " tb " << tb << " beta " << beta);
          const int lda = ta ? M : K, ldb = tb ? K : N;
          std::vector<float> a(size_t(ta ? K : M) * lda), b(size_t(tb ? N : K) * ldb);
          std::vector<float> c0(size_t(M) * ldc);
          for (auto* v : {&a, &b, &c0})
            for (float& x : *v) x = u(rng);
          std::vector<float> ref = c0, got = c0;
          cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                      M, N, K, 0.5f, a.data(), lda, b.data(), ldb, beta, ref.data(), ldc);
          ds::runtime::sgemm(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, beta, got.data(),
                             ldc);
          double worst = 0;
          for (size_t i = 0; i < ref.size(); ++i)
            worst = std::max(worst, double(std::fabs(ref[i] - got[i])));
          CHECK(worst < 1e-4);  // same products; only OpenBLAS's blocking may reorder sums
          CHECK(ds::runtime::blasThreads() == 1);
        }
  }
  ds::runtime::setComputeThreads(before);
}
