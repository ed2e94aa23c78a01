// Softmax row passes (see softmax_row.h): the CPU check once, then the AVX-512, AVX2 or portable
// loop.
#include "runtime/tensor/softmax_row.h"

#include <cmath>

namespace ds::runtime {
namespace {
enum class RowIsa { kPortable, kAvx2, kAvx512 };
RowIsa rowIsa() {
  static const RowIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return RowIsa::kAvx512;
    if (softmaxRowHasAvx2()) return RowIsa::kAvx2;
    return RowIsa::kPortable;
  }();
  return isa;
}
}  // namespace

bool softmaxRowHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

float rowMax(const float* row, size_t n) {
  if (rowIsa() == RowIsa::kAvx512) return detail::rowMaxAvx512(row, n);
  if (rowIsa() == RowIsa::kAvx2) return detail::rowMaxAvx2(row, n);
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
  if (rowIsa() == RowIsa::kAvx512) return detail::expShiftSumAvx512(row, n, shift);
  if (rowIsa() == RowIsa::kAvx2) return detail::expShiftSumAvx2(row, n, shift);
  return expShiftSumPortable(row, n, shift);
}

}  // namespace ds::runtime
