// Internal to bf16_gemm: the AVX512-BF16 micro-kernel and its panel layout. A panel of R rows
// (R = kMR for A, kNR for B) holds, for each k pair p, R uint32 words: word r = bf16(k=2p) in the
// low half and bf16(k=2p+1) in the high half of row r (zero past K and past the last row).
// Not for callers outside runtime/tensor; compiled with target attributes, so only call it after
// bf16GemmCpuHasAvx512Bf16() says yes.
#pragma once

#include <cstdint>

namespace ds::runtime::detail {

constexpr int kMR = 8;   // rows of A per micro-tile (broadcast operand)
constexpr int kNR = 48;  // columns of C per micro-tile: 3 zmm of 16 fp32 accumulators

bool bf16GemmCpuHasAvx512Bf16();

// c[i * ldc + j] (i < mr, j < nr) = (accumulate ? c : 0) + sum over kp pairs of a-panel row i
// times b-panel row j, in fp32.
void bf16MicroTile(int kp, const uint32_t* a, const uint32_t* b, float* c, long ldc, int mr, int nr,
                   bool accumulate);

}  // namespace ds::runtime::detail
