// Pointwise layers: GELU (GPT-2's tanh approximation) and the residual add. Backward
// ACCUMULATES into its input gradients unless the name says Set. Each is one OpenMP loop.
// GELU runs a vectorised kernel (gelu_kernels.h) picked once per process by the CPU: AVX-512
// where the CPU has it, else AVX2 + FMA (bitwise the AVX-512 results), else portable C++; all agree
// with the libm tanhf formula (math/gelu_math.h, which CUDA keeps) to the bound
// tests/runtime/tensor/gelu_test.cc states: |fast - libm| <= 4e-7 * max(1, |x|) for gelu and gelu'
// (measured 2.4e-7); against the exact formula in double, gelu's relative error <= 3e-5 (the
// rounding of u, amplified by exp(2u) where gelu is tiny; the libm version loses all digits there
// as 1 + tanh cancels). NaN in, NaN out;
// +-inf give what the libm version gives (gelu(+inf) = inf, gelu(-inf) = NaN, gelu'(+-inf) NaN).
#pragma once

#include <cstddef>

namespace ds::runtime {

enum class GeluIsa { kPortable, kAvx2, kAvx512 };
const char* geluIsaName(GeluIsa isa);
bool geluIsaSupported(GeluIsa isa);
GeluIsa geluBestIsa();  // AVX-512, else AVX2 + FMA, else portable; decided once

void geluForward(float* out, const float* inp, size_t n);
void geluBackward(float* dinp, const float* inp, const float* dout, size_t n);
// The same with the kernel named (tests; an InternalError when the CPU lacks it).
void geluForward(float* out, const float* inp, size_t n, GeluIsa isa);
void geluBackward(float* dinp, const float* inp, const float* dout, size_t n, GeluIsa isa);

// The MLP's fc bias and GELU in one pass over pre[N, OC] (the product without its bias):
// pre += bias (row-broadcast, bias[OC]; WRITTEN back, backward needs it), out = gelu(pre).
// The bias is added after the whole product (matmulForward with a bias starts the sum from it:
// the last bits differ); gelu is geluForward's bit for bit. bias may be null (pre unchanged).
void biasGeluForward(float* out, float* pre, const float* bias, int N, int OC);
// dinp = gelu'(inp) * dout, WRITTEN (whatever dinp held): the bits of zeroing dinp and then
// geluBackward.
void geluBackwardSet(float* dinp, const float* inp, const float* dout, size_t n);

// out = a + b; backward: da += dout, db += dout.
void residualForward(float* out, const float* a, const float* b, size_t n);
void residualBackward(float* da, float* db, const float* dout, size_t n);

}  // namespace ds::runtime
