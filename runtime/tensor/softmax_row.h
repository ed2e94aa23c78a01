// One softmax row's passes, vectorised, for the cross-entropy (rows of V = 50257 logits) and the
// attention softmax (causal rows of t + 1 scores): the row's max, then exp(x - shift) in place
// with the sum. AVX-512 where the CPU has it (exp_neg_avx512.h: relative error a few ulp, 0 below
// exp(-87.3) where libm gives a subnormal, the sum accumulated in 8 double lanes), else AVX2 + FMA
// (exp_neg_avx2.h: each exp bitwise the AVX-512 one, the sum in 8 double lanes in another order),
// else the portable loop (std::exp, the sum in one double in order). Not a full softmax: callers
// scale.
#pragma once

#include <cstddef>

namespace ds::runtime {

// max over row[0, n), n >= 1 (a NaN is skipped unless row[0] is one, as the scalar compare).
float rowMax(const float* row, size_t n);
// row[j] = exp(row[j] - shift) for j < n, shift >= every row[j]; returns the sum of the new row.
double expShiftSum(float* row, size_t n, float shift);
// The same on the portable path whatever the CPU (tests).
double expShiftSumPortable(float* row, size_t n, float shift);

// Whether this CPU runs the AVX2 + FMA kernels below (tests).
bool softmaxRowHasAvx2();

namespace detail {  // the vector kernels (softmax_row_avx*.cc), after the CPU check only
float rowMaxAvx512(const float* row, size_t n);
double expShiftSumAvx512(float* row, size_t n, float shift);
float rowMaxAvx2(const float* row, size_t n);
double expShiftSumAvx2(float* row, size_t n, float shift);
}  // namespace detail

}  // namespace ds::runtime
