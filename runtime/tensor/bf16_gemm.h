// bf16 gemm: C[M,N] (fp32) = beta*C + A[M,K] x B[N,K]^T with both operands rounded to bf16 and
// products summed in fp32. Native path: AVX512-BF16 (vdpbf16ps) on panels packed into the
// pair-interleaved layout, chosen at run time; elsewhere the operands are widened to fp32 and
// OpenBLAS sgemm runs (same inputs, another summation order). Not a general BLAS: beta is 0 or 1
// and alpha is 1. Operands are strided views, so transposes are a packing detail.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ds::runtime {

// Element (r, c) of a logical matrix is data[r * rs + c * cs]; data is fp32 (rounded to bf16 to
// nearest even when packed) or bf16.
struct GemmOperand {
  const void* data = nullptr;
  bool isBf16 = false;
  long rs = 0, cs = 1;
};
inline GemmOperand f32Operand(const float* p, long rs, long cs) { return {p, false, rs, cs}; }
inline GemmOperand bf16Operand(const bf16* p, long rs, long cs) { return {p, true, rs, cs}; }

enum class Bf16GemmPath { kAuto, kNative, kWiden };

// True when this CPU has AVX512-BF16 (vdpbf16ps) and the native kernel is used by kAuto.
bool bf16GemmNativeAvailable();

// C[m * ldc + n] = beta * C + sum_k bf16(A(m, k)) * bf16(B(n, k)), fp32 accumulation. beta must be
// 0 or 1. kNative on a CPU without AVX512-BF16 is a ds::NotSupported error. Native results are
// bitwise independent of the thread count and of M (each element is summed in a fixed k order).
void gemmBf16(int M, int N, int K, GemmOperand A, GemmOperand B, float* C, long ldc, float beta,
              Bf16GemmPath path = Bf16GemmPath::kAuto);

}  // namespace ds::runtime
