// Linear layer on gemmBf16 (see matmul_bf16.h).
#include "runtime/tensor/matmul_bf16.h"

#include <atomic>
#include <cstddef>

#include "runtime/tensor/bf16_gemm.h"
#include "runtime/tensor/matmul.h"
#include "runtime/tensor/threads.h"

namespace ds::runtime {

namespace {
std::atomic<bool> gEnabled{true};
}

bool bf16LinearNative() {
  return gEnabled.load(std::memory_order_relaxed) && bf16GemmNativeAvailable();
}
void setBf16LinearNative(bool enable) { gEnabled.store(enable); }

void matmulForwardBf16(float* out, const float* inp, const bf16* weight, const float* bias, int N,
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
  // out[n, o] = sum_c inp[n, c] * W[o, c]
  gemmBf16(N, OC, C, f32Operand(inp, C, 1), bf16Operand(weight, C, 1), out, OC, beta);
}

void matmulBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const bf16* weight, int N, int C, int OC) {
  if (dinp != nullptr) {  // dinp[n, c] += sum_o dout[n, o] * W[o, c]
    gemmBf16(N, C, OC, f32Operand(dout, OC, 1), bf16Operand(weight, 1, C), dinp, C, 1.0f);
  }
  if (dweight != nullptr) {  // dW[o, c] += sum_n dout[n, o] * inp[n, c]
    gemmBf16(OC, C, N, f32Operand(dout, 1, OC), f32Operand(inp, 1, C), dweight, C, 1.0f);
  }
  if (dbias != nullptr) {
    matmulBackward(nullptr, nullptr, dbias, dout, inp, nullptr, N, C, OC);
  }
}

}  // namespace ds::runtime
