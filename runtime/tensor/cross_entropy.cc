// Softmax + cross-entropy forward/backward (see cross_entropy.h).
#include "runtime/tensor/cross_entropy.h"
#include "runtime/tensor/softmax_row.h"
#include "runtime/tensor/threads.h"

#include <cmath>
#include <cstddef>
#include <vector>

namespace ds::runtime {

double softmaxCrossEntropyForward(float* logitsToProbs, const int32_t* targets, int N, int V,
                                  int* valid) {
  std::vector<double> rowLoss(N, 0.0);
#pragma omp parallel for schedule(static) if (long(N) * V >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    float* row = logitsToProbs + static_cast<size_t>(n) * V;
    const float mx = rowMax(row, size_t(V));
    int tg = targets[n];
    float shiftedTarget = tg >= 0 ? row[tg] - mx : 0.0f;
    const double sum = expShiftSum(row, size_t(V), mx);
    float inv = static_cast<float>(1.0 / sum);
    for (int j = 0; j < V; ++j) row[j] *= inv;
    // -log p = log(sum exp(l - max)) - (l_target - max): no log of an underflowed probability.
    if (tg >= 0) rowLoss[n] = std::log(sum) - shiftedTarget;
  }
  double total = 0.0;
  int count = 0;
  for (int n = 0; n < N; ++n) {  // fixed order: independent of thread count
    if (targets[n] >= 0) {
      total += rowLoss[n];
      ++count;
    }
  }
  if (valid != nullptr) *valid = count;
  return total;
}

void softmaxCrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N,
                                 int V, float scale) {
#pragma omp parallel for schedule(static) if (long(N) * V >= kMinParallelWork)
  for (int n = 0; n < N; ++n) {
    float* d = dlogits + static_cast<size_t>(n) * V;
    const float* p = probs + static_cast<size_t>(n) * V;
    int tg = targets[n];
    if (tg < 0) {
      for (int j = 0; j < V; ++j) d[j] = 0.0f;
      continue;
    }
    for (int j = 0; j < V; ++j) d[j] = p[j] * scale;
    d[tg] -= scale;
  }
}

}  // namespace ds::runtime
