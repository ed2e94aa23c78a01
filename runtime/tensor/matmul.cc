// Linear layer forward/backward on sgemm (see matmul.h).
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/sgemm.h"
#include "runtime/tensor/threads.h"

#include <cblas.h>

#include <cstddef>
#include <vector>

namespace ds::runtime {

void matmulForward(float* out, const float* inp, const float* weight, const float* bias, int N,
                   int C, int OC) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static) if (long(N) * OC >= kMinParallelWork)
    for (int n = 0; n < N; ++n) {
      float* row = out + static_cast<size_t>(n) * OC;
      for (int o = 0; o < OC; ++o) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void matmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
  }
  if (dweight != nullptr) {
    sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  }
  if (dbias != nullptr) {
    // Column sums as a gemv with a ones vector: deterministic and independent of our threads.
    thread_local std::vector<float> ones;
    if (ones.size() < static_cast<size_t>(N)) ones.assign(N, 1.0f);
    cblas_sgemv(CblasRowMajor, CblasTrans, N, OC, 1.0f, dout, OC, ones.data(), 1, 1.0f, dbias, 1);
  }
}

}  // namespace ds::runtime
