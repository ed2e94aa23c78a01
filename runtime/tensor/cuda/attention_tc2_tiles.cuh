// Shared-memory tiles of the second tensor-core attention (attention_tc2_forward.cu,
// attention_tc2_backward.cu): the padded row layout, the cp.async tile loader and the ldmatrix
// fragment loaders over it. Not the kernels. Invariant: a tile is [rows][kLd] 16-bit with rows
// 16-byte aligned; kLd = 72 (144 bytes) puts the 8 rows of every ldmatrix matrix and the 8
// 16-byte chunks of every cp.async phase in distinct banks.
#pragma once

#include "runtime/tensor/cuda/mma_bf16.cuh"

namespace ds::runtime::cuda::tc2 {

using tc::u32;

inline constexpr int kHs = 64;       // head size: the only one these kernels take
inline constexpr int kLd = kHs + 8;  // shared row stride in bf16
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Issues (does not wait for) dst[r][0..63] = src[(row0 + r) * ld + 0..63] for r < ROWS, by
// THREADS threads; rows at or past T are zero-filled (finite zeros matter: a masked probability
// 0 times a NaN from stale shared memory would still be NaN). T >= 1, so row 0 is addressable.
template <int ROWS, int THREADS>
__device__ __forceinline__ void loadTileAsync(uint16_t* dst, const uint16_t* src, int ld, int row0,
                                              int T) {
  constexpr int kChunks = kHs / 8;  // 16-byte chunks per row
  static_assert(ROWS * kChunks % THREADS == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < ROWS * kChunks / THREADS; ++i) {
    const int e = static_cast<int>(threadIdx.x) + i * THREADS;
    const int r = e / kChunks, col = (e % kChunks) * 8, t = row0 + r;
    const bool valid = t < T;
    tc::cpAsync16(dst + r * kLd + col, src + static_cast<size_t>(valid ? t : 0) * ld + col, valid);
  }
}

// The A fragment (mma's a[0..3]) of rows m0..m0+15, columns k0..k0+15 of a row-major [m][k]
// tile: lanes 0-7 address rows m0+0..7 at k0 (matrix 0 -> a[0] = A[g][2c..]), lanes 8-15 rows
// m0+8..15 at k0 (a[1] = A[g+8][2c..]), lanes 16-23 rows m0+0..7 at k0+8 (a[2]), lanes 24-31
// rows m0+8..15 at k0+8 (a[3]).
__device__ __forceinline__ void loadA(u32 (&a)[4], const uint16_t* tile, int m0, int k0, int lane) {
  tc::ldmatrixX4(a, tile + (m0 + lane % 16) * kLd + k0 + 8 * (lane / 16));
}

// B fragments for B[k][n] = tile[n0 + n][k] (B^T row-major: keys or queries by dimension), n =
// 0..7, k = k0..k0+31: lane l addresses row n0 + l%8, column k0 + 8*(l/8), so matrix i holds
// tile[n0+g][k0+8i+2c..]; b0 = B[2c..][g] of k-step k0 is r[0], its b1 = B[2c+8..][g] r[1], and
// r[2], r[3] are b0, b1 of k-step k0+16.
__device__ __forceinline__ void loadBRows(u32 (&r)[4], const uint16_t* tile, int n0, int k0,
                                          int lane) {
  tc::ldmatrixX4(r, tile + (n0 + lane % 8) * kLd + k0 + 8 * (lane / 8));
}

// B fragments of a 16 x 16 block of a row-major [k][n] tile (rows k0.., columns n0..): lane l
// addresses row k0 + l%8 + 8*((l/8)%2), column n0 + 8*(l/16); transposed, r[0], r[1] are b0, b1
// of columns n0..n0+7 and r[2], r[3] those of n0+8..n0+15. (attention_tc_kernels.cu's loadBTrans.)
__device__ __forceinline__ void loadBTrans(u32 (&r)[4], const uint16_t* tile, int k0, int n0,
                                           int lane) {
  tc::ldmatrixX4Trans(r,
                      tile + (k0 + lane % 8 + 8 * ((lane / 8) % 2)) * kLd + n0 + 8 * (lane / 16));
}

// The accumulator fragments of n-blocks 2j, 2j+1 (columns 16j..16j+15) as the H (bf16 or fp16) A
// fragment of k = 16j..16j+15: a[0] = rows g, columns 2c.. of block 2j; a[1] row g+8; a[2], a[3]
// the same of block 2j+1 (columns 16j+8+2c..).
template <class H = tc::Bf16>
__device__ __forceinline__ void accToA(u32 (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = H::pack(lo[0], lo[1]);
  a[1] = H::pack(lo[2], lo[3]);
  a[2] = H::pack(hi[0], hi[1]);
  a[3] = H::pack(hi[2], hi[3]);
}

}  // namespace ds::runtime::cuda::tc2
