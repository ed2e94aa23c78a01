// The OpenMP-split sgemm (see sgemm.h).
#include "runtime/tensor/sgemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>

namespace ds::runtime {

namespace {

// Below this many multiply-adds a block is not worth a thread (a wake-up costs microseconds).
constexpr long kMinBlockWork = 1L << 20;
constexpr int kAlign = 16;

void blasOneThread() {
  // Held at 1 even before (or without) applyThreadPolicy: our split must never nest in
  // OpenBLAS's pool. Static init is thread-safe and runs once.
  static const bool once = (openblas_set_num_threads(1), true);
  (void)once;
}

}  // namespace

SgemmSplit planSgemmSplit(int M, int N, int K, int threads) {
  SgemmSplit s;
  s.dim = M >= N ? 0 : 1;
  const int len = s.dim == 0 ? M : N;
  const long work = long(M) * N * K;
  int t = std::max(1, threads);
  t = static_cast<int>(std::min<long>(t, work / kMinBlockWork));
  t = std::min(t, len / kAlign);
  if (t <= 1) {
    s.block = len;
    s.parts = 1;
    return s;
  }
  s.block = ((len + t - 1) / t + kAlign - 1) / kAlign * kAlign;
  s.parts = (len + s.block - 1) / s.block;
  return s;
}

void sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc) {
  blasOneThread();
  const CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  const SgemmSplit s = planSgemmSplit(M, N, K, omp_in_parallel() ? 1 : omp_get_max_threads());
  if (s.parts <= 1) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#pragma omp parallel for schedule(static, 1) num_threads(s.parts)
  for (int p = 0; p < s.parts; ++p) {
    const int lo = p * s.block;
    const int n = std::min(s.block, (s.dim == 0 ? M : N) - lo);
    if (s.dim == 0) {  // rows of C: rows of op(A)
      const float* a = transA ? A + lo : A + static_cast<size_t>(lo) * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, n, N, K, alpha, a, lda, B, ldb, beta,
                  C + static_cast<size_t>(lo) * ldc, ldc);
    } else {  // columns of C: columns of op(B)
      const float* b = transB ? B + static_cast<size_t>(lo) * ldb : B + lo;
      cblas_sgemm(CblasRowMajor, ta, tb, M, n, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  }
}

}  // namespace ds::runtime
