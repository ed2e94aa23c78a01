// Internal to bf16_gemm: the AVX512-BF16 micro-kernel and its packing routines. A "word" holds
// the bf16 values of k = 2p (low half) and k = 2p + 1 (high half) of one row; zero past K.
//   B panels (kNR rows of B = columns of C): kp pairs x kNR words, word (p, r) at p * kNR + r.
//   A panels: either the same interleave with kMR rows (word (p, r) at p * kMR + r; used for
//   transposed sources) or row-major words (word (r, p) at r * lda + p; used for row-major
//   sources, a plain conversion). The kernel broadcasts A words, so either layout is fast.
// Not for callers outside runtime/tensor; everything here needs AVX512-BF16 (bf16GemmCpu...).
#pragma once

#include <cstdint>

namespace ds::runtime::detail {

constexpr int kMR = 8;   // rows of A per micro-tile (broadcast operand)
constexpr int kNR = 48;  // columns of C per micro-tile: 3 zmm of 16 fp32 accumulators

bool bf16GemmCpuHasAvx512Bf16();

// A view as in bf16_gemm.h: element (r, k) at src[r * rs + k * cs]; T is float or uint16_t.
// fp32 is rounded to bf16 to nearest even by vcvtneps2bf16 (denormals flush to zero).
// Row-major words of rows [0, rows) (needs cs == 1): dst[r * lda + p], lda >= kp.
void packRowsF32(uint32_t* dst, long lda, const float* src, long rs, int rows, int K);
void packRowsBf16(uint32_t* dst, long lda, const uint16_t* src, long rs, int rows, int K);
// One interleaved panel of R rows (R = kMR or kNR) starting at row r0 of a rows-row view.
void packPanelF32(uint32_t* dst, int R, const float* src, long rs, long cs, int r0, int rows,
                  int K);
void packPanelBf16(uint32_t* dst, int R, const uint16_t* src, long rs, long cs, int r0, int rows,
                   int K);

// c[i * ldc + j] (i < mr, j < nr) = (accumulate ? c : 0) + sum over kp pairs of A row i's words
// times B panel row j's words, fp32. A word (i, p) is at a[i * aRow + p * aPair].
void bf16MicroTile(int kp, const uint32_t* a, long aRow, long aPair, const uint32_t* b, float* c,
                   long ldc, int mr, int nr, bool accumulate);

}  // namespace ds::runtime::detail
