// Linear layer on the native bf16 gemm (bf16_gemm.h): the same contract as matmul.h (forward
// out = inp . W^T + bias; backward ACCUMULATES into dinp, dweight, dbias) with W given as bf16 and
// inp/dout rounded to bf16 inside the gemm; products and sums fp32, dbias from fp32 dout.
// Routing rule (bf16LinearNative), from bench/results/bf16_gemm.txt: the native AVX512-BF16 kernel
// ran 2-3.5x the GFLOP/s of "widen W to fp32 + OpenBLAS sgemm" at every GPT-2 small linear shape
// (rows 256-2048, C 768/3072, OC 768-3072, forward and both backward products, 1 and 2 threads),
// so the rule is simply "the CPU has AVX512-BF16"; without it the model keeps widen + sgemm.
#pragma once

#include "core/dtype.h"

namespace ds::runtime {

// True when the bf16 model should run its linear layers here instead of widen + sgemm: the CPU
// has AVX512-BF16 and no one called setBf16LinearNative(false).
bool bf16LinearNative();
// Process-wide switch for A/B measurements and tests (default on; on has no effect without
// AVX512-BF16).
void setBf16LinearNative(bool enable);

void matmulForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
                       int C, int OC);
void matmulBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const bf16* weight, int N, int C, int OC);

}  // namespace ds::runtime
