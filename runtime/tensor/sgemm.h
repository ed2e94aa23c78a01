// Row-major sgemm split over the OpenMP team: C = alpha op(A) op(B) + beta C, the larger of M and
// N cut into one contiguous block per thread, each block one single-threaded OpenBLAS call. This
// is how the CPU kernels use more than one core for a product (thread_policy.h: OpenBLAS's own
// pool stays at 1 thread so it never spins against OpenMP's). Results equal one OpenBLAS call's up
// to its blocking (each element of C is still one dot product over all of K, in one thread).
// Inside a parallel region, or for products too small to share, it is one call on this thread.
#pragma once

namespace ds::runtime {

void sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
           const float* B, int ldb, float beta, float* C, int ldc);

// How sgemm splits M x N over `threads`: the dimension (0 = M, 1 = N), the block size (a multiple
// of 16 except possibly the last) and the number of blocks (1 = no split). Pure, for tests.
struct SgemmSplit {
  int dim = 0, block = 0, parts = 1;
};
SgemmSplit planSgemmSplit(int M, int N, int K, int threads);

}  // namespace ds::runtime
