// Weight-streaming linear for a few rows (decode): out[N, OC] = inp[N, C] . W[OC, C]^T + bias,
// W fp32 or bf16 (widened in registers; inp stays fp32, as the "widen + sgemm" bf16 path). The
// matmul.h contract without sgemm's packing: each group of 4 weight rows is read from memory once
// and multiplied into every input row while it sits in L1, so at N = 1 a call streams W once at
// memory bandwidth; threads take chunks of output columns from a shared counter (no reduction
// across threads, results independent of the thread count). No allocation. Sums are fp32 in a
// different order than sgemm's: results agree with matmulForward to fp32 rounding, not bit for bit.
// ISA: AVX-512 (needs avx512f+bw+vl), AVX2+FMA, or scalar, picked once from the CPU
// (gemvBestIsa); every ISA the CPU has can be asked for explicitly (tests, A/B).
#pragma once

#include "core/dtype.h"

namespace ds::runtime {

enum class GemvIsa { kScalar, kAvx2, kAvx512 };
const char* gemvIsaName(GemvIsa isa);  // "scalar" | "avx2" | "avx512"
bool gemvIsaSupported(GemvIsa isa);
GemvIsa gemvBestIsa();

// bias may be null. Throws InternalError when isa is not supported on this CPU.
void gemvForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
                 int OC, GemvIsa isa = gemvBestIsa());
void gemvForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                     int C, int OC, GemvIsa isa = gemvBestIsa());

// The bf16 linear's native contract (matmul_bf16.h) on the weight-streaming loop: inp rounded to
// bf16 (round to nearest even), products summed in fp32 by AVX512-BF16 dot products (VDPBF16PS),
// no widening. Memory bound at 1 row like gemvForwardBf16 (the decoder's batch-1 bf16 step where
// the native gemm rounds inputs: one-shot and stepwise decode then agree); compute bound from a few
// rows on, where AMX tiles are faster. Threads and chunks as gemvForward; results independent of
// the thread count. Throws InternalError when the CPU lacks AVX512-BF16 (gemvBf16DotSupported).
bool gemvBf16DotSupported();
void gemvForwardBf16Dot(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                        int C, int OC);

}  // namespace ds::runtime
