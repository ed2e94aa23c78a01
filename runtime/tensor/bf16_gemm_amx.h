// Internal to bf16_gemm: the AMX (Advanced Matrix Extensions) path of gemmBf16. Tiles of 16 rows
// x 16 bf16 pairs multiply on the TMUL unit (tdpbf16ps: 16x16 fp32 accumulators += 16x32 bf16 .
// 32x16 bf16). One operand ("X") is read as rows of k-contiguous bf16 pairs, the other ("Y") as
// panels of 16 columns in the pair-interleaved (VNNI) layout, word (p, c) at p * 16 + c.
//   A B given as bf16 rows contiguous in k with K % 32 == 0 (the linear forward's W[N, K]) is read
//   in place as X (no packing; a last tile of fewer than 16 rows is copied) and the result computed
//   transposed (C^T = W . A^T), A packed as Y; otherwise A is X and B is Y, both packed. Both
//   orientations compute each C element as the same sequence of tdpbf16ps steps over k (32 values a
//   step, zero padded at the end), starting from C (beta 1) or zero, so results are bitwise
//   independent of the thread count and of M and N.
// Not for callers outside runtime/tensor: call bf16GemmAmxAvailable() first.
#pragma once

#include "runtime/tensor/bf16_gemm.h"

namespace ds::runtime::detail {

// True when the CPU reports amx-bf16 and amx-tile (and AVX512-BF16, used for packing) and Linux
// granted this process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once; a refusal
// is logged once at info level with the reason).
bool bf16GemmAmxAvailable();

// gemmBf16's contract (beta 0 or 1, strided operands, fp32 accumulation); sizes already checked,
// M, N, K > 0.
void gemmAmx(int M, int N, int K, const GemmOperand& A, const GemmOperand& B, float* C, long ldc,
             float beta);

}  // namespace ds::runtime::detail
