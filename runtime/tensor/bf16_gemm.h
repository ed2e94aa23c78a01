// bf16 gemm: C[M,N] (fp32) = beta*C + A[M,K] x B[N,K]^T with both operands rounded to bf16 and
// products summed in fp32. Kernels, chosen at run time: AMX tiles (tdpbf16ps, bf16_gemm_amx.h)
// where the CPU has AMX and Linux grants the tile state; AVX512-BF16 (vdpbf16ps) on panels packed
// into the pair-interleaved layout; elsewhere the operands are widened to fp32 and OpenBLAS sgemm
// runs (same inputs, another summation order). DS_BF16_GEMM=amx|avx512 forces a native kernel. Not
// a general BLAS: beta is 0 or 1 and alpha is 1. Operands are strided views, so transposes are a
// packing detail.
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

// kNative is the AVX512-BF16 kernel, kAmx the AMX one; kAuto the process's choice
// (bf16GemmAutoPath: DS_BF16_GEMM, else AMX, else AVX512-BF16, else widen).
enum class Bf16GemmPath { kAuto, kNative, kWiden, kAmx };

// True when this CPU has AVX512-BF16 (vdpbf16ps): a native kernel (AMX or AVX512-BF16) is used by
// kAuto.
bool bf16GemmNativeAvailable();
// True when the AMX kernel can run here (CPU support and the process's tile permission).
bool bf16GemmAmxAvailable();
// What kAuto runs in this process (never kAuto), decided once: DS_BF16_GEMM=amx|avx512 (a
// NotSupported error where that kernel cannot run), else the fastest available.
Bf16GemmPath bf16GemmAutoPath();
const char* bf16GemmPathName(Bf16GemmPath path);  // "auto" | "avx512" | "widen" | "amx"

// C[m * ldc + n] = beta * C + sum_k bf16(A(m, k)) * bf16(B(n, k)), fp32 accumulation. beta must be
// 0 or 1. kNative on a CPU without AVX512-BF16, or kAmx without AMX, is a ds::NotSupported error.
// Native and AMX results are each bitwise independent of the thread count and of M (each element
// is summed in a fixed k order); the two kernels round differently, so they differ from each
// other in the last bits.
void gemmBf16(int M, int N, int K, GemmOperand A, GemmOperand B, float* C, long ldc, float beta,
              Bf16GemmPath path = Bf16GemmPath::kAuto);

}  // namespace ds::runtime
