// Softmax row passes (see softmax_row.h): the CPU check once, then the AVX-512 or portable loop.
#include "runtime/tensor/softmax_row.h"

#include <cmath>

namespace ds::runtime {
namespace {
bool haveAvx512() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return have;
}
}  // namespace

float rowMax(const float* row, size_t n) {
  if (haveAvx512()) return detail::rowMaxAvx512(row, n);
  float mx = row[0];
  for (size_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  return mx;
}

double expShiftSumPortable(float* row, size_t n, float shift) {
  double sum = 0.0;
  for (size_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - shift);
    sum += row[j];
  }
  return sum;
}

double expShiftSum(float* row, size_t n, float shift) {
  if (haveAvx512()) return detail::expShiftSumAvx512(row, n, shift);
  return expShiftSumPortable(row, n, shift);
}

}  // namespace ds::runtime
